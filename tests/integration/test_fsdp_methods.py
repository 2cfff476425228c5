"""DINOv2, DINOv3 (with RoPE and its Gram teacher) and iBOT (a momentum teacher,
centering, Sinkhorn-Knopp), LeJEPA (SIGReg's all-reduced sums), MoCo v2 (a key
encoder run with shuffle-BN across the ranks, a queue of its keys) and MoCo v3 (a
momentum encoder, no queue), MAE (a decoder, the ViT on each image's kept patches) and
I-JEPA (a predictor, a target encoder over the whole grid), gradient clipping, gradient
accumulation, and a ViT's register tokens with activation checkpointing, on two gloo
ranks under ``distributed.strategy: fsdp``, against the same runs under DDP.

The runs (tests/integration/fsdp_job.py: :data:`~tests.integration.fsdp_job.MASKED`, a
ViT of 2 blocks on the tiny data set, 3 steps an epoch on two ranks; MoCo's on
:data:`~tests.integration.fsdp_job.MOCO` and :data:`~tests.integration.fsdp_job.SMALL`,
the digits recipes' CNN with BatchNorm; MAE's and I-JEPA's on
:data:`~tests.integration.fsdp_job.SMALL_VIT`) are made once for the module, in one
torchrun launch. DINOv2's runs have a register token and checkpointed blocks; iBOT's have
neither.

Tolerances: FSDP against DDP, every parameter and buffer of the model and of the
teacher within 1e-6 (absolute) after 2 epochs, as in test_fsdp.py: on two ranks the
reduce-scatter adds the same two gradients as DDP's all-reduce, so the runs agree in
every bit here; the tolerance leaves room for another order of the sum. Gradient
accumulation (each batch's gradients reduce-scattered into the shards, where DDP sums
them on the rank and reduces once) and clipping (the norm summed over each rank's
shards, then over ranks) sum in another order: those runs train with SGD (see
:data:`SGD`), also within 1e-6, the norms within 1e-5 (relative). MoCo's and MoCo v3's
model and key encoder, and MoCo's queue of keys, within the same 1e-6 with their
recipes' AdamW: shuffle-BN's gathers and the queue's are copies (no float sum), so
they add nothing to the reduce-scatter's difference, and the queue (unit vectors)
holds the key encoder's outputs. Resume, bit-exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint
from tests.integration.test_fsdp import RESUME_STOPPED, _launch

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]
REGISTERS = ("model.backbone.vit.registers=1", "model.backbone.vit.activation_checkpointing=true")
SGD = ("optimizer.name=sgd", "optimizer.weight_decay=0")
"""SGD for the runs whose float sums run in another order on FSDP than on DDP: AdamW
makes a step of about the learning rate of a gradient that is only rounding noise (the
true gradient of a key bias of attention, or of a bias feeding BatchNorm, is zero), so
a change in the last bit of such a gradient moves its parameter by the learning rate
(measured: up to 1.4e-3 after 4 accumulated AdamW steps); SGD moves it by the change."""
CLIP = 0.1
"""A max norm far below the gradients' (about 7 to 18): every step is clipped."""
CLIPPED = f"optimizer.clip_grad_norm={CLIP}"
ACCUMULATED = ("optimizer.lr=0.01", "optimizer.accumulate_steps=2")
TEACHERLESS = ("mae", "lejepa")
"""The methods whose runs have no momentum teacher."""
MOCOS = ("moco", "moco_v3")
"""The runs of ``configs/<name>_digits.yaml``: MoCo v2 (shuffle-BN on, its default, and
a queue) and MoCo v3."""
UNSHUFFLED = "loss.moco.shuffle_bn=false"


def _spec(root: Path, name: str, strategy: str, epochs: int, recipe: str, *overrides: str):
    run = f"{name}_{strategy}"
    return {
        "dir": root / run,
        "epochs": epochs,
        "strategy": strategy,
        "recipe": recipe,
        "overrides": list(overrides),
        "weights": str(root / f"{run}.pt"),
    }


