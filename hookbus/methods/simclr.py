"""SimCLR: the NT-Xent loss between the views of each image, and nothing else."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.parts.config import Config


def compose_simclr(setting: Setting) -> dict[str, Any]:
    """SimCLR: a BatchNorm head of 512 to 128, NT-Xent at 0.5 on tiny images (the digits'
    measured setting) and 0.2 on larger ones."""
    return {
        "model": {"head": {"dims": ["backbone", 512, 128], "batch_norm": True}},
        "loss": {"temperature": 0.5 if setting.image_size <= 16 else 0.2},
    }


SIMCLR = register_method(
    MethodSpec[Config](
        name="nt_xent",
        title="SimCLR",
        compose=compose_simclr,
        aliases=("simclr",),
        order=0,
        default=True,
    )
)
