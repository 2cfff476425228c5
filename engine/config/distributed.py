"""The ``distributed`` section: the process group."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hookbus.engine.section import Section


class DistributedConfig(Section):
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="nccl on GPUs, gloo otherwise, when auto"
    )
    find_unused_parameters: bool = Field(False, description="passed to DDP")
    nproc_per_node: int = Field(
        1,
        ge=1,
        le=1024,
        description="processes `hookbus train` starts on this machine (ignored under torchrun)",
    )
    timeout_seconds: float = Field(
        600.0,
        gt=0,
        le=7 * 24 * 3600,
        description="a collective that waits longer (a dead or hung rank) ends the run",
    )
    init_timeout_seconds: float = Field(
        300.0,
        gt=0,
        le=7 * 24 * 3600,
        description="the processes must all meet (the rendezvous at MASTER_ADDR:MASTER_PORT) "
        "within this, or the run ends with one line saying which did not",
    )
    sync_batch_norm: bool = Field(
        False, description="convert BatchNorm layers to SyncBatchNorm (CUDA devices only)"
    )
