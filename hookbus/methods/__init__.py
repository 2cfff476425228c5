"""The SSL methods hookbus ships, one entry module per method (``hookbus.methods``).

Each module registers one :class:`~hookbus.engine.methods.entries.MethodSpec`: the method's
loss, the model parts it reads, its views, its settings' section and its hooks. The entries
are torch-free data; this package imports every one of them by name below, and
:func:`hookbus.config.validate_config` imports this package, so a recipe is validated with
every method's rules and without torch. The settings themselves are declared in
:mod:`hookbus.parts.settings` and, field by field, in the whole config
(:mod:`hookbus.parts.config`). Adding a method is adding a module here, its settings there
(docs/tutorials/add-an-ssl-method.md).
"""

from __future__ import annotations

from typing import Any

from hookbus.engine.config import CLASSIFIER_LOSS
from hookbus.engine.methods.entries import MethodSpec
from hookbus.methods.barlow_twins import BARLOW_TWINS
from hookbus.methods.byol import BYOL
from hookbus.methods.dino import DINO
from hookbus.methods.dinov2 import DINOV2
from hookbus.methods.dinov3 import DINOV3
from hookbus.methods.distillation import DISTILLATION
from hookbus.methods.ibot import IBOT
from hookbus.methods.ijepa import IJEPA
from hookbus.methods.lejepa import LEJEPA
from hookbus.methods.mae import MAE
from hookbus.methods.moco import MOCO
from hookbus.methods.moco_v3 import MOCO_V3
from hookbus.methods.nnclr import NNCLR
from hookbus.methods.simclr import SIMCLR
from hookbus.methods.simsiam import SIMSIAM
from hookbus.methods.swav import SWAV
from hookbus.methods.vicreg import VICREG

METHOD_ENTRIES: tuple[MethodSpec[Any], ...] = tuple(
    sorted(
        (
            SIMCLR,
            MOCO,
            MOCO_V3,
            BYOL,
            SWAV,
            DINO,
            DINOV2,
            DINOV3,
            IBOT,
            BARLOW_TWINS,
            VICREG,
            SIMSIAM,
            NNCLR,
            MAE,
            IJEPA,
            LEJEPA,
            DISTILLATION,
        ),
        key=lambda spec: spec.order,
    )
)
"""Every method hookbus ships, by its ``order``."""


def loss_names(methods: tuple[MethodSpec[Any], ...] = METHOD_ENTRIES) -> str:
    """The ``loss.name`` values, as ``loss.name``'s description lists them: each method's
    name, with its title where the name does not spell it, then the classifier's."""
    names = []
    for spec in methods:
        spelled = spec.name.replace("_", "") in spec.title.lower().replace(" ", "")
        names.append(spec.name if spelled else f"{spec.name} ({spec.title})")
    return ", ".join([*names, f"{CLASSIFIER_LOSS} (linear eval, fine-tuning)"])
