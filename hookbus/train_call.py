"""``hookbus.train``: a method on a model over a folder in one call, from Python.

    import hookbus

    run = hookbus.train(out="runs/dino_photos", data="photos/", method="dino", model="vit_tiny")
    print(run.checkpoint, run.summary["train_iterations"])
    hookbus.embed_images(run.dir, ["photos/a.jpg"])

The config is composed as ``hookbus train --method ...`` composes it
(:func:`hookbus.compose.compose`); keyword arguments go on top of it: a config key as
``section__key`` (``optimizer__lr=0.3``), a whole section as a mapping
(``optimizer={"lr": 0.3}``), or a short name (:data:`SHORT_NAMES`: ``epochs=5``). The
run resumes from its newest checkpoint and refuses to change a finished run, as a
command does.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookbus.compose import compose
from hookbus.config import Config
from hookbus.console import console_unless_configured
from hookbus.engine.checkpoint.checkpoint_io import list_checkpoints
from hookbus.engine.errors import ConfigError
from hookbus.trainer import SSLTrainer

logger = logging.getLogger("hookbus")

SHORT_NAMES = {
    "epochs": "optimizer.num_epochs",
    "batch_size": "data.batch_size",
    "image_size": "data.image_size",
    "lr": "optimizer.lr",
    "seed": "trainer.seed",
    "device": "machine.device",
}
"""Keyword arguments of :func:`train` that stand for a config key."""


@dataclass(frozen=True)
class TrainedRun:
    """What :func:`train` returns: the run directory ``dir``, its effective ``config``,
    its newest ``checkpoint`` (None when it wrote none), the run's ``summary`` (as the
    command prints it: iterations, the last phases' metrics) and its ``history`` (one
    record per phase this call ran), and the ``notes`` of the composition (a meter
    switched off, the length chosen)."""

    dir: Path
    config: Config
    checkpoint: Path | None
    summary: dict[str, Any]
    history: list[dict[str, Any]]
    notes: tuple[str, ...]


def train(
    out: str | Path,
    data: str | Path,
    method: str,
    model: str | None = None,
    **overrides: Any,
) -> TrainedRun:
    """Train ``method`` on ``model`` (default resnet18; small_cnn for ``digits``) over
    ``data`` (a folder of images, or ``"digits"``) into the run directory ``out``, and
    return the trained run. ``overrides`` are config keys (see the module's docstring).
    Raises a :class:`hookbus.engine.errors.UserError` in one line for a choice that
    cannot be composed, a bad override or a finished run that the overrides would change.
    """
    lines = [line for key, value in overrides.items() for line in override_lines(key, value)]
    composed = compose(method, model, data, out, lines)
    with console_unless_configured():
        for note in composed.notes:
            logger.info("%s", note)
    trainer = SSLTrainer(composed.config)
    state = trainer.train()
    return TrainedRun(
        dir=state.run_dir,
        config=composed.config,
        checkpoint=next(iter(reversed(list_checkpoints(state.run_dir))), None),
        summary=dict(state.summary),
        history=list(state.history),
        notes=composed.notes,
    )


def override_lines(key: str, value: Any) -> list[str]:
    """The ``dotted.key=value`` lines of one keyword argument of :func:`train`."""
    if key in SHORT_NAMES:
        return [f"{SHORT_NAMES[key]}={_yaml(value)}"]
    if isinstance(value, dict) and ("__" in key or key in Config.model_fields):
        # A mapping at any depth sets its keys one by one: it goes on top of the
        # composed section (loss__distillation={"teacher": {...}} keeps the rest).
        return [
            line
            for inner, item in value.items()
            for line in override_lines(f"{key}__{inner}", item)
        ]
    if "__" in key:
        return [f"{key.replace('__', '.')}={_yaml(value)}"]
    raise ConfigError(
        f"hookbus.train: {key}={value!r} is not a config key; give section__key=value "
        f"(optimizer__lr=0.3), a section as a mapping (optimizer={{'lr': 0.3}}), or one of "
        f"{', '.join(SHORT_NAMES)}"
    )


def _yaml(value: Any) -> str:
    """``value`` as the YAML an override reads (JSON is YAML; a path is its text)."""
    return json.dumps(str(value) if isinstance(value, Path) else value)
