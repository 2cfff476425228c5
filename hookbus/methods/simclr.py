"""SimCLR: the NT-Xent loss between the views of each image, and nothing else."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.methods import MethodSpec, register_method

SIMCLR = register_method(
    MethodSpec(
        name="nt_xent",
        title="SimCLR",
        loss_fields={
            "temperature": (
                float,
                Field(0.5, ge=1e-3, le=100, description="softmax temperature (nt_xent)"),
            )
        },
        order=0,
        default=True,
    )
)
