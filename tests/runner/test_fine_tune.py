"""Fine-tuning: the backbone trained with a classifier, its own rate and layer-wise decay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine
from torch.nn import functional as F

from hookbus import CheckpointError, ConfigError, Hook, SSLTrainer, load_config
from hookbus.export import export_backbone
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import FineTuneModel, LinearEvalModel, SmallCNN, build_model
from hookbus.parts.models.pretrained import read_backbone_weights
from hookbus.parts.optim import build_optimizer, set_learning_rate
from tests.conftest import tiny_config
from tests.tiny_data import TINY

ROOT = Path(__file__).resolve().parents[2]
TINY_VIT = {"patch_size": 2, "width": 16, "depth": 3, "heads": 2, "mlp_dim": 32}
CLASSIFIER = {
    "loss": {"name": "cross_entropy"},
    "meters": {"knn": {"k": 3}, "accuracy": {"enabled": True, "topk": [1, 2]}},
}


def fine_tune_config(run_dir: Path, backbone: dict | None = None, **fine_tune: Any):
    """Two epochs of fine-tuning on the tiny data (a width-4 small_cnn by default)."""
    model = {
        "backbone": backbone or {"width": 4},
        "fine_tune": {"enabled": True, "num_classes": 4, **fine_tune},
    }
    optimizer = {"num_epochs": 2, "lr": 0.01}
    one_view = {"num_views": 1}  # the classifier reads one view
    return tiny_config(run_dir, model=model, optimizer=optimizer, data=one_view, **CLASSIFIER)


def vit_config(run_dir: Path, **fine_tune: Any):
    backbone = {"name": "vit_tiny", "in_channels": 1, "vit": TINY_VIT}
    return fine_tune_config(run_dir, backbone, **fine_tune)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("pretrain") / "run"
    SSLTrainer(tiny_config(run, optimizer={"num_epochs": 1}), hooks=[CheckpointHook(run)]).train()
    return run / "checkpoint.torch"


def expected_depth(name: str, layers: int) -> int:
    """The depth of a fine-tuned ViT's parameter, as BEiT and MAE count it."""
    if name.startswith("classifier.") or name.startswith("backbone.encoder.ln."):
        return layers + 1
    if name.startswith("backbone.encoder.layers.encoder_layer_"):
        return int(name.split(".")[3].removeprefix("encoder_layer_")) + 1
    assert name in ("backbone.class_token", "backbone.encoder.pos_embedding") or (
        name.startswith("backbone.conv_proj.")
    ), name
    return 0


def test_vit_parameters_learn_at_lr_times_decay_to_the_power_of_their_height(
    tmp_path: Path,
) -> None:
    cfg = vit_config(tmp_path / "run", layer_decay=0.75)
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model)
    set_learning_rate(optimizer, 0.004)
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    named = dict(model.named_parameters())
    assert len(rate) == len(named) == sum(len(g["params"]) for g in optimizer.param_groups)
    layers = TINY_VIT["depth"]
    for name, param in named.items():
        assert rate[id(param)] == 0.004 * 0.75 ** (layers + 1 - expected_depth(name, layers)), name
    assert rate[id(model.backbone.conv_proj.weight)] == 0.004 * 0.75**4
    assert rate[id(model.classifier.weight)] == 0.004


def test_backbone_lr_scale_multiplies_every_backbone_rate(tmp_path: Path) -> None:
    cfg = fine_tune_config(tmp_path / "run", backbone_lr_scale=0.1)
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model)
    set_learning_rate(optimizer, 0.5)
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    for name, param in model.named_parameters():
        assert rate[id(param)] == (0.5 if name.startswith("classifier.") else 0.5 * 0.1), name


