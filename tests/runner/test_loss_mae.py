"""MAE: the loss against its equation written out element by element, the random masking
(on two gloo ranks too), the encoder on the visible patches, the model built from the
config, and a tiny run.

    ``loss = sum_i sum_n m_in * (1/P) sum_p (x_inp - t_inp)^2 / sum_i sum_n m_in``

with ``m_in`` = 1 for a masked patch, and with ``norm_pix_loss`` the target
``t_inp = (y_inp - mean_p y_inp) / sqrt(var_p y_inp + 1e-6)`` (unbiased variance).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn
from torchvision.models.vision_transformer import VisionTransformer

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.config import Config, validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.losses import MaeLoss, build_loss
from hookbus.parts.models import BACKBONES, MaskedAutoencoder, build_model
from hookbus.parts.models.mae import kept_patches, mask_noise, patchify, random_masking
from hookbus.parts.models.vit import sincos_position_embedding
from tests.conftest import tiny_config
from tests.loss_reference import assert_same_value_and_gradients, on_two_ranks, two_rank_results
from tests.tiny_data import tiny_recipe, train_tiny

ROOT = Path(__file__).resolve().parents[2]
# For the 8x8 tiny test images: 2x2 patches, a 4x4 grid of 16 patches.
TINY_VIT = {"patch_size": 2, "width": 16, "depth": 2, "heads": 2, "mlp_dim": 32}
TINY_DECODER = {"width": 8, "depth": 1, "heads": 2}
TINY_MAE = {
    "data": {"num_views": 1},
    "model": {
        "backbone": {"name": "vit_tiny", "in_channels": 1, "vit": TINY_VIT},
        "head": {},  # MAE builds no projection head: the tiny config's is dropped
        "mae_decoder": TINY_DECODER,
    },
    "loss": {"name": "mae"},
}


def reference(prediction, target, mask, norm_pix_loss: bool) -> torch.Tensor:
    """The loss from scalar terms."""
    batch, patches, pixels = prediction.shape
    total, masked = prediction.new_zeros(()), 0.0
    for i in range(batch):
        for n in range(patches):
            if not mask[i, n]:
                continue
            values = [target[i, n, p] for p in range(pixels)]
            if norm_pix_loss:
                mean = sum(values) / pixels
                var = sum((v - mean) ** 2 for v in values) / (pixels - 1)
                values = [(v - mean) / torch.sqrt(var + 1e-6) for v in values]
            error = sum((prediction[i, n, p] - values[p]) ** 2 for p in range(pixels)) / pixels
            total, masked = total + error, masked + 1
    return total / masked


def loss_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    prediction = torch.randn(2, 5, 4, generator=generator, dtype=torch.float64)
    target = torch.randn(2, 5, 4, generator=generator, dtype=torch.float64) * 2 + 1
    mask = torch.tensor([[1, 0, 1, 1, 0], [0, 1, 0, 0, 1]], dtype=torch.float64)
    return prediction.requires_grad_(), target, mask


@pytest.mark.parametrize("norm_pix_loss", [True, False])
def test_the_loss_is_the_masked_patch_mse_of_the_equation(norm_pix_loss: bool) -> None:
    prediction, target, mask = loss_inputs()
    output = {"reconstruction": prediction, "target_patches": target, "mask": mask}
    ours = MaeLoss(norm_pix_loss)(output, {})
    expected = reference(prediction, target, mask, norm_pix_loss)
    assert_same_value_and_gradients(ours, expected, [prediction])


def test_visible_patches_get_no_gradient_and_the_target_none() -> None:
    prediction, target, mask = loss_inputs()
    target.requires_grad_()
    MaeLoss()({"reconstruction": prediction, "target_patches": target, "mask": mask}, {}).backward()
    assert torch.count_nonzero(prediction.grad[mask == 0]) == 0
    assert torch.count_nonzero(prediction.grad[mask == 1]) > 0
    assert target.grad is None


def test_a_patch_predicted_as_its_normalised_pixels_costs_nothing() -> None:
    target = torch.tensor([[[1.0, 3.0, 5.0, 7.0]]])
    std = math.sqrt(sum((v - 4.0) ** 2 for v in (1, 3, 5, 7)) / 3 + 1e-6)
    normalised = (target - 4.0) / std
    output = {"reconstruction": normalised, "target_patches": target, "mask": torch.ones(1, 1)}
    assert float(MaeLoss()(output, {})) == pytest.approx(0.0, abs=1e-12)
    assert float(MaeLoss(norm_pix_loss=False)(output, {})) > 1


@pytest.mark.parametrize(
    ("patches", "ratio", "kept"),
    [(16, 0.75, 4), (196, 0.75, 49), (196, 0.9, 19), (10, 0.33, 6), (16, 0.7, 4), (49, 0.45, 26)],
)
def test_masking_keeps_the_visible_fraction_rounded_down_per_sample(
    patches: int, ratio: float, kept: int
) -> None:
    # The authors' int((1 - r) * N); rounding to nearest would keep 20, 7, 5 and 27 of
    # the last four.
    assert kept_patches(patches, ratio) == kept == int((1 - ratio) * patches)
    torch.manual_seed(3)
    keep, mask, restore = random_masking(mask_noise(6, patches, "cpu"), kept)
    assert keep.shape == (6, kept)
    assert mask.sum(dim=1).tolist() == [patches - kept] * 6
    for row in range(6):
        # the kept patches are exactly the unmasked ones, each once
        assert sorted(keep[row].tolist()) == torch.nonzero(mask[row] == 0).flatten().tolist()
        assert sorted(restore[row].tolist()) == list(range(patches))
    assert len({tuple(sorted(row.tolist())) for row in keep}) == 6  # different per sample


def test_the_restore_permutation_puts_visible_then_masked_tokens_in_patch_order() -> None:
    torch.manual_seed(0)
    keep, mask, restore = random_masking(mask_noise(3, 8, "cpu"), 3)
    patch_ids = torch.arange(8).expand(3, -1)
    masked_ids = torch.stack([torch.nonzero(row).flatten() for row in mask])
    shuffled = torch.cat([keep, masked_ids], dim=1)  # mask tokens in any order of masked ids
    assert torch.equal(torch.gather(shuffled, 1, restore)[mask == 0], patch_ids[mask == 0])


def test_masks_come_from_the_global_generator_and_repeat_from_its_state() -> None:
    torch.manual_seed(5)
    state = torch.get_rng_state()
    first = random_masking(mask_noise(4, 16, "cpu"), 4)
    second = random_masking(mask_noise(4, 16, "cpu"), 4)
    torch.set_rng_state(state)
    again = random_masking(mask_noise(4, 16, "cpu"), 4)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[1], second[1])


MASK_SEED, RANK_BATCH = 0, 4


def masks_of_two_steps(batch: int) -> dict[str, torch.Tensor]:
    """The masks ``[2, batch, 16]`` of two steps of the tiny MAE (seeded as the trainer
    seeds every rank: the same seed), and the second step's again, drawn after restoring
    the generator state saved after the first step, as a resumed run does."""
    torch.manual_seed(MASK_SEED)
    model = build_model(mae_config(Path("runs/unused"))).eval()
    views = {"views": [torch.zeros(batch, 1, 8, 8)]}
    with torch.no_grad():
        first = model(views)["mask"]
        saved = torch.get_rng_state()
        second = model(views)["mask"]
        torch.set_rng_state(saved)
        again = model(views)["mask"]
    return {"masks": torch.stack([first, second]), "again": again}


@on_two_ranks
def mae_masks_on_each_rank() -> dict[str, torch.Tensor]:
    return masks_of_two_steps(RANK_BATCH)


def test_two_gloo_ranks_mask_their_rows_of_one_global_draw() -> None:
    ranks = two_rank_results(mae_masks_on_each_rank)
    whole = masks_of_two_steps(2 * RANK_BATCH)  # one process on the global batch
    for rank, saved in enumerate(ranks):
        # Step after step, a rank's masks are its rows of one process's draw.
        rows = slice(rank * RANK_BATCH, (rank + 1) * RANK_BATCH)
        assert torch.equal(saved["masks"], whole["masks"][:, rows])
        # The generator state restored, the second step draws the same masks again.
        assert torch.equal(saved["again"], saved["masks"][1])
    masks = torch.cat([saved["masks"] for saved in ranks], dim=1).flatten(0, 1)
    assert masks.sum(dim=1).tolist() == [12.0] * len(masks)  # 0.75 of 16 patches each
    # Different on each rank, for each sample and at each step: 16 different masks.
    assert len({tuple(row.tolist()) for row in masks}) == 2 * 2 * RANK_BATCH


def build_vit() -> nn.Module:
    torch.manual_seed(0)
    return BACKBONES.get("vit_tiny")(
        BackboneConfig(name="vit_tiny", in_channels=1, image_size=8, vit=TINY_VIT)
    ).eval()


def test_the_encoder_on_visible_patches_is_torchvisions_layers_on_the_gathered_tokens() -> None:
    net = build_vit()
    images = torch.randn(3, 1, 8, 8)
    keep = torch.tensor([[0, 5, 9, 15], [3, 2, 1, 0], [12, 7, 8, 4]])
    with torch.no_grad():
        ours = net.visible_tokens(images, keep)
        # By hand: patch embedding, position embedding, gather, class token, layers, ln.
        patches = net.conv_proj(images).flatten(2).transpose(1, 2)
        patches = patches + net.encoder.pos_embedding[:, 1:]
        gathered = torch.stack([patches[i, keep[i]] for i in range(3)])
        cls = (net.class_token + net.encoder.pos_embedding[:, :1]).expand(3, -1, -1)
        x = torch.cat([cls, gathered], dim=1)
        for layer in net.encoder.layers:
            x = layer(x)
        expected = net.encoder.ln(x)
        torch.testing.assert_close(ours, expected)
        # Every patch, in order: the plain token path, and the class token of forward.
        everything = net.visible_tokens(images, torch.arange(16).expand(3, -1))
        cls_token, patch_tokens = net.tokens(images)
        torch.testing.assert_close(everything[:, 0], cls_token)
        torch.testing.assert_close(everything[:, 1:], patch_tokens)
        torch.testing.assert_close(net(images), cls_token)


def test_patchify_lays_out_each_patch_row_by_row_with_channels_last() -> None:
    images = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6)
    patches = patchify(images, 2)
    assert patches.shape == (2, 6, 12)  # a 2x3 grid, 2*2*3 values each
    for y in range(4):
        for x in range(6):
            for c in range(3):
                n, p = (y // 2) * 3 + x // 2, ((y % 2) * 2 + x % 2) * 3 + c
                assert patches[1, n, p] == images[1, c, y, x]


def test_the_decoder_position_embedding_is_the_fixed_2d_sine_cosine() -> None:
    table = sincos_position_embedding(8, 3, 4)
    assert table.shape == (1, 13, 8)
    assert torch.count_nonzero(table[0, 0]) == 0  # the class token's
    row, col = 2, 3
    entry = table[0, 1 + row * 4 + col]
    for k, frequency in enumerate((1.0, 0.01)):  # 10000^(-k/2)
        assert float(entry[k]) == pytest.approx(math.sin(row * frequency), abs=1e-6)
        assert float(entry[2 + k]) == pytest.approx(math.cos(row * frequency), abs=1e-6)
        assert float(entry[4 + k]) == pytest.approx(math.sin(col * frequency), abs=1e-6)
        assert float(entry[6 + k]) == pytest.approx(math.cos(col * frequency), abs=1e-6)


def mae_config(tmp_path: Path, **sections: dict) -> Config:
    merged = {name: dict(values) for name, values in TINY_MAE.items()}
    for name, values in sections.items():
        merged.setdefault(name, {}).update(values)
    return tiny_config(tmp_path / "run", **merged)


def test_built_from_the_config(tmp_path: Path) -> None:
    cfg = mae_config(tmp_path, loss={"name": "mae", "mae": {"mask_ratio": 0.5}})
    torch.manual_seed(0)
    model = build_model(cfg)
    assert isinstance(model, MaskedAutoencoder)
    assert model.mask_ratio == 0.5
    assert len(model.decoder.layers) == 1 and model.decoder.embed.out_features == 8
    assert model.decoder.predict.out_features == 2 * 2 * 1
    assert "decoder.position" not in model.state_dict()  # fixed, rebuilt with the model
    backbone_keys = {
        key.removeprefix("backbone.") for key in model.state_dict() if "backbone." in key
    }
    assert backbone_keys == set(build_vit().state_dict())  # torchvision's layout
    loss = build_loss(cfg)
    assert isinstance(loss, MaeLoss) and loss.norm_pix_loss
    images = torch.randn(5, 1, 8, 8)
    output = model({"views": [images], "image": images})
    assert output["reconstruction"].shape == output["target_patches"].shape == (5, 16, 4)
    assert output["mask"].sum(dim=1).tolist() == [8.0] * 5
    assert output["view_features"][0].shape == output["features"].shape == (5, 16)
    torch.testing.assert_close(output["features"], model.encode(images))
    assert torch.isfinite(loss(output, {}))


def test_a_bf16_autocast_step_runs(tmp_path: Path) -> None:
    model = build_model(mae_config(tmp_path))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = model({"views": [torch.randn(4, 1, 8, 8)]})
        loss = MaeLoss()(output, {})
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert model.decoder.mask_token.grad is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": {"backbone": {"name": "small_cnn"}}}, "must be vit_tiny"),
        ({"model": {"backbone": {"name": "tv:resnet18"}}}, "must be vit_tiny"),
        ({"loss": {"name": "mae", "mae": {"mask_ratio": 0.0}}}, "mask_ratio"),
        ({"loss": {"name": "mae", "mae": {"mask_ratio": 1.0}}}, "mask_ratio"),
        ({"loss": {"name": "mae", "mae": {"mask_ratio": 1.5}}}, "mask_ratio"),
        ({"data": {"num_views": 2}}, "one masked view"),
        ({"data": {"small_views": {"count": 2}}}, "one masked view"),
        ({"model": {"predictor": {"dims": [16, 8]}}}, "no predictor or prototypes"),
        ({"model": {"mae_decoder": {"width": 6, "heads": 2}}}, "multiple of 4"),
        ({"model": {"mae_decoder": {"width": 8, "heads": 3}}}, "must divide the width"),
    ],
)
def test_bad_mae_configs_are_rejected(tmp_path: Path, change: dict, message: str) -> None:
    raw = {name: dict(values) for name, values in TINY_MAE.items()}
    for section, values in change.items():
        for key, value in values.items():
            known = raw[section].get(key)
            raw[section][key] = {**known, **value} if isinstance(known, dict) else value
    with pytest.raises(ConfigError, match=message):
        validate_config(raw, "test")


def test_a_mask_ratio_that_keeps_no_patch_of_the_grid_is_a_model_error(tmp_path: Path) -> None:
    cfg = mae_config(tmp_path, loss={"name": "mae", "mae": {"mask_ratio": 0.99}})
    with pytest.raises(ValueError, match="keeps 0 of the 16 patches"):
        build_model(cfg)


def test_export_of_an_mae_run_loads_into_torchvision_vision_transformer(tmp_path: Path) -> None:
    cfg = mae_config(tmp_path, optimizer={"num_epochs": 1}, trainer={"test_model": False})
    state = SSLTrainer(cfg, hooks=[CheckpointHook(tmp_path / "run")]).train()
    out = tmp_path / "vit.pth"
    assert main(["export", str(tmp_path / "run" / "checkpoint.torch"), str(out)]) == 0
    weights = torch.load(out, weights_only=True)
    assert not any(key.startswith("decoder") for key in weights)
    net = VisionTransformer(
        image_size=8, patch_size=2, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
    )  # fmt: skip
    net.conv_proj = nn.Conv2d(1, 16, kernel_size=2, stride=2)
    net.load_state_dict(weights)  # strict
    net.heads = nn.Identity()
    images = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(net.eval()(images), state.base_model.backbone.eval()(images))


def test_the_digits_recipe_trains_an_epoch_on_the_tiny_data_set(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "mae_digits_vit_tiny",
        tmp_path / "run",
        "model.backbone.vit.patch_size=2",
        "model.backbone.vit.width=16",
        "model.backbone.vit.depth=1",
        "model.backbone.vit.heads=2",
        "model.backbone.vit.mlp_dim=32",
        "model.mae_decoder.width=8",
        "model.mae_decoder.depth=1",
        "model.mae_decoder.heads=2",
    )
    assert (cfg.loss.name, cfg.data.num_views, cfg.loss.mae.mask_ratio) == ("mae", 1, 0.75)
    train_tiny(cfg)
