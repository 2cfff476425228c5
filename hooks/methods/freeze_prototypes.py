"""FreezePrototypesHook: no update of the prototypes (last layer) early in training."""

from __future__ import annotations

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine


@register_hook("freeze_prototypes")
class FreezePrototypesHook(Hook):
    """Drops the prototypes' gradients during the first ``iterations`` train iterations
    and the first ``epochs`` epochs, so the optimizer step leaves them unchanged.

    ==============  ==================================================================
    fires           ``on_backward`` (train phases, before the optimizer step)
    reads           ``state.iteration``, ``state.train_phase_idx``,
                    ``state.base_model.prototypes`` (and ``.patch_prototypes`` when
                    the model has them: iBOT's and DINOv2's separate patch head)
    writes          ``.grad = None`` on the prototypes' parameters while frozen
    ==============  ==================================================================

    SwAV freezes its prototypes for the first iterations, DINO its last layer for the
    first epoch: both stabilise the start. Counters come from the run state, so a
    resumed run freezes exactly as an uninterrupted one. With gradient accumulation the
    gradients of a frozen step's earlier batches are dropped with it.
    """

    priority = Priority.METHOD + 20

    def __init__(self, *, iterations: int = 0, epochs: int = 0) -> None:
        super().__init__()
        if iterations < 0 or epochs < 0:
            raise ValueError(f"iterations and epochs must be >= 0, got {iterations}, {epochs}")
        self.iterations = iterations
        self.epochs = epochs

    def frozen(self, iteration: int, train_phase_idx: int) -> bool:
        """Whether the prototypes get no update at train iteration ``iteration`` (counted
        from 1) of epoch ``train_phase_idx`` (counted from 0)."""
        return iteration <= self.iterations or train_phase_idx < self.epochs

    def on_backward(self, engine: RunEngine) -> None:
        state = engine.state
        if not self.frozen(state.iteration, state.train_phase_idx):
            return
        prototypes = getattr(state.base_model, "prototypes", None)
        if prototypes is None:
            raise ValueError("freeze_prototypes needs a model with prototypes (model.prototypes)")
        # iBOT's and DINOv2's separate patch head has a last layer of its own.
        patch_prototypes = getattr(state.base_model, "patch_prototypes", None)
        for part in (prototypes, patch_prototypes):
            for parameter in () if part is None else part.parameters():
                parameter.grad = None