def test_no_weight_decay_on_biases_norms_class_token_and_position_embedding(
    tmp_path: Path,
) -> None:
    cfg = vit_config(tmp_path / "run", layer_decay=0.75)
    cfg.optimizer.weight_decay = 0.05
    model = build_model(cfg)
    decay = {
        id(p): group["weight_decay"]
        for group in build_optimizer(cfg, model).param_groups
        for p in group["params"]
    }
    for name, param in model.named_parameters():
        exempt = param.ndim <= 1 or name.endswith(("class_token", "pos_embedding"))
        assert decay[id(param)] == (0.0 if exempt else 0.05), name


def test_backbone_trains_in_train_mode_unlike_linear_evaluation() -> None:
    torch.manual_seed(0)
    images, labels = torch.randn(8, 1, 8, 8), torch.arange(8) % 3
    for model, trains in (
        (FineTuneModel(SmallCNN(width=2), num_classes=3), True),
        (LinearEvalModel(SmallCNN(width=2), num_classes=3), False),
    ):
        model.train()
        assert model.backbone.training is trains
        before = {k: v.clone() for k, v in model.state_dict().items()}
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        F.cross_entropy(model({"image": images})["logits"], labels).backward()
        optimizer.step()
        weight = model.backbone.layers[0].weight
        assert (weight.grad is not None and bool(weight.grad.abs().sum() > 0)) is trains
        after = model.state_dict()
        for key in ("backbone.layers.0.weight", "backbone.layers.1.running_mean"):
            assert (not torch.equal(before[key], after[key])) is trains, key
        assert not torch.equal(before["classifier.weight"], after["classifier.weight"])


def test_layer_decay_with_a_backbone_that_is_no_vit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"layer_decay 0.75 needs a ViT backbone.*small_cnn"):
        fine_tune_config(tmp_path / "run", layer_decay=0.75)
    with pytest.raises(ValueError, match="needs a ViT backbone.*not a SmallCNN"):
        FineTuneModel(SmallCNN(width=2), num_classes=3, layer_decay=0.75)


def test_a_python_backbone_that_is_no_vit_is_refused_when_built(tmp_path: Path) -> None:
    cfg = fine_tune_config(tmp_path / "run", layer_decay=0.75, backbone={"name": "vit_tiny"})
    with pytest.raises(ConfigError, match="model.fine_tune.*needs a ViT backbone.*SmallCNN"):
        SSLTrainer(cfg, backbone=SmallCNN(width=4), hooks=[]).train()
    assert not (tmp_path / "run" / "checkpoint.torch").exists()


def test_linear_evaluation_and_fine_tuning_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two evaluation protocols"):
        tiny_config(
            tmp_path,
            model={"linear_eval": {"enabled": True}, "fine_tune": {"enabled": True}},
            loss={"name": "cross_entropy"},
        )


