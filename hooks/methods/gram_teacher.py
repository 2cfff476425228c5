"""GramTeacherHook: DINOv3's Gram teacher, a snapshot of the momentum teacher taken at
one step and refreshed every so many steps, and its patch features of the global views."""

from __future__ import annotations

import copy
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.parts.sharding import is_sharded, load_weights, local, sharded_copy

GramResize = Literal["bicubic", "bilinear"]
"""How the Gram teacher's patch features on a larger grid are brought to the student's."""


def refreshes_due(step: int, first: int, every: int, most: int | None) -> int:
    """How many refreshes of the Gram teacher are done once train step ``step`` (from 0)
    ends: one after each step ``s`` with ``s + 1 >= first`` and ``(s + 1) % every == 0``
    (the authors' rule), at most ``most`` (None: no limit); none when ``every`` is 0."""
    if not every or step + 1 < first:
        return 0
    due = (step + 1) // every - (max(first, 1) - 1) // every
    return due if most is None else min(due, most)


def resize_patch_grid(tokens: Tensor, rows: int, cols: int, mode: GramResize) -> Tensor:
    """Patch tokens ``[B, n * n, D]`` of a square grid resized to ``rows x cols``
    (``mode``, corners not aligned, no antialias: the authors' settings)."""
    side = round(len(tokens[0]) ** 0.5)
    if side * side != tokens.shape[1]:
        raise ValueError(f"the Gram teacher's {tokens.shape[1]} patches are no square grid")
    grid = tokens.transpose(1, 2).unflatten(-1, (side, side))
    grid = F.interpolate(grid, size=(rows, cols), mode=mode, align_corners=False)
    return grid.flatten(2).transpose(1, 2)


