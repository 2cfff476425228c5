"""AdaptationPhaseHook: DINOv3's high-resolution adaptation phase, larger views from an epoch."""

from __future__ import annotations

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine


@register_hook("adaptation_phase")
class AdaptationPhaseHook(Hook):
    """Switches the train views to the adaptation phase's sizes from epoch ``epoch``.

    ==================  ==============================================================
    fires               ``on_phase_start`` of every train phase, before its first batch
                        is collated
    reads               ``state.train_phase_idx`` (the epoch, from 0),
                        ``state.dataloader.collate_fn``
    writes              the collate function's ``set_adapted``: the adaptation sizes
                        (``loss.dinov3.adaptation_image_size``,
                        ``adaptation_small_size``) in epochs ``epoch`` (counted from 1)
                        and on, the first sizes before
    ==================  ==============================================================

    The flag lives in shared memory (:class:`~hookbus.parts.data.shared.SharedInt`), so
    DataLoader workers, persistent ones too, cut the new sizes from the first batch of
    the phase. It follows from the epoch alone: a run resumed in or after the
    adaptation phase cuts the sizes an uninterrupted run does, and nothing is
    checkpointed. The Gram teacher takes its own size for the phase
    (``adaptation_gram_image_size``, read by ``gram_teacher``).
    """

    priority = Priority.METHOD

    def __init__(self, *, epoch: int) -> None:
        super().__init__()
        if epoch < 1:
            raise ValueError(f"epoch must be 1 or more (counted from 1), got {epoch}")
        self.epoch = epoch

    def adapted(self, train_phase_idx: int) -> bool:
        """Whether epoch ``train_phase_idx`` (from 0) is in the adaptation phase."""
        return train_phase_idx + 1 >= self.epoch

    def on_phase_start(self, engine: RunEngine) -> None:
        state = engine.state
        if not state.train:
            return
        collate = getattr(state.dataloader, "collate_fn", None)
        set_adapted = getattr(collate, "set_adapted", None)
        if set_adapted is None:
            raise ValueError(
                "adaptation_phase: the train data's collate function cannot change its "
                "view sizes (a data set or pipeline from Python?)"
            )
        set_adapted(self.adapted(state.train_phase_idx))
