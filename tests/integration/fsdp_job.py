"""Runs of BYOL (a momentum teacher, BatchNorm, AdamW), MoCo v2 (a key encoder with
shuffle-BN and a queue of keys) and MoCo v3, DINO's ViT, DINOv2's and iBOT's masked
ViT, or MAE's and I-JEPA's ViT of the kept patches, on the tiny data set, one after
another in the same processes, for tests/integration/test_fsdp.py and
test_fsdp_methods.py.

    python -m tests.integration.fsdp_job RUNS_JSON

``RUNS_JSON`` is a list of ``{"dir", "epochs", "strategy"}`` with, optionally,
``"overrides"`` (more ``key=value``), ``"recipe"`` (a key of :data:`RECIPES`;
byol_digits by default), ``"timm"`` (true: the recipe's overrides of
:data:`TIMM_RECIPES`, on timm's ViT), ``"stop_after"`` (the run stops after that many epochs, with
``engine.terminate()``: a stop with the plan of ``epochs`` kept) and files rank 0
writes: ``"weights"`` (the model's whole state dict after training, gathered from the
shards), ``"start"`` (the whole model and optimizer state right after the resume,
before training), ``"teacher"`` (the momentum teacher's whole state dict after
training; beside it, ``<file>.json``: :func:`teacher_shards`) and ``"grad_norms"``
(JSON: the rows of :class:`GradNorms`). Each trains ``configs/<recipe>.yaml`` to
``epochs`` epochs in ``dir``, going on from its newest checkpoint, in one process or on
torchrun's ranks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
)
from torch.distributed.tensor import DTensor

from hookbus import Hook, SSLTrainer, default_hooks
from hookbus.parts.sharding import local
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
CNN = (*RUNS, "model.backbone.width=4", "model.head.dims=[16,16,8]")
"""The digits recipes' CNN and projector (with BatchNorm) shrunk to the tiny images."""
SMALL = (*CNN, "model.predictor.dims=[8,16,8]")
"""BYOL's (and MoCo v3's) model shrunk to the tiny images."""
MOCO = (*CNN, "loss.moco.queue_size=24")
"""MoCo v2's model shrunk to the tiny images, a queue of 24 keys: on two ranks a step
queues 16 (2 views of the global batch of 8), so it is full from the 2nd step and
wraps around."""
VIT = (
    *RUNS,
    "data.small_views.size=8",
    "model.backbone.vit.patch_size=4",
    "model.backbone.vit.activation_checkpointing=true",
    "model.amp.enabled=true",
)
"""DINO's ViT recipe on the tiny images (2x2 patches), its blocks checkpointed, in bf16."""
SMALL_VIT = (
    "model.backbone.vit.patch_size=2",
    "model.backbone.vit.width=8",
    "model.backbone.vit.depth=2",
    "model.backbone.vit.heads=2",
    "model.backbone.vit.mlp_dim=16",
)
"""A ViT of 2 blocks of width 8: a 4x4 grid of 2x2 patches on the 8 px images."""
MASKED = (
    *RUNS,
    *SMALL_VIT,
    "data.small_views.size=6",
    "model.head.dims=[backbone,16,8]",
    "model.prototypes.count=12",
)
"""DINOv2's and iBOT's recipes on a ViT of 2 blocks of width 8 (a 4x4 grid of 2x2
patches on the 8 px global views, 3x3 on the 6 px local ones), 12 prototypes, in
float32."""
MAE = (
    *RUNS,
    *SMALL_VIT,
    "model.mae_decoder.width=8",
    "model.mae_decoder.depth=2",
    "model.mae_decoder.heads=2",
)
"""MAE's recipe on :data:`SMALL_VIT`, a decoder of 2 blocks of width 8: 4 of the 16
patches encoded."""
IJEPA = (
    *RUNS,
    *SMALL_VIT,
    "model.ijepa_predictor.width=8",
    "model.ijepa_predictor.depth=2",
    "model.ijepa_predictor.heads=2",
    "loss.ijepa.target_blocks=2",
    "loss.ijepa.min_context_patches=2",
)
"""I-JEPA's recipe on :data:`SMALL_VIT`, a predictor of 2 blocks of width 8, 2 target
blocks (about 3 of the 16 patches each) and a context of at least 2 patches."""
DISTILLATION = (
    *RUNS,
    "model.backbone.width=4",
    "loss.distillation.queue_size=24",
    "loss.distillation.mode=both",
)
"""The distillation recipe's student shrunk to the tiny images, both losses, a queue of 24
teacher embeddings (16 a step on two ranks: it wraps around); the teacher's weights file
comes with the run's overrides."""
DINOV3 = (
    *MASKED,
    "model.backbone.vit.position_embedding=rope",
    "model.backbone.vit.rope_jitter=1.5",
    "model.backbone.vit.registers=1",
    "loss.dinov3.gram_start=1",
    "loss.dinov3.gram_update_every=2",
    "loss.dinov3.gram_first_update=2",
    "loss.dinov3.gram_max_updates=2",
)
"""DINOv3's recipe on :data:`MASKED`'s ViT with RoPE (jittered) and a register, its Gram
teacher taken at step 1 and refreshed after steps 1 and 3."""
LEJEPA = (
    *RUNS,
    *SMALL_VIT,
    "data.small_views.size=6",
    "model.head.dims=[backbone,16,8]",
    "loss.lejepa.slices=16",
)
"""LeJEPA's recipe on :data:`SMALL_VIT`, a projector 8-16-8, 16 directions."""
RECIPES = {
    "byol_digits": SMALL,
    "distillation_digits": DISTILLATION,
    "moco_digits": MOCO,
    "moco_v3_digits": SMALL,
    "dino_digits_vit_tiny": VIT,
    "dinov2_digits": MASKED,
    "ibot_digits": MASKED,
    "mae_digits_vit_tiny": MAE,
    "ijepa_digits_vit_tiny": IJEPA,
    "dinov3_digits_vit_tiny": DINOV3,
    "lejepa_digits_vit_tiny": LEJEPA,
}
"""The overrides of each recipe the runs train."""
TIMM_VIT = (
    *RUNS,
    "model.backbone.name=timm:vit_tiny_patch16_224",
    "data.name=synthetic",
    "data.synthetic.train_size=24",
    "data.synthetic.test_size=8",
    "data.synthetic.channels=1",
    "data.image_size=32",
)
"""timm's ViT-Ti/16 on 24 generated grey images of 32 px (``synthetic``; the tiny images'
8 px are below its patch): a 2x2 grid of 16-pixel patches, 3 steps an epoch on two
ranks."""
TIMM_RECIPES = {
    "dinov2_digits": (
        *TIMM_VIT,
        "data.small_views.size=16",
        "model.head.dims=[backbone,16,8]",
        "model.head.batch_norm=false",
        "model.prototypes.count=12",
    ),
    "mae_digits_vit_tiny": (
        *TIMM_VIT,
        "model.mae_decoder.width=8",
        "model.mae_decoder.depth=2",
        "model.mae_decoder.heads=2",
    ),
}
"""The overrides of the runs on timm's ViT (a spec with ``"timm": true``): DINOv2's
recipe with 12 prototypes, 1 patch a small view, a head without BatchNorm (a step may
mask a single patch of its batch), MAE's with a decoder of 2 blocks of
width 8 (1 of the 4 patches encoded)."""


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