@register_hook("gram_teacher")
class GramTeacherHook(Hook):
    """The Gram teacher of DINOv3's Gram anchoring.

    ==================  ==============================================================
    event               what it does
    ==================  ==============================================================
    ``on_start``        builds the Gram teacher, a copy of ``state.teacher`` (the
                        momentum teacher's, which runs first) without gradients; a
                        Gram teacher loaded from a checkpoint replaces its weights
    ``on_forward``      in a train phase at step ``start`` (``state.iteration - 1``)
                        and on, first copies the momentum teacher into it if it was
                        not yet; once it was, runs it (no gradient, eval mode,
                        under the run's autocast, no patch masked) on the first
                        ``global_views`` views, resized (bicubic) to ``image_size``
                        when given (``adaptation_image_size`` from epoch
                        ``adaptation_epoch`` on, counted from 1, when given: DINOv3's
                        adaptation phase), brings its patch tokens to the student's grid
                        (``resize``) and writes them as ``gram_teacher_patch_tokens``
                        ``[G * B, N, D]`` with ``gram_weight`` (``weight``; 0 before)
                        into ``state.last_output``
    ``on_update``       after the momentum teacher's update: copies it into the Gram
                        teacher after each step that :func:`refreshes_due` counts
                        (``first_update``, ``every``, ``max_updates``)
    ==================  ==============================================================

    State: the Gram teacher's weights, whether it was taken, and the refreshes done, in
    checkpoints under ``gram_teacher``: a resumed run continues the schedule.
    """

    priority = Priority.METHOD + 5

    def __init__(
        self,
        *,
        weight: float = 1.0,
        start: int = 0,
        every: int = 0,
        first_update: int = 0,
        max_updates: int | None = None,
        global_views: int = 2,
        image_size: int | None = None,
        resize: GramResize = "bicubic",
        adaptation_epoch: int | None = None,
        adaptation_image_size: int | None = None,
    ) -> None:
        super().__init__()
        if weight < 0 or start < 0 or every < 0 or first_update < 0 or global_views < 1:
            raise ValueError(
                "weight, start, every and first_update must be 0 or more and global_views 1 "
                f"or more, got {weight}, {start}, {every}, {first_update}, {global_views}"
            )
        if max_updates is not None and max_updates < 0:
            raise ValueError(f"max_updates must be 0 or more or None, got {max_updates}")
        if resize not in ("bicubic", "bilinear"):
            raise ValueError(f"resize must be bicubic or bilinear, got {resize!r}")
        self.weight = weight
        self.start = start
        self.every = every
        self.first_update = first_update
        self.max_updates = max_updates
        self.global_views = global_views
        self.image_size = image_size
        self.resize = resize
        self.adaptation_epoch = adaptation_epoch
        self.adaptation_image_size = adaptation_image_size
        self.gram: nn.Module | None = None
        self._pairs: list[tuple[Tensor, Tensor]] = []
        self.taken = False
        self.updates = 0
        self._loaded: dict[str, Tensor] | None = None

    def on_start(self, engine: RunEngine) -> None:
        state = engine.state
        if state.teacher is None:
            raise RuntimeError("gram_teacher: no momentum teacher (state.teacher) to copy")
        if is_sharded(state.base_model):
            without = ["predictor"] if getattr(state.base_model, "predictor", None) else []
            gram = sharded_copy(state.base_model, without=without)
        else:
            gram = copy.deepcopy(state.teacher)
        self.gram = gram.requires_grad_(False).eval()
        # Taken now, while both are at rest: a sharded module's registered parameters are
        # its shards here, but may be the gathered tensors just after its forward.
        own = [*gram.parameters(), *gram.buffers()]
        given = [*state.teacher.parameters(), *state.teacher.buffers()]
        self._pairs = list(zip(own, given, strict=True))
        if self._loaded is not None:
            load_weights(self.gram, self._loaded)
            self._loaded = None

    def on_forward(self, engine: RunEngine) -> None:
        state = engine.state
        if state.train and not self.taken and state.iteration - 1 >= self.start:
            self._copy_teacher()
            self.taken = True
        if not self.taken:
            state.last_output["gram_weight"] = 0.0
            return
        student = state.last_output["patch_tokens"]
        views = list(state.last_batch["views"][: self.global_views])
        rows, cols = self._grid(views[0])
        side = self.side(state.train_phase_idx + 1)
        if side is not None and views[0].shape[-2:] != (side, side):
            views = [
                F.interpolate(view, size=(side, side), mode="bicubic", align_corners=False)
                for view in views
            ]
        gram = self._require_gram()
        high_rows, high_cols = self._grid(views[0])
        # Through the model's own forward, as the momentum teacher's (so that a sharded
        # copy gathers and frees its parameters as its forward does); no patch is masked.
        masks = torch.zeros(
            sum(len(view) for view in views), high_rows * high_cols, dtype=torch.bool
        ).to(views[0].device)
        autocast = torch.autocast(
            device_type=torch.device(state.device).type,
            dtype=state.amp_dtype or torch.float32,
            enabled=state.amp_dtype is not None,
        )
        with torch.no_grad(), autocast:
            tokens = gram({"views": views, "patch_masks": masks})["patch_tokens"]
        if tokens.shape[1] != student.shape[1]:
            tokens = resize_patch_grid(tokens.float(), rows, cols, self.resize)
        state.last_output["gram_teacher_patch_tokens"] = tokens
        state.last_output["gram_weight"] = self.weight

    def on_update(self, engine: RunEngine) -> None:
        state = engine.state
        due = refreshes_due(state.iteration - 1, self.first_update, self.every, self.max_updates)
        if due > self.updates:
            self._copy_teacher()
            self.updates = due

    def state_dict(self) -> dict[str, Any]:
        """The Gram teacher's weights (empty before ``on_start``), whether it was taken,
        and the refreshes done."""
        weights = {} if self.gram is None else self.gram.state_dict()
        return {"gram_teacher": weights, "taken": self.taken, "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the schedule, and the weights now or at ``on_start``."""
        self.taken, self.updates = bool(state["taken"]), int(state["updates"])
        if self.gram is None:
            self._loaded = state["gram_teacher"]
        else:
            load_weights(self.gram, state["gram_teacher"])

    def side(self, epoch: int) -> int | None:
        """The side of the Gram teacher's views in epoch ``epoch`` (from 1); None: the
        global views' own."""
        adapted = self.adaptation_epoch is not None and epoch >= self.adaptation_epoch
        if adapted and self.adaptation_image_size is not None:
            return self.adaptation_image_size
        return self.image_size

    def _grid(self, images: Tensor) -> tuple[int, int]:
        model: Any = self._require_gram()
        patch = int(model.encoder().patch_size)  # hookbus's ViT or timm's
        return images.shape[-2] // patch, images.shape[-1] // patch

    def _copy_teacher(self) -> None:
        self._require_gram()
        with torch.no_grad():
            for mine, theirs in self._pairs:
                local(mine).copy_(local(theirs))

    def _require_gram(self) -> nn.Module:
        if self.gram is None:
            raise RuntimeError("gram_teacher: the Gram teacher is built at on_start; none yet")
        return self.gram
