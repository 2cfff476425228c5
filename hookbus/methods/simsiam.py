"""SimSiam: a predictor and a stop-gradient, without a momentum encoder or negatives."""

from __future__ import annotations

from hookbus.engine.methods import MethodSpec, register_method

SIMSIAM = register_method(
    MethodSpec(name="simsiam", title="SimSiam", parts=("predictor",), order=80)
)