class GradNorms(Hook):
    """Keeps, for every optimizer step, the gradient norm before clipping, whether it is a
    plain tensor, and the norm of the gradients the step took (after clipping).

    Fires on ``on_update``; reads ``state.grad_norm`` and the model's gradients (their
    norm over every shard); writes nothing.
    """

    def __init__(self) -> None:
        super().__init__(name="grad_norms")
        self.norms: list[dict[str, Any]] = []

    def on_update(self, engine: Engine) -> None:
        state = engine.state
        grads = [p.grad for p in state.base_model.parameters() if p.grad is not None]
        clipped = torch.nn.utils.get_total_norm(grads)
        clipped = clipped.full_tensor() if isinstance(clipped, DTensor) else clipped
        norm = state.grad_norm
        self.norms.append(
            {"norm": float(norm), "plain": type(norm) is torch.Tensor, "clipped": float(clipped)}
        )


def teacher_shards(teacher: nn.Module) -> dict[str, Any]:
    """Whether every parameter of ``teacher`` is sharded (a ``DTensor``), and how many of
    their elements this rank holds (``local``) and all ranks together (``whole``)."""
    parameters = list(teacher.parameters())
    return {
        "sharded": all(isinstance(parameter, DTensor) for parameter in parameters),
        "local": sum(local(parameter).numel() for parameter in parameters),
        "whole": sum(parameter.numel() for parameter in parameters),
    }


def whole_state(state: Any, *, optimizer: bool) -> dict[str, Any]:
    """The model's (and the optimizer's) whole state dicts, gathered from the shards.

    Of an optimizer without state yet (a run's first step still to come) the state dict
    is ``{}``: DCP's ``get_state_dict`` would make one by a step at learning rate 0,
    which leaves SGD as it was but counts a step of AdamW (its bias correction then
    differs from the run's without the dump)."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    if not optimizer or not state.optimizer.state:
        model = get_model_state_dict(state.base_model, options=options)
        return {"model": model, "optimizer": {}} if optimizer else model
    model, optim = get_state_dict(state.base_model, state.optimizer, options=options)
    return {"model": model, "optimizer": optim}


def run(spec: dict[str, Any]) -> None:
    recipe = spec.get("recipe", "byol_digits")
    cfg = tiny_recipe(
        recipe,
        Path(spec["dir"]),
        *(TIMM_RECIPES if spec.get("timm") else RECIPES)[recipe],
        f"optimizer.num_epochs={spec['epochs']}",
        f"distributed.strategy={spec['strategy']}",
        *spec.get("overrides", ()),
    )
    hooks = default_hooks(cfg)
    if "stop_after" in spec:
        hooks.append(StopAfter(spec["stop_after"]))
    norms = GradNorms()
    if "grad_norms" in spec:
        hooks.append(norms)
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
    if "teacher" in spec:
        (teacher,) = (hook.teacher for hook in hooks if hook.name == "momentum_teacher")
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        whole = get_model_state_dict(teacher, options=options)
        if state.rank == 0:
            torch.save(whole, spec["teacher"])
            Path(f"{spec['teacher']}.json").write_text(json.dumps(teacher_shards(teacher)))
    if "grad_norms" in spec and state.rank == 0:
        Path(spec["grad_norms"]).write_text(json.dumps(norms.norms))


def main() -> None:
    for spec in json.loads(sys.argv[1]):
        run(spec)


if __name__ == "__main__":
    main()
