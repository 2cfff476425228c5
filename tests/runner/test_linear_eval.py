"""Linear evaluation: frozen backbone from a checkpoint, classifier, accuracy meter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus import CheckpointError, SSLTrainer
from hookbus.export import export_backbone
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.meter_sync import MeterSyncHook
from hookbus.parts.meters import AccuracyMeter
from hookbus.parts.models import LinearEvalModel, SmallCNN
from hookbus.parts.models.pretrained import read_backbone_weights
from tests.conftest import tiny_config

ONE_VIEW = {"num_views": 1}
"""The tiny data with one view per image: the classifier reads one."""
LINEAR = {
    "loss": {"name": "cross_entropy"},
    "meters": {"knn": {"k": 3}, "accuracy": {"enabled": True, "topk": [1, 2]}},
}


def linear_config(run_dir: Path, checkpoint: Path | None):
    model = {
        "backbone": {"width": 4},
        "linear_eval": {"enabled": True, "num_classes": 4, "checkpoint": checkpoint},
    }
    optimizer = {"num_epochs": 2, "lr": 0.05}
    return tiny_config(run_dir, model=model, optimizer=optimizer, data=ONE_VIEW, **LINEAR)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("pretrain") / "run"
    SSLTrainer(tiny_config(run, optimizer={"num_epochs": 1}), hooks=[CheckpointHook(run)]).train()
    return run / "checkpoint.torch"


def test_backbone_is_frozen_and_stays_in_eval_mode() -> None:
    model = LinearEvalModel(SmallCNN(width=2), num_classes=3).train()
    assert not model.backbone.training
    assert model.classifier.training
    assert [name for name, p in model.named_parameters() if p.requires_grad] == [
        "classifier.weight",
        "classifier.bias",
    ]


def test_forward_uses_clean_images_when_present_else_the_first_view() -> None:
    model = LinearEvalModel(SmallCNN(width=2), num_classes=3).eval()
    image, view = torch.randn(2, 1, 8, 8), torch.randn(2, 1, 8, 8)
    clean = model({"image": image, "views": [view]})
    augmented = model({"views": [view, image]})
    torch.testing.assert_close(clean["features"], model.encode(image))
    torch.testing.assert_close(augmented["features"], model.encode(view))
    assert clean["logits"].shape == (2, 3)


def test_accuracy_meter_counts_top_k_hits() -> None:
    meter = AccuracyMeter(topk=(1, 2))
    logits = torch.tensor([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0], [1.0, 2.0, 3.0]])
    meter.update({"logits": logits}, {"label": torch.tensor([0, 2, 0])})
    assert meter.value() == {"top1": pytest.approx(1 / 3), "top2": pytest.approx(2 / 3)}


def test_weights_come_from_a_checkpoint_or_an_export(pretrained: Path, tmp_path: Path) -> None:
    from_checkpoint = read_backbone_weights(pretrained)
    export_backbone(pretrained, tmp_path / "cnn.pth")
    from_export = read_backbone_weights(tmp_path / "cnn.pth")
    assert from_checkpoint.keys() == from_export.keys()
    assert all(torch.equal(from_checkpoint[k], from_export[k]) for k in from_checkpoint)


def test_weights_that_do_not_fit_are_a_checkpoint_error(pretrained: Path, tmp_path: Path) -> None:
    cfg = linear_config(tmp_path / "run", pretrained)
    cfg.model.backbone.width = 8
    with pytest.raises(CheckpointError, match="do not fit the backbone"):
        SSLTrainer(cfg, hooks=[]).train()


def test_linear_eval_run_trains_the_classifier_only(pretrained: Path, tmp_path: Path) -> None:
    cfg = linear_config(tmp_path / "run", pretrained)
    state = SSLTrainer(cfg, hooks=[MeterSyncHook()]).train()
    weights = read_backbone_weights(pretrained)
    backbone = state.base_model.backbone.state_dict()
    assert all(torch.equal(backbone[k], v) for k, v in weights.items())
    assert set(state.metrics) == {"knn_top1", "top1", "top2"}
    assert 0.0 <= state.metrics["top1"] <= state.metrics["top2"] <= 1.0


def test_the_log_names_the_weights_the_backbone_loaded(pretrained: Path, tmp_path: Path) -> None:
    SSLTrainer(linear_config(tmp_path / "run", pretrained)).train()
    log = (tmp_path / "run" / "log.txt").read_text()
    named = f"backbone weights loaded from {pretrained.resolve()} (model.linear_eval.checkpoint)"
    assert named in log
    SSLTrainer(linear_config(tmp_path / "random", None)).train()
    log = (tmp_path / "random" / "log.txt").read_text()
    assert "model.linear_eval.checkpoint is not set: the backbone is evaluated at its random" in log


def test_feature_norm_gives_the_classifier_unit_scale_features() -> None:
    model = LinearEvalModel(SmallCNN(width=2), num_classes=3).train()
    features = torch.randn(64, model.backbone.out_dim) * 0.1 + 3.0
    normalised = model.feature_norm(features)
    torch.testing.assert_close(
        normalised.mean(dim=0), torch.zeros(features.shape[1]), atol=1e-4, rtol=0
    )
    torch.testing.assert_close(
        normalised.var(dim=0, unbiased=False), torch.ones(features.shape[1]), atol=1e-2, rtol=0
    )
    plain = LinearEvalModel(SmallCNN(width=2), num_classes=3, feature_norm=False)
    assert isinstance(plain.feature_norm, torch.nn.Identity)
