"""DINOv2 (a momentum teacher, masked patches) and MAE (the kept patches only) on timm's
ViT-Ti/16 under ``distributed.strategy: fsdp``, on two gloo ranks, against the same runs
under DDP (tests/integration/fsdp_job.py: :data:`~tests.integration.fsdp_job.TIMM_RECIPES`,
1 epoch of 3 steps).

timm's ViT is one of FSDP's units, and the masked methods read its tokens through timm's
``forward_features`` (the mask token put in by a forward hook on ``patch_embed``, MAE's
kept patches gathered by one on ``norm_pre``): a method FSDP gathers the unit's
parameters for, as for its forward. Tolerance: every parameter of the model and of the
teacher within 1e-6 of DDP's, as in test_fsdp_methods.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_fsdp import _launch
from tests.integration.test_fsdp_methods import (
    _assert_trained,
    _differences,
    _fsdp_model_and_teacher_as_ddp,
    _last_row,
    _load,
    _spec,
    _taught,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``dinov2_<strategy>`` and ``mae_<strategy>`` on ``ddp`` and ``fsdp``, 1 epoch on
    timm's ViT (``*.pt``: the whole final weights, ``*_teacher.pt`` DINOv2's teacher's,
    ``*_start.pt`` the state the fsdp runs started from)."""
    root = tmp_path_factory.mktemp("fsdp_timm")
    specs: list[dict] = []
    for strategy in ("ddp", "fsdp"):
        dinov2 = _taught(_spec(root, "dinov2", strategy, 1, "dinov2_digits"))
        mae = _spec(root, "mae", strategy, 1, "mae_digits_vit_tiny")
        specs += [dinov2 | {"timm": True}, mae | {"timm": True}]
    for spec in specs[2:]:
        spec["start"] = str(root / f"{Path(spec['dir']).name.split('_')[0]}_start.pt")
    _launch(*specs)
    return root


def test_dinov2_on_two_fsdp_ranks_trains_the_model_and_teacher_of_two_ddp_ranks(
    runs: Path,
) -> None:
    model, _ = _fsdp_model_and_teacher_as_ddp(runs, "dinov2")
    _assert_trained(model, runs / "dinov2_start.pt")
    assert "backbone.patch_embed.proj.weight" in model and "mask_token" in model  # timm's keys
    assert json.loads((runs / "dinov2_fsdp_teacher.pt.json").read_text())["sharded"]
    assert _last_row(runs / "dinov2_fsdp")["loss"] == pytest.approx(
        _last_row(runs / "dinov2_ddp")["loss"], abs=1e-6
    )


def test_mae_on_two_fsdp_ranks_trains_the_model_of_two_ddp_ranks(runs: Path) -> None:
    fsdp, ddp = _load(runs / "mae_fsdp.pt"), _load(runs / "mae_ddp.pt")
    assert max(_differences(fsdp, ddp).values()) <= 1e-6
    _assert_trained(fsdp, runs / "mae_start.pt")
    assert {key.split(".")[0] for key in fsdp} == {"backbone", "decoder"}
    assert list((runs / "mae_fsdp").glob("*.shards"))  # sharded: each rank wrote its slices
    assert _last_row(runs / "mae_fsdp")["loss"] == pytest.approx(
        _last_row(runs / "mae_ddp")["loss"], abs=1e-6
    )
