"""The ViT's mask token and register tokens, and the model of iBOT and DINOv2: what the
student and the teacher see and give, the heads, and the config checks of both methods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from hookbus import FakeEngine, SSLEvents, SSLTrainer
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.hook_set import method_hooks
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.methods.dino_centering import DinoCenteringHook
from hookbus.hooks.methods.freeze_prototypes import FreezePrototypesHook
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.build import check_backbone_options
from hookbus.parts.models.masked_distillation import MaskedDistillationModel
from hookbus.parts.models.vit import ViTBackbone
from hookbus.parts.optim.build import parameter_groups
from hookbus.testing import tiny_config

TINY_VIT = {"patch_size": 2, "width": 16, "depth": 1, "heads": 2, "mlp_dim": 16}


def tiny(**vit: Any) -> ViTBackbone:
    torch.manual_seed(0)
    cfg = BackboneConfig(name="vit_tiny", in_channels=1, image_size=8, vit={**TINY_VIT, **vit})
    return BACKBONES.get("vit_tiny")(cfg).eval()


def images(count: int = 3, side: int = 8) -> torch.Tensor:
    return torch.randn(count, 1, side, side, generator=torch.Generator().manual_seed(1))


def test_no_mask_leaves_the_tokens_as_they_are() -> None:
    vit, x = tiny(), images()
    cls, patches = vit.tokens(x)
    none = torch.zeros(3, 16, dtype=torch.bool)
    masked_cls, masked_patches = vit.tokens(x, none, torch.randn(16))
    assert torch.equal(cls, masked_cls) and torch.equal(patches, masked_patches)


def test_a_masked_patch_is_the_mask_token_before_the_position_embedding() -> None:
    vit, x = tiny(), images()
    embedded = vit.conv_proj(x).flatten(2).transpose(1, 2)
    masks = torch.zeros(3, 16, dtype=torch.bool)
    masks[1, 5] = True
    # A mask token equal to that patch's own embedding changes nothing ...
    same = vit.tokens(x, masks, embedded[1, 5].detach())
    torch.testing.assert_close(same[1], vit.tokens(x)[1], atol=1e-6, rtol=1e-6)
    # ... another one changes that image only.
    other = vit.tokens(x, masks, torch.zeros(16))[1]
    assert torch.equal(other[0], vit.tokens(x)[1][0])
    assert not torch.allclose(other[1], vit.tokens(x)[1][1])


def test_masks_without_a_mask_token_are_refused() -> None:
    with pytest.raises(ValueError, match="mask_token"):
        tiny().tokens(images(), torch.zeros(3, 16, dtype=torch.bool))


def test_register_tokens_join_the_encoder_and_leave_the_outputs() -> None:
    plain, with_registers = tiny(), tiny(registers=4)
    assert with_registers.register_tokens.shape == (1, 4, 16)
    assert set(with_registers.state_dict()) - set(plain.state_dict()) == {"register_tokens"}
    cls, patches = with_registers.tokens(images())
    assert cls.shape == (3, 16) and patches.shape == (3, 16, 16)
    with torch.no_grad():
        with_registers.register_tokens.normal_(std=1.0)
    assert not torch.allclose(with_registers.tokens(images())[0], cls)  # attended to


def test_visible_tokens_of_every_patch_equal_the_tokens_with_registers() -> None:
    vit, x = tiny(registers=2), images()
    with torch.no_grad():
        vit.register_tokens.normal_(std=1.0)
    keep = torch.arange(16).expand(3, -1)
    visible = vit.visible_tokens(x, keep)
    cls, patches = vit.tokens(x)
    torch.testing.assert_close(visible[:, 0], cls, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(visible[:, 1:], patches, atol=1e-6, rtol=1e-6)


def test_registers_are_an_option_of_the_vit_backbones_only() -> None:
    with pytest.raises(ConfigError, match="model.backbone.vit.registers"):
        check_backbone_options(validate_config({"model": {"backbone": {"vit": {"registers": 4}}}}))


METHOD = {
    "data": {"image_size": 8, "num_views": 2, "small_views": {"count": 1, "size": 6}},
    "model": {
        "backbone": {"name": "vit_tiny", "in_channels": 1, "vit": TINY_VIT},
        "head": {"dims": ["backbone", 16, 8], "batch_norm": False},
        "prototypes": {"count": 12, "weight_norm": True},
    },
}


def config(name: str = "dinov2", **loss: Any) -> Any:
    return validate_config({**METHOD, "loss": {"name": name, **loss}})


def views() -> list[torch.Tensor]:
    return [images(4), images(4) + 1, images(4, side=6)]


def test_the_student_masks_its_global_views_and_scores_the_masked_patches() -> None:
    model = build_model(config(ibot={"mask_probability": 1.0, "mask_ratio": [0.25, 0.5]}))
    assert isinstance(model, MaskedDistillationModel)
    torch.manual_seed(0)
    output = model({"views": views()})
    masks = output["patch_masks"]
    assert masks.shape == (8, 16) and masks.dtype == torch.bool
    assert bool((masks.sum(dim=1) > 0).all())  # every global view masked (probability 1)
    assert output["patch_scores"].shape == (int(masks.sum()), 12)
    assert [tuple(view.shape) for view in output["scores"]] == [(4, 12)] * 3
    assert [tuple(view.shape) for view in output["view_features"]] == [(4, 16)] * 3


def test_the_teacher_sees_the_views_whole_and_scores_the_students_masked_places() -> None:
    model = build_model(config()).eval()
    torch.manual_seed(0)
    student = model({"views": views()})
    global_views = views()[:2]
    teacher = model({"views": global_views, "patch_masks": student["patch_masks"]})
    assert "patch_masks" not in teacher
    cls, patches = model.backbone.tokens(torch.cat(global_views))
    torch.testing.assert_close(torch.cat(teacher["view_features"]), cls)
    expected = model.prototypes(model.head(patches[student["patch_masks"]]))
    torch.testing.assert_close(teacher["patch_scores"], expected)


def test_a_separate_patch_head_has_its_own_outputs() -> None:
    shared = build_model(config())
    separate = build_model(config(ibot={"separate_head": True, "patch_prototypes": 5}))
    assert shared.patch_head is None and shared.patch_prototypes is None
    torch.manual_seed(0)
    output = separate({"views": views()})
    assert output["patch_scores"].shape[1] == 5
    assert separate.patch_prototypes.weight.shape == (5, 8)


def test_no_masked_patch_gives_no_patch_rows() -> None:
    model = build_model(config(ibot={"mask_probability": 0.0}))
    output = model({"views": views()})
    assert output["patch_scores"].shape == (0, 12)
    assert not bool(output["patch_masks"].any())


def test_no_masked_patch_still_runs_the_patch_head_for_a_zero_gradient() -> None:
    head = {"dims": ["backbone", 16, 8], "batch_norm": True}
    raw = {**METHOD, "model": {**METHOD["model"], "head": head}}
    ibot = {"mask_probability": 0.0, "separate_head": True, "patch_prototypes": 5}
    model = build_model(validate_config({**raw, "loss": {"name": "dinov2", "ibot": ibot}}))
    norms = [part for part in model.patch_head.modules() if isinstance(part, torch.nn.BatchNorm1d)]
    assert norms
    output = model({"views": views()})
    output["patch_scores"].sum().backward()
    grads = [parameter.grad for parameter in model.patch_head.parameters()]
    assert grads and all(grad is not None and not grad.any() for grad in grads)
    assert model.patch_prototypes.weight.grad is not None
    assert all(not norm.running_mean.any() for norm in norms)  # no rows: statistics kept


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"model": {"backbone": {"name": "small_cnn"}}}, "masks the patches of a Vision"),
        ({"loss": {"name": "dino", "ibot": {"loss_weight": 2.0}}}, "loss.ibot.loss_weight"),
        ({"loss": {"name": "ibot", "dinov2": {"koleo_weight": 0.0}}}, "loss.dinov2.koleo"),
        ({"loss": {"name": "dinov2", "ibot": {"separate_head": True}}}, "patch_prototypes"),
        ({"loss": {"name": "dinov2", "ibot": {"mask_ratio": [0.5, 0.1]}}}, "mask_ratio"),
        ({"model": {"prototypes": {"count": 0}}}, "needs prototypes"),
    ],
)
def test_configs_the_methods_cannot_honour_are_refused(raw: dict, message: str) -> None:
    sections = {
        "data": METHOD["data"],
        "model": {**METHOD["model"], **raw.get("model", {})},
        "loss": {"name": "dinov2", **raw.get("loss", {})},
    }
    with pytest.raises((ValidationError, ValueError), match=message):
        validate_config(sections)


@pytest.mark.parametrize(
    ("name", "loss", "hooks"),
    [
        ("dinov2", {}, ["momentum_teacher", "dino_centering", "freeze_prototypes"]),
        (
            "dinov2",
            {"dinov2": {"centering": "centering"}},
            ["momentum_teacher", "dino_centering", "patch_centering", "freeze_prototypes"],
        ),
        (
            "ibot",
            {},
            ["momentum_teacher", "dino_centering", "patch_centering", "freeze_prototypes"],
        ),
    ],
)
def test_each_method_gets_its_hooks(name: str, loss: dict, hooks: list[str]) -> None:
    attached = method_hooks(config(name, **loss))
    assert [hook.name for hook in attached] == hooks
    centering = attached[1]
    assert centering.centering == (name == "ibot" or bool(loss))


def test_the_teacher_takes_its_schedule_and_global_views_from_loss_dino() -> None:
    teacher = method_hooks(config(dino={"momentum": 0.95, "global_views": 2}))[0]
    assert (teacher.momentum, teacher.views) == (0.95, 2)


def test_both_last_layers_are_frozen_in_the_first_epochs() -> None:
    model = build_model(config(ibot={"separate_head": True, "patch_prototypes": 5}))
    torch.manual_seed(0)
    output = model({"views": views()})
    (sum(view.sum() for view in output["scores"]) + output["patch_scores"].sum()).backward()
    hook = FreezePrototypesHook(epochs=1)
    engine = FakeEngine(train=True, train_phase_idx=0, iteration=1, base_model=model)
    hook.attach(engine)
    engine.fire_event(SSLEvents.ON_BACKWARD)
    assert model.prototypes.weight.grad is None and model.patch_prototypes.weight.grad is None
    assert model.patch_head.layers[0].weight.grad is not None  # the rest of the head learns


def test_without_centering_only_the_teacher_temperature_is_written() -> None:
    hook = DinoCenteringHook(teacher_temperature=0.07, centering=False)
    engine = FakeEngine(train=True, train_phase_idx=3)
    hook.attach(engine)
    engine.state.last_output = {"teacher_scores": [torch.ones(2, 4)]}
    engine.fire_event(SSLEvents.ON_FORWARD)
    engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
    assert engine.state.last_output == {
        "teacher_scores": engine.state.last_output["teacher_scores"],
        "teacher_temperature": 0.07,
    }
    assert hook.center is None


def test_export_of_a_vit_with_register_tokens_is_refused(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(
        run,
        model={
            "backbone": {"name": "vit_tiny", "vit": {**TINY_VIT, "registers": 2}},
            "head": {"dims": ["backbone", 16, 8]},
        },
        optimizer={"num_epochs": 1},
        trainer={"test_model": False},
    )
    SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    out = tmp_path / "vit.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 2
    assert "2 register tokens" in capsys.readouterr().err
    assert not out.exists()


def test_layer_decay_and_the_patch_embedding_scale_set_the_backbones_learning_rates() -> None:
    model = build_model(
        config(dinov2={"layer_decay": 0.5, "patch_embedding_lr_scale": 0.2})
    )  # one encoder layer: depths 0, 1 and 2
    groups = parameter_groups(model, weight_decay=0.04)
    scale_of = {id(param): group["lr_scale"] for group in groups for param in group["params"]}
    named = dict(model.named_parameters())
    assert scale_of[id(named["backbone.conv_proj.weight"])] == pytest.approx(0.25 * 0.2)
    assert scale_of[id(named["backbone.class_token"])] == pytest.approx(0.25)
    assert scale_of[id(named["mask_token"])] == pytest.approx(0.25)
    layer = "backbone.encoder.layers.encoder_layer_0.mlp.0.weight"
    assert scale_of[id(named[layer])] == pytest.approx(0.5)
    assert scale_of[id(named["backbone.encoder.ln.weight"])] == 1.0
    assert scale_of[id(named["head.layers.0.weight"])] == 1.0
    assert scale_of[id(named["prototypes.weight"])] == 1.0


def test_without_layer_decay_every_parameter_learns_at_the_scheduled_rate() -> None:
    groups = parameter_groups(build_model(config()), weight_decay=0.04)
    assert {group["lr_scale"] for group in groups} == {1.0}
