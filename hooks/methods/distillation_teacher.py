"""DistillationTeacherHook: distillation's frozen teacher on each batch, and its queue."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.errors import CheckpointError
from hookbus.engine.process import distributed
from hookbus.parts.losses.ring_buffer import RingBuffer


@functools.cache
def _digest(path: str, size: int, mtime_ns: int) -> str:
    from hookbus.parts.models.weights_file import file_sha256

    return file_sha256(Path(path))


def teacher_digest(teacher: str | Path) -> str:
    """What names a teacher's weights: the SHA-256 of its file (hashed once per file
    version in a process), or the timm tag when ``teacher`` is a name."""
    if isinstance(teacher, str):
        return teacher
    status = os.stat(teacher)
    return _digest(str(teacher), status.st_size, status.st_mtime_ns)


@register_hook("distillation_teacher")
class DistillationTeacherHook(Hook):
    """Runs the model's frozen teacher (``state.base_model.teacher``) on the views and
    keeps a first-in first-out queue of its last ``queue_size`` embeddings.

    ======================  ===========================================================
    event                   what it does
    ======================  ===========================================================
    ``on_start``            moves the teacher and a loaded queue to ``state.device``;
                            refuses a checkpoint whose teacher was another file
    ``on_forward``          per view, the teacher's input (resized, renormalised:
                            :func:`~hookbus.parts.models.distillation.teacher_images`)
                            encoded without gradients, in eval mode, under the run's
                            autocast: ``teacher_embeddings`` (L2-normalised, float32)
                            and, for the dense loss, ``teacher_patches``
                            ``[B, H, W, D]``; in train phases the embeddings of every
                            view, gathered from every rank in rank order, are queued
                            (the oldest dropping out); then ``teacher_queue``, all
                            ``queue_size`` slots, newest first (zeros until filled)
    ======================  ===========================================================

    State: the queue and the teacher's digest (:func:`teacher_digest`), in checkpoints
    under ``distillation_teacher``; the teacher's weights are never written.
    """

    priority = Priority.METHOD

    def __init__(self, queue_size: int, teacher: str | Path = "", dense: bool = False) -> None:
        super().__init__()
        if queue_size < 1:
            raise ValueError(f"queue_size must be at least 1, got {queue_size}")
        self.queue_size = queue_size
        self.teacher = teacher
        self.dense = dense
        self.buffer = RingBuffer(queue_size)

    def on_start(self, engine: RunEngine) -> None:
        from hookbus.parts.models.distillation import teacher_of

        state = engine.state
        teacher_of(state.base_model).to(state.device)
        self.buffer.to(state.device)

    def on_forward(self, engine: RunEngine) -> None:
        from hookbus.parts.models.distillation import spatial_features, teacher_images, teacher_of

        state = engine.state
        if "views" not in state.last_batch:
            return
        teacher = teacher_of(state.base_model)
        views = state.last_batch["views"]
        normalised = state.cfg.data.torchvision
        channels = views[0].shape[1]
        mean = views[0].new_tensor(normalised.mean[:channels])
        std = views[0].new_tensor(normalised.std[:channels])
        autocast = torch.autocast(
            device_type=torch.device(state.device).type,
            dtype=state.amp_dtype or torch.float32,
            enabled=state.amp_dtype is not None,
        )
        embeddings, patches = [], []
        with torch.no_grad(), autocast:
            for view in views:
                images = teacher_images(teacher, view, mean, std)
                embeddings.append(F.normalize(teacher.backbone(images).float(), dim=1))
                if self.dense:
                    grid = spatial_features(teacher.backbone, images)
                    patches.append(grid.permute(0, 2, 3, 1).float())
        if state.train:
            self.enqueue(embeddings)
        output = state.last_output
        output["teacher_embeddings"] = embeddings
        if patches:
            output["teacher_patches"] = patches
        queue = self.buffer.newest_first()
        if queue is None:
            queue = embeddings[0].new_zeros(self.queue_size, embeddings[0].shape[1])
        output["teacher_queue"] = queue

    def enqueue(self, embeddings: list[torch.Tensor]) -> None:
        """Queue the teacher ``embeddings`` of each view (``[B, D]``), each gathered from
        every rank in rank order, so that every rank holds the queue one process would."""
        self.buffer.write(torch.cat([distributed.all_gather_cat(e) for e in embeddings]))

    def state_dict(self) -> dict[str, Any]:
        """The queue (``queue``, ``position``, ``filled``) and the teacher's digest."""
        return {**self.buffer.state("queue"), "teacher": teacher_digest(self.teacher)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the queue; a checkpoint of another teacher is a CheckpointError."""
        saved, own = state.get("teacher"), teacher_digest(self.teacher)
        if saved != own:
            raise CheckpointError(
                f"distillation_teacher: the run was trained with another teacher ({saved}); "
                f"this one is {own} ({self.teacher}): set loss.distillation.teacher back to "
                "the run's, or start a new run in another checkpoint.dir"
            )
        self.buffer.load(state, "queue")
