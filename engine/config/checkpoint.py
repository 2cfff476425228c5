"""The ``checkpoint`` section: where and how often checkpoints are written, auto-resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from hookbus.engine.section import Section


class CheckpointConfig(Section):
    dir: Path = Field(Path("runs/default"), description="run directory: checkpoints and logs")
    phase_frequency: int = Field(1, ge=0, le=100_000, description="every N train phases (0 = off)")
    iter_frequency: int = Field(0, ge=0, le=10**9, description="every N train iterations (0 = off)")
    keep_last: int = Field(2, ge=1, le=1000, description="checkpoints kept")

    @field_validator("dir", mode="before")
    @classmethod
    def _a_path(cls, value: Any) -> Any:
        """A run directory is named: not empty, no NUL, at most 4096 characters."""
        if isinstance(value, str | Path):
            text = str(value)
            if not text.strip():
                raise ValueError("is empty: name the run directory (runs/my_run, say)")
            if "\0" in text:
                raise ValueError("holds a NUL character")
            if len(text) > 4096 or any(len(part) > 255 for part in Path(text).parts):
                raise ValueError("is too long (4096 characters, 255 per folder name)")
        return value

    auto_resume: bool = Field(True, description="resume from the newest checkpoint in dir")
    change_finished: bool = Field(
        False,
        description="let a run whose newest checkpoint is its last (a finished run) go on "
        "with another config (more epochs, say); false: such a rerun is refused, naming "
        "each changed key, so a finished run is never changed by accident",
    )
    async_write: bool = Field(
        False,
        description="copy the state to host memory at the step and write it on a background "
        "thread (training waits for the copy only; costs one host copy of the state)",
    )
