"""I-JEPA's model: the context encoder, the predictor over target positions, the target
encoder as the momentum teacher, and the config rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import timm
import torch

from hookbus import SSLTrainer, default_hooks
from hookbus.cli import main
from hookbus.config import Config, validate_config
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.data.build import collates
from hookbus.parts.data.ijepa_masks import BlockMaskCollate
from hookbus.parts.models import build_model
from hookbus.parts.models.ijepa import JepaModel, JepaPredictor, patch_tokens
from hookbus.parts.models.patch_grid import patch_grid
from hookbus.testing import tiny_config

ROOT = Path(__file__).resolve().parents[2]
TINY_VIT = {
    "name": "vit_tiny",
    "vit": {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16},
}
PREDICTOR = {"width": 8, "depth": 1, "heads": 2}


def ijepa_config(tmp_path: Path, **sections: dict) -> Config:
    raw = {
        "data": {"num_views": 1},
        "loss": {"name": "ijepa", "ijepa": {"min_context_patches": 2}},
        "model": {"backbone": TINY_VIT, "head": {}, "ijepa_predictor": PREDICTOR},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return tiny_config(tmp_path / "run", **raw)


def masks(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    context = torch.tensor([[0, 1, 4, 5, 8, 9]]).expand(batch, -1)
    targets = torch.tensor([[[2, 3, 6, 7], [10, 11, 14, 15]]]).expand(batch, -1, -1)
    return context, targets


def test_the_predictor_predicts_each_block_from_the_context_alone() -> None:
    torch.manual_seed(0)
    predictor = JepaPredictor(8, (4, 4), width=8, depth=2, heads=2).eval()
    context, targets = masks(3)
    tokens = torch.randn(3, 6, 8)
    with torch.no_grad():
        out = predictor(tokens, context, targets)
        assert out.shape == (3, 2, 4, 8)
        # Another second block leaves the first block's prediction as it was.
        moved = targets.clone()
        moved[:, 1] = torch.tensor([12, 13, 2, 3])
        again = predictor(tokens, context, moved)
    torch.testing.assert_close(again[:, 0], out[:, 0])
    assert not torch.allclose(again[:, 1], out[:, 1])


def test_the_model_encodes_the_context_only_and_the_teacher_call_the_whole_view(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    model = build_model(ijepa_config(tmp_path)).eval()
    assert isinstance(model, JepaModel)
    views = [torch.randn(2, 1, 8, 8)]
    context, targets = masks(2)
    with torch.no_grad():
        student = model({"views": views, "context_keep": context, "target_keep": targets})
        teacher = model({"views": views})
        image = model({"image": views[0]})
    assert student["predictions"].shape == (2, 2, 4, 8)
    assert student["view_features"][0].shape == (2, 8)
    assert "embeddings" not in student
    whole = patch_tokens(model.backbone, views[0])
    torch.testing.assert_close(teacher["embeddings"][0], whole)
    assert whole.shape == (2, 16, 8)
    torch.testing.assert_close(image["features"], whole.mean(dim=1))
    # The context tokens are the encoder's on the context patches, without the others.
    alone = model.backbone.visible_tokens(views[0], context)[:, 1:]
    torch.testing.assert_close(student["view_features"][0], alone.mean(dim=1))


def test_timm_vits_are_context_encoders_too(tmp_path: Path) -> None:
    cfg = ijepa_config(
        tmp_path,
        data={"num_views": 1, "image_size": 32},
        model={"backbone": {"name": "timm:vit_tiny_patch16_224"}, "head": {}},
    )
    assert patch_grid(cfg) == (2, 2)
    model = build_model(cfg)
    assert isinstance(model.backbone, timm.models.vision_transformer.VisionTransformer)
    assert model.encode(torch.zeros(2, 1, 32, 32)).shape == (2, 192)


def test_the_target_encoder_is_a_momentum_copy_without_the_predictor(tmp_path: Path) -> None:
    cfg = ijepa_config(tmp_path, loss={"name": "ijepa", "ijepa": {"momentum": 0.9}})
    hooks = default_hooks(cfg)
    teachers = [hook for hook in hooks if isinstance(hook, MomentumTeacherHook)]
    assert len(teachers) == 1 and teachers[0].momentum == 0.9
    assert teachers[0].final_momentum == 1.0
    assert validate_config({}).loss.ijepa.momentum == 0.996  # the paper's


def test_the_train_and_test_collates_add_the_masks_on_the_views_grid(tmp_path: Path) -> None:
    train, test, memory = collates(ijepa_config(tmp_path))
    assert isinstance(train, BlockMaskCollate) and isinstance(test, BlockMaskCollate)
    assert train.grid == (4, 4) and not isinstance(memory, BlockMaskCollate)


def test_a_short_run_trains_the_predictor_against_the_teacher(tmp_path: Path) -> None:
    cfg = ijepa_config(tmp_path, optimizer={"num_epochs": 1})
    state = SSLTrainer(cfg).train()
    assert torch.isfinite(state.loss)
    output = state.last_output
    assert output["teacher_embeddings"][0].shape == (8, 16, 8)
    assert output["predictions"].shape[:2] == (8, 4)


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        (
            {"data": {"num_views": 2}},
            "loss.name ijepa predicts masked blocks of one view of each image: set "
            "data.num_views=1 and data.small_views.count=0 (got 2 and 0)",
        ),
        (
            {"model": {"backbone": {"name": "small_cnn"}}},
            "model.backbone.name must be vit_tiny, vit_s16, vit_b16 or a timm ViT "
            "(timm:<name>), not small_cnn",
        ),
        (
            {"model": {"backbone": TINY_VIT, "head": {"dims": [8, 4]}}},
            "model.head.dims: loss.name ijepa has no projection head",
        ),
        (
            {"model": {"backbone": TINY_VIT, "predictor": {"dims": [8, 8]}}},
            "set model.predictor.dims=[] and model.prototypes.count=0",
        ),
        (
            {"loss": {"name": "ijepa", "ijepa": {"target_scale": [0.3, 0.2]}}},
            "target_scale: the lowest (0.3) is above the highest (0.2)",
        ),
    ],
)
def test_configs_ijepa_cannot_honour_are_refused(sections: dict, message: str) -> None:
    raw = {
        "data": {"num_views": 1},
        "loss": {"name": "ijepa"},
        "model": {"backbone": TINY_VIT},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    with pytest.raises(ValueError, match=None) as caught:
        validate_config(raw)
    assert message in str(caught.value)


def test_another_method_may_not_size_the_ijepa_predictor() -> None:
    with pytest.raises(
        ValueError, match="model.ijepa_predictor.depth: the I-JEPA predictor ViT is built only for"
    ):
        validate_config({"model": {"ijepa_predictor": {"depth": 2}}})


def test_validate_refuses_a_cnn_for_ijepa_with_exit_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = str(ROOT / "configs" / "ijepa_digits_vit_tiny.yaml")
    assert main(["validate", recipe, "model.backbone.name=small_cnn"]) == 2
    err = capsys.readouterr().err
    assert "loss.name ijepa predicts the patch tokens of a Vision Transformer" in err
    assert "Traceback" not in err


def test_an_ijepa_run_on_a_timm_vit_exports_its_encoder_for_timm(tmp_path: Path) -> None:
    cfg = ijepa_config(
        tmp_path,
        data={
            "name": "synthetic",
            "num_views": 1,
            "image_size": 32,  # a 2x2 grid of timm's 16 px patches
            "synthetic": {"train_size": 16, "test_size": 8, "channels": 1},
        },
        loss={"name": "ijepa", "ijepa": {"target_blocks": 2, "min_context_patches": 1}},
        optimizer={"num_epochs": 1},
        model={"backbone": {"name": "timm:vit_tiny_patch16_224"}, "head": {}},
        trainer={"test_model": False},
        meters={"knn": {"enabled": False}},
    )
    state = SSLTrainer(cfg).train()  # its checkpoint in tmp_path / "run"
    assert torch.isfinite(state.loss)
    out = tmp_path / "encoder.pth"
    assert main(["export", str(tmp_path / "run" / "checkpoint.torch"), str(out)]) == 0
    reference = timm.create_model(
        "vit_tiny_patch16_224", in_chans=1, img_size=32, checkpoint_path=str(out)
    )  # strict
    images = torch.randn(2, 1, 32, 32)
    trained = state.base_model.eval()
    with torch.no_grad():
        tokens = reference.eval().forward_features(images)[:, 1:]
        torch.testing.assert_close(tokens.mean(dim=1), trained.encode(images))


def test_a_run_on_the_linear_schedule_resumes_it_at_its_step(tmp_path: Path) -> None:
    from tests.runner.test_vit_backbone import StopAfterPhase

    def run(folder: str, schedule: str, *extra: Any) -> tuple[Any, dict[str, torch.Tensor]]:
        ijepa = {"min_context_patches": 2, "momentum": 0.5, "momentum_schedule": schedule}
        cfg = ijepa_config(tmp_path / folder, loss={"name": "ijepa", "ijepa": ijepa})
        hooks = default_hooks(cfg)
        state = SSLTrainer(cfg, hooks=[*hooks, *extra]).train()
        teacher = next(hook for hook in hooks if isinstance(hook, MomentumTeacherHook))
        return state, teacher.state_dict()["teacher"]

    straight_state, straight = run("straight", "linear")
    with pytest.raises(RuntimeError, match="stopped"):
        run("resumed", "linear", StopAfterPhase(1))
    resumed_state, resumed = run("resumed", "linear")
    assert resumed_state.resumed_from is not None
    assert resumed_state.iteration == straight_state.iteration == 6
    assert all(torch.equal(straight[key], resumed[key]) for key in straight)
    _, cosine = run("cosine", "cosine")  # the same run on the half cosine ends elsewhere
    assert not all(torch.equal(straight[key], cosine[key]) for key in straight)