def test_fine_tuning_needs_the_cross_entropy_loss(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fine_tune.enabled and loss.name cross_entropy"):
        tiny_config(tmp_path, model={"fine_tune": {"enabled": True}})


def test_a_missing_checkpoint_file_is_a_checkpoint_error(tmp_path: Path) -> None:
    cfg = fine_tune_config(tmp_path / "run", checkpoint=tmp_path / "missing.torch")
    with pytest.raises(CheckpointError, match=r"weights file not found: .*missing\.torch"):
        SSLTrainer(cfg, hooks=[]).train()


def test_weights_come_from_a_checkpoint_or_an_export(pretrained: Path, tmp_path: Path) -> None:
    export_backbone(pretrained, tmp_path / "cnn.pth")
    expected = read_backbone_weights(pretrained)
    for source in (pretrained, tmp_path / "cnn.pth"):
        backbone = build_model(fine_tune_config(tmp_path / "run", checkpoint=source)).backbone
        loaded = backbone.state_dict()
        assert loaded.keys() == expected.keys()
        assert all(torch.equal(loaded[k], v) for k, v in expected.items()), source


def test_the_digits_recipe_fine_tunes_an_epoch_on_the_tiny_data_set(
    pretrained: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    cfg = load_config(
        ROOT / "configs" / "fine_tune_digits.yaml",
        [
            f"data.name={TINY}",
            "data.image_size=8",
            "data.batch_size=8",
            "data.test_batch_size=8",
            "model.backbone.width=4",
            f"model.fine_tune.checkpoint={pretrained}",
            "model.fine_tune.num_classes=4",
            "meters.knn.k=3",
            "meters.accuracy.topk=[1, 2]",
            "optimizer.num_epochs=1",
            "optimizer.warmup_epochs=0",
            "trainer.test_every_num_epochs=1",
            "hooks.progress_bar.enabled=false",
            f"checkpoint.dir={run}",
        ],
    )
    state = SSLTrainer(cfg).train()
    assert state.iteration == 3
    tests = [
        row
        for row in map(json.loads, (run / "metrics.json").read_text().splitlines())
        if not row["train"]
    ]
    assert len(tests) == 1
    assert {"top1", "top2", "knn_top1"} <= set(tests[0])
    assert 0.0 <= tests[0]["top1"] <= tests[0]["top2"] <= 1.0
    # The backbone moved away from the checkpoint's weights.
    start = read_backbone_weights(pretrained)
    trained = state.base_model.backbone.state_dict()
    assert not torch.equal(trained["layers.0.weight"], start["layers.0.weight"])


def test_the_vit_s16_recipe_decays_the_rate_over_its_twelve_layers() -> None:
    cfg = load_config(
        ROOT / "configs" / "fine_tune_imagefolder_vit_s16.yaml",
        ["model.fine_tune.checkpoint=null", "model.backbone.image_size=32"],
    )
    assert (cfg.model.fine_tune.layer_decay, cfg.optimizer.lr) == (0.75, 0.002)
    assert (cfg.model.backbone.vit.drop_path, cfg.loss.cross_entropy.label_smoothing) == (0.1, 0.1)
    model = build_model(cfg)
    rates = [block.rate for block in model.backbone.encoder.layers]
    assert rates == pytest.approx([0.1 * depth / 11 for depth in range(12)])
    scales = model.lr_scales()
    assert min(scales.values()) == 0.75**13 and max(scales.values()) == 1.0
    assert scales["backbone.encoder.layers.encoder_layer_11.mlp.0.weight"] == 0.75


class Stop(Exception):
    """The simulated crash."""


class StopAfterPhase(Hook):
    """Raises at the end of phase ``phase_idx``, after its checkpoint is written."""

    priority = 200

    def __init__(self, phase_idx: int) -> None:
        super().__init__()
        self.phase_idx = phase_idx

    def on_phase_end(self, engine: Engine) -> None:
        if engine.state.phase_idx == self.phase_idx:
            raise Stop(f"stopped after phase {self.phase_idx}")


def test_a_resumed_vit_fine_tune_ends_with_the_weights_of_a_straight_run(tmp_path: Path) -> None:
    def run(run_dir: Path, *extra: Hook) -> Any:
        cfg = vit_config(run_dir, layer_decay=0.75, backbone_lr_scale=0.5)
        return SSLTrainer(cfg, hooks=[CheckpointHook(run_dir), *extra]).train()

    straight = run(tmp_path / "straight")
    with pytest.raises(Stop):
        run(tmp_path / "resumed", StopAfterPhase(1))  # after the first test phase
    resumed = run(tmp_path / "resumed")
    assert resumed.resumed_from is not None
    assert resumed.iteration == straight.iteration == 6
    weights, again = straight.base_model.state_dict(), resumed.base_model.state_dict()
    assert all(torch.equal(weights[key], again[key]) for key in weights)
    rates = [(g["lr"], g["lr_scale"]) for g in straight.optimizer.param_groups]
    assert rates == [(g["lr"], g["lr_scale"]) for g in resumed.optimizer.param_groups]
    assert len({scale for _, scale in rates}) == TINY_VIT["depth"] + 3
