"""PrototypeNormalizationHook: SwAV's prototypes kept on the unit sphere."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine


@register_hook("prototype_normalization")
class PrototypeNormalizationHook(Hook):
    """L2-normalises each prototype (row of ``state.base_model.prototypes.weight``).

    ==============  ==================================================================
    fires           ``on_start`` of a fresh run (so the first forward sees unit
                    prototypes) and ``on_update`` (after every optimizer step)
    reads           ``state.base_model.prototypes``, ``state.resumed_from``
    writes          the prototype weights, in place
    ==============  ==================================================================

    The prototypes are model parameters: checkpoints carry them with the model, already
    normalised, so a resumed run does not normalise them again (which would round them
    differently from an uninterrupted run).
    """

    priority = Priority.METHOD + 20

    def on_start(self, engine: RunEngine) -> None:
        if engine.state.resumed_from is None:
            self._normalise(engine)

    def on_update(self, engine: RunEngine) -> None:
        self._normalise(engine)

    @staticmethod
    def _normalise(engine: RunEngine) -> None:
        prototypes = getattr(engine.state.base_model, "prototypes", None)
        if prototypes is None:
            raise ValueError(
                "prototype_normalization needs a model with prototypes (model.prototypes.count)"
            )
        with torch.no_grad():
            prototypes.weight.copy_(F.normalize(prototypes.weight, dim=1))
