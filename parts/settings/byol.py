"""The settings of BYOL: ``loss.byol``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from hookbus.engine.section import MomentumSchedule


class ByolConfig(MomentumSchedule):
    """BYOL: the target network, an EMA of the online backbone and projector."""
