"""A user module that registers a data set under a name hookbus already uses (for the
bad-input tests: importing it through ``trainer.imports`` must be one clear error)."""

from __future__ import annotations

from hookbus import DATASETS


@DATASETS.register("digits")
def build_other_digits(cfg: object) -> None:
    """Never called: the registration itself fails."""
