"""The ``machine`` section: threads and determinism of the process."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hookbus.engine.section import Section


class MachineConfig(Section):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="cuda when available")
    flush_denormal: bool = Field(True, description="flush denormal floats (fast CPU math)")
    num_threads: int = Field(
        0, ge=0, le=1024, description="torch CPU threads; 0 keeps torch's choice"
    )
    deterministic: bool = Field(
        False,
        description="deterministic algorithms only (torch.use_deterministic_algorithms, "
        "cuDNN deterministic, no cuDNN autotuning): bit-exact GPU resumes, slower kernels",
    )
