"""The ``trainer`` section: the train step, seeding, test phases, logging, user modules."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import Section


class TrainerConfig(Section):
    train_step_name: str = Field(
        "standard_train_step", description="train step, by its registered name"
    )
    seed: int = Field(
        0, ge=0, le=2**32 - 1, description="seed of model init, data order and augmentations"
    )
    test_model: bool = Field(True, description="run test phases")
    test_only: bool = Field(False, description="run one test phase and no training")
    test_every_num_epochs: int = Field(
        1, ge=1, le=100_000, description="a test phase after every N train phases"
    )
    log_frequency: int = Field(
        10, ge=1, le=10**9, description="log a line every N train iterations"
    )
    resume_stopped: bool = Field(
        False,
        description="go on with a run that a handler ended early with engine.terminate() "
        "(without it, such a run counts as finished and a rerun trains nothing)",
    )
    imports: list[str] = Field(
        default_factory=list,
        description="modules imported before the run, so that the steps, hooks and "
        "components they register can be chosen by name",
    )
    import_paths: list[str] = Field(
        default_factory=list,
        description="folders put at the front of sys.path before trainer.imports is "
        "imported (relative: to the recipe's folder, or in an override to the current "
        "directory); nothing is imported from the working directory otherwise",
    )