def _split(
    root: Path, name: str, strategy: str, recipe: str, *overrides: str, teacher: bool = True
) -> list[dict]:
    """2 epochs, stopped after the 1st and resumed (on two ranks) for the 2nd; the
    teacher's weights kept too unless ``teacher`` is False (a method without one)."""
    whole = _spec(root, f"{name}_split", strategy, 2, recipe, *overrides, RESUME_STOPPED)
    stop = {**whole, "overrides": list(overrides), "stop_after": 1}
    del stop["weights"]
    if teacher:
        whole |= {"teacher": str(root / f"{name}_split_{strategy}_teacher.pt")}
    return [stop, whole]


def _taught(spec: dict) -> dict:
    return spec | {"teacher": str(spec["weights"]).replace(".pt", "_teacher.pt")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<name>_<strategy>``: ``dinov2`` (registers, checkpointed blocks), ``ibot``,
    ``moco``, ``moco_v3``, ``mae`` and ``ijepa``, 2 epochs, on ``ddp`` and ``fsdp``;
    ``dinov2_split`` (on both), ``ibot_split``, ``moco_split``, ``moco_v3_split``,
    ``mae_split`` and ``ijepa_split`` (on fsdp), the same
    stopped after epoch 1 and resumed; ``moco_unshuffled_fsdp``: ``moco`` without
    shuffle-BN; ``clip``: BYOL, 2 epochs of SGD
    clipped at :data:`CLIP`; ``accumulate``: DINOv2, 2 epochs of SGD with
    ``accumulate_steps=2``. ``*.pt``: the whole final weights, ``*_teacher.pt`` the
    teacher's, ``clip_*.json`` the norms of every step, ``*_start.pt`` the state the
    fsdp run started from."""
    root = tmp_path_factory.mktemp("fsdp_methods")
    specs: list[dict] = []
    for strategy in ("ddp", "fsdp"):
        specs += [
            _taught(_spec(root, "dinov2", strategy, 2, "dinov2_digits", *REGISTERS)),
            *_split(root, "dinov2", strategy, "dinov2_digits", *REGISTERS),
            _taught(_spec(root, "ibot", strategy, 2, "ibot_digits")),
            _spec(root, "clip", strategy, 2, "byol_digits", *SGD, "optimizer.lr=0.5", CLIPPED)
            | {"grad_norms": str(root / f"clip_{strategy}.json")},
            _spec(root, "accumulate", strategy, 2, "dinov2_digits", *SGD, *ACCUMULATED),
            *(_taught(_spec(root, name, strategy, 2, f"{name}_digits")) for name in MOCOS),
            _spec(root, "mae", strategy, 2, "mae_digits_vit_tiny"),
            _taught(_spec(root, "ijepa", strategy, 2, "ijepa_digits_vit_tiny")),
            _taught(_spec(root, "dinov3", strategy, 2, "dinov3_digits_vit_tiny")),
            _spec(root, "lejepa", strategy, 2, "lejepa_digits_vit_tiny"),
        ]
    for name in ("clip", "accumulate", *MOCOS, "mae", "ijepa"):
        (fsdp,) = (spec for spec in specs if spec["dir"] == root / f"{name}_fsdp")
        fsdp["start"] = str(root / f"{name}_start.pt")
    specs += _split(root, "ibot", "fsdp", "ibot_digits")
    for name in MOCOS:
        specs += _split(root, name, "fsdp", f"{name}_digits")
    specs += _split(root, "mae", "fsdp", "mae_digits_vit_tiny", teacher=False)
    specs += _split(root, "ijepa", "fsdp", "ijepa_digits_vit_tiny")
    specs += _split(root, "dinov3", "fsdp", "dinov3_digits_vit_tiny")
    specs += _split(root, "lejepa", "fsdp", "lejepa_digits_vit_tiny", teacher=False)
    specs.append(_spec(root, "moco_unshuffled", "fsdp", 2, "moco_digits", UNSHUFFLED))
    _launch(*specs)
    return root


def _load(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def _differences(ours: dict, theirs: dict) -> dict[str, float]:
    assert ours.keys() == theirs.keys()
    return {
        key: float((ours[key].double() - theirs[key].double()).abs().max())
        for key, value in theirs.items()
        if value.is_floating_point()
    }


def _equal(ours: dict, theirs: dict) -> bool:
    assert ours.keys() == theirs.keys()
    return all(torch.equal(ours[key], value) for key, value in theirs.items())


def _assert_trained(weights: dict, start: Path) -> None:
    """The weights moved from the run's start far more than the tolerance."""
    assert max(_differences(weights, _load(start)["model"]).values()) > 1e-3


def _last_row(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text().splitlines()[-1])


def _fsdp_model_and_teacher_as_ddp(runs: Path, method: str) -> tuple[dict, dict]:
    """The FSDP run's model and teacher of ``method``, after asserting that each is
    within 1e-6 of the DDP run's."""
    for suffix in (".pt", "_teacher.pt"):
        ddp, fsdp = _load(runs / f"{method}_ddp{suffix}"), _load(runs / f"{method}_fsdp{suffix}")
        assert max(_differences(fsdp, ddp).values()) <= 1e-6, suffix
    return _load(runs / f"{method}_fsdp.pt"), _load(runs / f"{method}_fsdp_teacher.pt")


@pytest.mark.parametrize("method", ["dinov2", "ibot"])
def test_two_fsdp_ranks_train_the_model_and_teacher_of_two_ddp_ranks(
    runs: Path, method: str
) -> None:
    model, teacher = _fsdp_model_and_teacher_as_ddp(runs, method)
    assert not torch.equal(model["prototypes.weight"], teacher["prototypes.weight"])
    assert _last_row(runs / f"{method}_fsdp")["loss"] == pytest.approx(
        _last_row(runs / f"{method}_ddp")["loss"], abs=1e-6
    )


@pytest.mark.parametrize("method", ["moco", "moco_v3"])
def test_two_fsdp_ranks_train_mocos_model_and_key_encoder_of_two_ddp_ranks(
    runs: Path, method: str
) -> None:
    model, teacher = _fsdp_model_and_teacher_as_ddp(runs, method)
    _assert_trained(model, runs / f"{method}_start.pt")
    predicted = {key.split(".")[0] for key in model} - {key.split(".")[0] for key in teacher}
    assert predicted == ({"predictor"} if method == "moco_v3" else set())  # not in the EMA
    lagging = _differences(teacher, {key: model[key] for key in teacher})
    assert max(lagging.values()) > 1e-3  # the EMA lags the model
    assert _last_row(runs / f"{method}_fsdp")["loss"] == pytest.approx(
        _last_row(runs / f"{method}_ddp")["loss"], abs=1e-6
    )


def test_two_fsdp_ranks_train_maes_model_of_two_ddp_ranks(runs: Path) -> None:
    fsdp, ddp = _load(runs / "mae_fsdp.pt"), _load(runs / "mae_ddp.pt")
    assert max(_differences(fsdp, ddp).values()) <= 1e-6
    _assert_trained(fsdp, runs / "mae_start.pt")
    assert {key.split(".")[0] for key in fsdp} == {"backbone", "decoder"}
    assert [path.name for path in sorted((runs / "mae_fsdp").glob("*.shards"))] == [
        "phase00000_batch0000003.shards",
        "phase00001_batch0000003.shards",
    ]  # sharded: each rank wrote its slices
    assert not list((runs / "mae_ddp").glob("*.shards"))
    assert _last_row(runs / "mae_fsdp")["loss"] == pytest.approx(
        _last_row(runs / "mae_ddp")["loss"], abs=1e-6
    )


def test_two_fsdp_ranks_train_ijepas_model_and_target_encoder_of_two_ddp_ranks(
    runs: Path,
) -> None:
    model, teacher = _fsdp_model_and_teacher_as_ddp(runs, "ijepa")
    _assert_trained(model, runs / "ijepa_start.pt")
    parts = {key.split(".")[0] for key in model}
    assert parts == {"backbone", "predictor"}
    assert {key.split(".")[0] for key in teacher} == {"backbone"}  # no predictor in the EMA
    lagging = _differences(teacher, {key: model[key] for key in teacher})
    assert max(lagging.values()) > 1e-4  # the target encoder lags the encoder
    assert _last_row(runs / "ijepa_fsdp")["loss"] == pytest.approx(
        _last_row(runs / "ijepa_ddp")["loss"], abs=1e-6
    )


def test_two_fsdp_ranks_train_dinov3s_model_teacher_and_gram_teacher_of_two_ddp_ranks(
    runs: Path,
) -> None:
    model, teacher = _fsdp_model_and_teacher_as_ddp(runs, "dinov3")
    assert "backbone.encoder.pos_embedding" not in model  # RoPE
    fsdp = load_whole_checkpoint(runs / "dinov3_fsdp" / POINTER_NAME)["hooks"]["gram_teacher"]
    ddp = load_whole_checkpoint(runs / "dinov3_ddp" / POINTER_NAME)["hooks"]["gram_teacher"]
    assert (fsdp["taken"], fsdp["updates"]) == (ddp["taken"], ddp["updates"]) == (True, 2)
    assert max(_differences(fsdp["gram_teacher"], ddp["gram_teacher"]).values()) <= 1e-6
    assert not _equal(fsdp["gram_teacher"], teacher)  # a snapshot, not the teacher
    assert _last_row(runs / "dinov3_fsdp")["loss"] == pytest.approx(
        _last_row(runs / "dinov3_ddp")["loss"], abs=1e-6
    )


def test_two_fsdp_ranks_train_lejepas_model_of_two_ddp_ranks(runs: Path) -> None:
    fsdp, ddp = _load(runs / "lejepa_fsdp.pt"), _load(runs / "lejepa_ddp.pt")
    assert max(_differences(fsdp, ddp).values()) <= 1e-6
    assert {key.split(".")[0] for key in fsdp} == {"backbone", "head"}
    assert _last_row(runs / "lejepa_fsdp")["loss"] == pytest.approx(
        _last_row(runs / "lejepa_ddp")["loss"], abs=1e-6
    )


def test_mocos_queue_on_fsdp_is_ddps_and_its_checkpoint_holds_the_key_encoder(
    runs: Path,
) -> None:
    fsdp = load_whole_checkpoint(runs / "moco_fsdp" / POINTER_NAME)["hooks"]
    ddp = load_whole_checkpoint(runs / "moco_ddp" / POINTER_NAME)["hooks"]
    queue, theirs = fsdp["key_queue"], ddp["key_queue"]
    # 6 steps of 16 keys into 24 slots: full, the next write at slot 96 % 24
    assert (queue["filled"], queue["position"]) == (theirs["filled"], theirs["position"]) == (24, 0)
    keys = queue["keys"]
    assert keys.shape == (24, 8)
    assert torch.allclose(keys.norm(dim=1), torch.ones(24), atol=1e-5)
    assert float((keys - theirs["keys"]).abs().max()) <= 1e-6
    assert _equal(fsdp["momentum_teacher"]["teacher"], _load(runs / "moco_fsdp_teacher.pt"))


def test_shuffle_bn_crosses_the_ranks_on_fsdp(runs: Path) -> None:
    """The keys of the key encoder run on a shuffled share of the global batch are not
    those of one run on each rank's own batch."""
    queues = [
        load_whole_checkpoint(runs / run / POINTER_NAME)["hooks"]["key_queue"]["keys"]
        for run in ("moco_fsdp", "moco_unshuffled_fsdp")
    ]
    assert float((queues[0] - queues[1]).abs().max()) > 1e-2


@pytest.mark.parametrize("method", ["dinov2", "moco", "moco_v3", "ijepa"])
def test_the_teacher_is_sharded_and_updated_on_each_ranks_shards(runs: Path, method: str) -> None:
    shards = json.loads((runs / f"{method}_fsdp_teacher.pt.json").read_text())
    assert shards["sharded"]
    assert shards["local"] < 0.6 * shards["whole"]  # rank 0 holds about half of it
    assert not json.loads((runs / f"{method}_ddp_teacher.pt.json").read_text())["sharded"]


def test_a_sharded_checkpoint_holds_the_teacher_the_run_trained(runs: Path) -> None:
    saved = load_whole_checkpoint(runs / "dinov2_fsdp" / POINTER_NAME)
    assert _equal(
        saved["hooks"]["momentum_teacher"]["teacher"], _load(runs / "dinov2_fsdp_teacher.pt")
    )
    assert _equal(saved["model"], _load(runs / "dinov2_fsdp.pt"))
    registers = saved["model"]["backbone.register_tokens"]
    assert registers.shape == (1, 1, 8) and float(registers.abs().max()) > 1e-4  # from 1e-6


def test_ibots_centers_on_fsdp_are_ddps(runs: Path) -> None:
    fsdp = load_whole_checkpoint(runs / "ibot_fsdp" / POINTER_NAME)["hooks"]
    ddp = load_whole_checkpoint(runs / "ibot_ddp" / POINTER_NAME)["hooks"]
    for hook in ("dino_centering", "patch_centering"):
        center = fsdp[hook]["center"]
        assert center.shape == (12,) and bool(center.any()), hook
        assert torch.allclose(center, ddp[hook]["center"], rtol=0, atol=1e-6), hook


@pytest.mark.parametrize(
    "run",
    [
        "dinov2_split_fsdp",
        "dinov2_split_ddp",
        "ibot_split_fsdp",
        "moco_split_fsdp",
        "moco_v3_split_fsdp",
        "mae_split_fsdp",
        "ijepa_split_fsdp",
        "dinov3_split_fsdp",
        "lejepa_split_fsdp",
    ],
)
def test_a_run_resumed_after_epoch_1_equals_the_run_without_a_stop(runs: Path, run: str) -> None:
    whole = run.replace("_split", "")
    assert _equal(_load(runs / f"{run}.pt"), _load(runs / f"{whole}.pt"))
    if not run.startswith(TEACHERLESS):
        assert _equal(_load(runs / f"{run}_teacher.pt"), _load(runs / f"{whole}_teacher.pt"))
    assert _last_row(runs / run)["loss"] == _last_row(runs / whole)["loss"]
    for hook in ("dino_centering", "patch_centering"):
        split = load_whole_checkpoint(runs / run / POINTER_NAME)["hooks"].get(hook)
        if split is not None:
            unstopped = load_whole_checkpoint(runs / whole / POINTER_NAME)["hooks"][hook]
            assert torch.equal(split["center"], unstopped["center"]), hook
    if run.startswith("dinov3_split"):
        split = load_whole_checkpoint(runs / run / POINTER_NAME)["hooks"]["gram_teacher"]
        unstopped = load_whole_checkpoint(runs / whole / POINTER_NAME)["hooks"]["gram_teacher"]
        assert (split["taken"], split["updates"]) == (unstopped["taken"], unstopped["updates"])
        assert _equal(split["gram_teacher"], unstopped["gram_teacher"])
    if run.startswith("moco_split"):
        split = load_whole_checkpoint(runs / run / POINTER_NAME)["hooks"]["key_queue"]
        unstopped = load_whole_checkpoint(runs / whole / POINTER_NAME)["hooks"]["key_queue"]
        assert (split["position"], split["filled"]) == (unstopped["position"], unstopped["filled"])
        assert torch.equal(split["keys"], unstopped["keys"])


def test_clipping_on_fsdp_takes_ddps_global_norm_and_weights(runs: Path) -> None:
    fsdp = json.loads((runs / "clip_fsdp.json").read_text())
    ddp = json.loads((runs / "clip_ddp.json").read_text())
    assert len(fsdp) == len(ddp) == 6
    for ours, theirs in zip(fsdp, ddp, strict=True):
        assert ours["plain"] and theirs["plain"]
        assert ours["norm"] == pytest.approx(theirs["norm"], rel=1e-5)
        assert ours["norm"] > 10 * CLIP  # clipping is on, and it clipped to the max norm:
        assert ours["clipped"] == pytest.approx(CLIP, rel=1e-4)
    fsdp_weights, ddp_weights = _load(runs / "clip_fsdp.pt"), _load(runs / "clip_ddp.pt")
    assert max(_differences(fsdp_weights, ddp_weights).values()) <= 1e-6
    _assert_trained(fsdp_weights, runs / "clip_start.pt")


def test_gradient_accumulation_on_fsdp_trains_ddps_weights(runs: Path) -> None:
    fsdp, ddp = _load(runs / "accumulate_fsdp.pt"), _load(runs / "accumulate_ddp.pt")
    assert max(_differences(fsdp, ddp).values()) <= 1e-6
    _assert_trained(fsdp, runs / "accumulate_start.pt")
    saved = load_whole_checkpoint(runs / "accumulate_fsdp" / POINTER_NAME)
    assert (saved["iteration"], saved["updates"]) == (6, 4)  # 2 updates of each 3 batches
