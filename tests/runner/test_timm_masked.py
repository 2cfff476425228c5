"""Continued pretraining on timm's DINOv2 and DINOv3 ViTs: the masked tokens of timm's
VisionTransformer and Eva equal timm's own forward unmasked and carry the mask token where
masked, and iBOT, DINOv2 and DINOv3 train on them from a weights file, the student and
its teacher from the file, the heads, prototypes, mask token and centres fresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file
from torch import nn

from hookbus import SSLTrainer, default_hooks, load_config
from hookbus.engine.config import BackboneConfig
from hookbus.hooks.methods.dino_centering import DinoCenteringHook
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.masked_distillation import MaskedDistillationModel
from hookbus.parts.models.timm_masked import TimmMaskedTokens, timm_vit_depths
from tests.photos import make_photo_folder

timm = pytest.importorskip("timm")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DINOV2, DINOV3 = "vit_small_patch14_reg4_dinov2", "vit_small_patch16_dinov3"
ARCHS = {DINOV2: 14, DINOV3: 16}
SMALL = {"depth": 2, "embed_dim": 32, "num_heads": 2}
"""timm's architectures at a test's size: every module kind, two blocks."""


def small_timm(name: str, **options: Any) -> nn.Module:
    """timm's ``name`` (random init, no classifier) at :data:`SMALL` sizes on a 3x3 grid,
    in float64, in eval mode (DINOv3's RoPE is jittered in training)."""
    torch.manual_seed(0)
    side = 3 * ARCHS[name]
    net = timm.create_model(name, num_classes=0, img_size=side, **SMALL, **options)
    return net.double().eval()


def pictures(name: str, count: int = 2) -> torch.Tensor:
    side = 3 * ARCHS[name]
    return torch.randn(count, 3, side, side, dtype=torch.float64)


@pytest.mark.parametrize("name", list(ARCHS))
def test_unmasked_tokens_equal_timms_forward_features(name: str) -> None:
    net = small_timm(name, dynamic_img_size=True)  # as hookbus builds timm's ViTs
    plain = small_timm(name)  # as timm builds it by default
    plain.load_state_dict(net.state_dict())
    images = pictures(name)
    expected = plain.forward_features(images)
    prefix = net.num_prefix_tokens
    assert prefix == 5  # the class token and 4 registers
    masks = torch.zeros(2, 9, dtype=torch.bool)
    with torch.no_grad():
        for cls, patches in (
            TimmMaskedTokens(net).tokens(images),
            TimmMaskedTokens(net).tokens(images, masks, torch.randn(32, dtype=torch.float64)),
        ):
            torch.testing.assert_close(patches, expected[:, prefix:], rtol=0, atol=0)
            torch.testing.assert_close(cls, expected[:, 0], rtol=0, atol=0)


@pytest.mark.parametrize("name", list(ARCHS))
def test_masked_patches_carry_the_mask_token_before_the_position_embedding(name: str) -> None:
    net = small_timm(name, dynamic_img_size=True)
    images, token = pictures(name), torch.randn(32, dtype=torch.float64)
    masks = torch.zeros(2, 9, dtype=torch.bool)
    masks[1, [0, 4, 8]] = True
    seen: list[torch.Tensor] = []
    position = net._pos_embed

    def spy(x: torch.Tensor) -> Any:
        seen.append(x)
        return position(x)

    net._pos_embed = spy
    with torch.no_grad():
        _, masked = TimmMaskedTokens(net).tokens(images, masks, token)
        _, whole = TimmMaskedTokens(net).tokens(images)
        embedded = net.patch_embed(images).reshape(2, 9, 32)
    given = seen[0].reshape(2, 9, 32)
    assert torch.equal(given[masks], token.expand(3, -1))
    assert torch.equal(given[~masks], embedded[~masks])
    assert torch.equal(masked[0], whole[0])  # the unmasked image is as without masks
    assert not torch.allclose(masked[1], whole[1])


def test_masks_without_a_mask_token_are_refused() -> None:
    net = small_timm(DINOV2, dynamic_img_size=True)
    with pytest.raises(ValueError, match="mask_token"):
        TimmMaskedTokens(net).tokens(pictures(DINOV2), torch.zeros(2, 9, dtype=torch.bool))


def test_other_grids_are_encoded_as_timm_does_them() -> None:
    net = small_timm(DINOV2, dynamic_img_size=True)
    small = torch.randn(2, 3, 28, 28, dtype=torch.float64)  # multi-crop's small views
    with torch.no_grad():
        cls, patches = TimmMaskedTokens(net).tokens(small)
        expected = net.forward_features(small)
    assert patches.shape == (2, 4, 32)
    torch.testing.assert_close(cls, expected[:, 0], rtol=0, atol=0)


@pytest.mark.parametrize("name", list(ARCHS))
def test_layer_depths_follow_timms_grouping(name: str) -> None:
    depths = timm_vit_depths(small_timm(name))
    assert depths["patch_embed.proj.weight"] == depths["cls_token"] == 0
    assert depths["blocks.0.norm1.weight"] == 1 and depths["blocks.1.mlp.fc2.bias"] == 2
    assert depths["norm.weight"] == depths["reg_token"] == 3 == max(depths.values())


def weights_file(tmp_path: Path, name: str, image_size: int) -> tuple[Path, dict]:
    """A safetensors file of timm's ``name`` at a random init of its own (seed 7)."""
    torch.manual_seed(7)
    net = BACKBONES.get(f"timm:{name}")(
        BackboneConfig(name=f"timm:{name}", in_channels=3, image_size=image_size)
    )
    state = {key: value.contiguous() for key, value in net.state_dict().items()}
    save_file(state, tmp_path / f"{name}.safetensors")
    return tmp_path / f"{name}.safetensors", state


RUNS = {
    "dinov2": ("dinov2_continue_vit_s14", DINOV2, 28),
    "dinov3": ("dinov3_continue_vit_s16", DINOV3, 32),
    "ibot": ("dinov2_continue_vit_s14", DINOV2, 28),
}


def continued(tmp_path: Path, method: str, run: str, *extra: str) -> tuple[Any, dict]:
    """The method's continuation recipe at a test's size, from a weights file made here
    (once per test), its run directory ``tmp_path / run``."""
    recipe, name, side = RUNS[method]
    path = tmp_path / f"{name}.safetensors"
    state = load_file(path) if path.exists() else weights_file(tmp_path, name, side)[1]
    photos = make_photo_folder(tmp_path / "photos", per_class=2, size=side + 8)
    overrides = [
        f"data.folder.train_dir={photos / 'train'}",
        "data.folder.test_dir=null",
        f"data.image_size={side}",  # a 2x2 grid
        f"data.small_views.size={side // 2}",  # one patch
        "data.batch_size=4",
        "data.num_workers=0",
        "data.pin_memory=false",
        "model.prototypes.count=64",
        "model.head.dims=[backbone,32,32,16]",
        f"model.backbone.weights={path}",
        "optimizer.num_epochs=2",
        "trainer.test_model=false",
        f"checkpoint.dir={tmp_path / run}",
        *extra,
    ]
    source = CONFIGS / f"{recipe}.yaml"
    if method == "ibot":  # DINOv2's recipe with iBOT's running centres
        raw = yaml.safe_load(source.read_text())
        del raw["loss"]["dinov2"]
        raw["loss"].update(name="ibot")
        raw["loss"]["dino"]["center_momentum"] = raw["loss"]["ibot"]["patch_center_momentum"] = 0.9
        source = tmp_path / f"ibot_{run}.yaml"
        source.write_text(yaml.safe_dump(raw))
    return load_config(source, overrides), state


def same(module: nn.Module, state: dict) -> bool:
    own = module.state_dict()
    return own.keys() == state.keys() and all(torch.equal(own[k], v) for k, v in state.items())


@pytest.mark.slow
@pytest.mark.parametrize("method", list(RUNS))
def test_a_run_continues_from_the_weights_with_fresh_heads(tmp_path: Path, method: str) -> None:
    cfg, state = continued(tmp_path, method, "setup")
    torch.manual_seed(0)
    fresh = build_model(cfg.model_copy(update={"model": _without_weights(cfg)}))
    torch.manual_seed(0)
    model = build_model(cfg)
    assert isinstance(model, MaskedDistillationModel) and same(model.backbone, state)
    assert not same(fresh.backbone, state)
    heads = {k: v for k, v in model.state_dict().items() if not k.startswith("backbone.")}
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in heads.items())
    assert not model.mask_token.any()

    hooks = [h for h in default_hooks(cfg) if h.name != "progress_bar"]
    trainer = SSLTrainer(cfg, hooks=hooks)
    trainer.setup()
    teacher = next(h for h in hooks if isinstance(h, MomentumTeacherHook))
    teacher.on_start(trainer.engine)
    assert teacher.teacher is not None and same(teacher.teacher.backbone, state)
    assert all(h.center is None for h in hooks if isinstance(h, DinoCenteringHook))

    run, _ = continued(tmp_path, method, "train")
    done = SSLTrainer(run, hooks=[h for h in default_hooks(run) if h.name != "progress_bar"])
    final = done.train()
    assert final.iteration == 2 and bool(final.loss.isfinite())
    assert final.last_output["patch_tokens"].shape == (8, 4, 384)
    assert not same(final.base_model.backbone, state)  # it trained


def _without_weights(cfg: Any) -> Any:
    backbone = cfg.model.backbone.model_copy(update={"weights": None})
    return cfg.model.model_copy(update={"backbone": backbone})
