"""Runs of BYOL (a momentum teacher, BatchNorm, AdamW), or DINO's ViT, on the tiny data
set, one after another in the same processes, for tests/integration/test_fsdp.py.

    python -m tests.integration.fsdp_job RUNS_JSON

``RUNS_JSON`` is a list of ``{"dir", "epochs", "strategy"}`` with, optionally,
``"overrides"`` (more ``key=value``), ``"weights"`` (a file where rank 0 saves the
model's whole state dict after training, gathered from the shards), ``"start"`` (a
file where rank 0 saves the whole model and optimizer state right after the resume,
before training), ``"recipe"`` (``dino_digits_vit_tiny``: :data:`VIT`; byol_digits by
default) and ``"stop_after"`` (the run stops after that many epochs, with
``engine.terminate()``: a stop with the plan of ``epochs`` kept). Each trains
``configs/<recipe>.yaml`` to ``epochs`` epochs in ``dir``, going on from its newest
checkpoint, in one process or on torchrun's ranks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
)

from hookbus import Hook, SSLTrainer, default_hooks
from tests.tiny_data import tiny_recipe

RUNS = (
    "data.batch_size=4",
    "checkpoint.phase_frequency=1",
    "checkpoint.keep_last=3",
    "trainer.test_every_num_epochs=100",
    "hooks.summary_plot.enabled=false",
    "distributed.backend=gloo",
    "machine.device=cpu",
    "machine.num_threads=1",
)
"""24 train images in batches of 4: 6 steps an epoch in one process, 3 on two ranks."""
SMALL = (
    *RUNS,
    "model.backbone.width=4",
    "model.head.dims=[16,16,8]",
    "model.predictor.dims=[8,16,8]",
)
"""BYOL's model shrunk to the tiny images."""
VIT = (
    *RUNS,
    "data.small_views.size=8",
    "model.backbone.vit.patch_size=4",
    "model.backbone.vit.activation_checkpointing=true",
    "model.amp.enabled=true",
)
"""DINO's ViT recipe on the tiny images (2x2 patches), its blocks checkpointed, in bf16."""


class StopAfter(Hook):
    """Ends the run with ``engine.terminate()`` after ``epochs`` train phases.

    Fires on ``on_phase_end``; reads ``train_phase_idx``; writes nothing.
    """

    def __init__(self, epochs: int) -> None:
        super().__init__(name="stop_after")
        self.epochs = epochs

    def on_phase_end(self, engine: Engine) -> None:
        if engine.state.train_phase_idx + 1 == self.epochs:
            engine.terminate()


def whole_state(state: Any, *, optimizer: bool) -> dict[str, Any]:
    """The model's (and the optimizer's) whole state dicts, gathered from the shards."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    if not optimizer:
        return get_model_state_dict(state.base_model, options=options)
    model, optim = get_state_dict(state.base_model, state.optimizer, options=options)
    return {"model": model, "optimizer": optim}


def run(spec: dict[str, Any]) -> None:
    recipe = spec.get("recipe", "byol_digits")
    cfg = tiny_recipe(
        recipe,
        Path(spec["dir"]),
        *(VIT if recipe == "dino_digits_vit_tiny" else SMALL),
        f"optimizer.num_epochs={spec['epochs']}",
        f"distributed.strategy={spec['strategy']}",
        *spec.get("overrides", ()),
    )
    hooks = default_hooks(cfg)
    if "stop_after" in spec:
        hooks.append(StopAfter(spec["stop_after"]))
    trainer = SSLTrainer(cfg, hooks)
    state = trainer.setup()
    if "start" in spec:
        start = whole_state(state, optimizer=True)
        if state.rank == 0:
            torch.save(start, spec["start"])
    trainer.train()
    if "weights" in spec:
        weights = whole_state(state, optimizer=False)
        if state.rank == 0:
            torch.save(weights, spec["weights"])


def main() -> None:
    for spec in json.loads(sys.argv[1]):
        run(spec)


if __name__ == "__main__":
    main()
