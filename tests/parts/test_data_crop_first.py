"""The crop_first pipeline: its ops against torchvision's, decoding, reproducibility, the
device path, and refused settings. The distributions of its views: test_data_view_stats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from hookbus import ConfigError, DataError, SSLTrainer
from hookbus.config import validate_config
from hookbus.parts.data import build_data_loaders, collates, finish_views
from hookbus.parts.data import photometric as P
from hookbus.parts.data.crop_boxes import CROP_UNIFORMS, random_resized_box
from hookbus.parts.data.crop_collate import CropFirstCollate
from hookbus.parts.data.image_decode import SourceImage, jpeg_header
from hookbus.parts.data.transforms import clean_transform

SMALL = {"count": 1, "size": 8}


def folder_config(train: Path, **data: object):
    data = {
        "name": "image_folder",
        "pipeline": "crop_first",
        "image_size": 16,
        "batch_size": 4,
        "test_batch_size": 4,
        "num_workers": 0,  # the tests watch calls made in this process
        "folder": {"train_dir": str(train)},
        **data,
    }
    return validate_config({"data": data, "model": {"backbone": {"in_channels": 3}}})


def write_photos(folder: Path, count: int, size: tuple[int, int] = (64, 48)) -> Path:
    """Smooth random JPEG photos, two per class folder."""
    generator = torch.Generator().manual_seed(0)
    for index in range(count):
        coarse = torch.rand(1, 3, 4, 4, generator=generator)
        image = torch.nn.functional.interpolate(coarse, size=size[::-1], mode="bilinear")
        pixels = (image[0].permute(1, 2, 0) * 255).to(torch.uint8).numpy()
        (folder / f"c{index % 2}").mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(folder / f"c{index % 2}" / f"{index}.jpg", quality=95)
    return folder


def test_each_color_adjustment_is_torchvisions_per_image() -> None:
    images = torch.rand(3, 3, 24, 24, generator=torch.Generator().manual_seed(0))
    images[0, :, :4, :4] = 0.5  # gray pixels: no hue
    images[1, 1, 4:8, 4:8] = images[1, 0, 4:8, 4:8]  # two channels tie for the maximum
    factors = torch.tensor([0.6, 1.0, 1.4])
    cases = [
        (P._brightness, factors, TF.adjust_brightness),
        (P._contrast, factors, TF.adjust_contrast),
        (P._saturation, factors, TF.adjust_saturation),
        (P._hue, torch.tensor([-0.5, 0.1, 0.37]), TF.adjust_hue),
    ]
    for adjust, values, reference in cases:
        ours = images.clone()
        adjust(ours, values)
        expected = torch.stack([reference(images[i], float(values[i])) for i in range(3)])
        torch.testing.assert_close(ours, expected, atol=3e-6, rtol=0)


def test_the_blur_is_torchvisions_23_tap_gaussian_within_a_thousandth_of_a_level() -> None:
    images = torch.rand(3, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    sigma = torch.tensor([0.1, 1.1, 2.0])
    ours = images.clone()
    P._blur(ours, sigma)
    expected = torch.stack(
        [TF.gaussian_blur(images[i], [23, 23], [float(sigma[i])] * 2) for i in range(3)]
    )
    assert float((ours - expected).abs().max()) < 2e-5  # of 1: 0.005 of a uint8 level
    alone = images[1:2].clone()
    P._blur(alone, sigma[1:2])
    assert torch.equal(alone, ours[1:2])  # an image's blur does not depend on the batch


def test_grayscale_and_solarize_are_torchvisions() -> None:
    images = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    gray = images.clone()
    P._grayscale(gray, torch.ones(2))
    torch.testing.assert_close(gray, TF.rgb_to_grayscale(images, num_output_channels=3))
    solar = images.clone()
    P._solarize(solar, torch.ones(2))
    assert torch.equal(solar, TF.solarize(images, P.SOLARIZE_THRESHOLD))


def test_random_resized_box_falls_back_to_the_central_box_as_torchvision() -> None:
    # the whole area at an aspect ratio of 3/4 to 4/3 never fits an image of 10x100
    expected = v2.RandomResizedCrop.get_params(torch.empty(100, 10), [1.0, 1.0], [3 / 4, 4 / 3])
    assert random_resized_box([0.5] * CROP_UNIFORMS, 100, 10, (1.0, 1.0)) == tuple(expected)
    fits = [0.0, 0.5] + [0.0] * (CROP_UNIFORMS - 2)  # a quarter of the area, aspect ratio 1
    assert random_resized_box(fits, 50, 80, (0.25, 1.0)) == (0, 0, 32, 32)


def test_jpeg_header_and_reduced_decode(tmp_path: Path) -> None:
    write_photos(tmp_path, 1, size=(96, 64))
    path = tmp_path / "c0" / "0.jpg"
    assert jpeg_header(path.read_bytes()) == (64, 96, 3)
    assert jpeg_header(b"\x89PNG....") is None
    source = SourceImage(path, str(path))
    full, quarter = source.pixels(1), SourceImage(path, str(path)).pixels(4)
    with Image.open(path) as image:
        expected = torch.from_numpy(np.array(image)).permute(2, 0, 1)
    assert torch.equal(full[0], expected)
    assert quarter.shape == (1, 3, 16, 24)
    mean_full = full.float().mean(dim=(2, 3))
    torch.testing.assert_close(quarter.float().mean(dim=(2, 3)), mean_full, atol=2.0, rtol=0)


def test_views_decode_a_jpeg_at_the_reduction_their_crops_allow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_photos(tmp_path, 4, size=(256, 192))
    asked: list[int] = []
    pixels = SourceImage.pixels
    monkeypatch.setattr(SourceImage, "pixels", lambda self, r=1: asked.append(r) or pixels(self, r))
    cfg = folder_config(tmp_path, torchvision={"crop_scale": [0.9, 1.0]})
    batch = next(iter(build_data_loaders(cfg)["train"]))
    assert asked == [8, 8, 8, 8]  # boxes of at least 160 px for 16-px views
    assert [tuple(view.shape) for view in batch["views"]] == [(4, 3, 16, 16)] * 2


def test_the_clean_image_is_torchvisions_resize_and_center_crop(tmp_path: Path) -> None:
    write_photos(tmp_path, 2, size=(40, 30))
    cfg = folder_config(tmp_path, test_batch_size=2, image_size=16)
    batch = next(iter(build_data_loaders(cfg)["memory"]))
    with Image.open(sorted(tmp_path.rglob("*.jpg"))[0]) as image:
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1)
    expected = clean_transform(cfg.data.torchvision, 16)(pixels)
    torch.testing.assert_close(batch["image"][0], expected, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_crop_first_batches_are_the_same_in_workers_and_after_a_restart(tmp_path: Path) -> None:
    write_photos(tmp_path, 8)
    cfg = folder_config(tmp_path, small_views={"count": 2, "size": 8})
    in_process = list(build_data_loaders(cfg)["train"])
    workers = cfg.model_copy(update={"data": cfg.data.model_copy(update={"num_workers": 1})})
    in_worker = list(build_data_loaders(workers)["train"])
    resumed = build_data_loaders(cfg)["train"]
    resumed.sampler.set_start(4)
    after_restart = list(resumed)
    assert [v.shape[-1] for v in in_process[0]["views"]] == [16, 16, 8, 8]
    for first, second in zip(in_process, in_worker, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(first["views"], second["views"], strict=True))
    assert all(
        torch.equal(a, b)
        for a, b in zip(in_process[1]["views"], after_restart[0]["views"], strict=True)
    )
    assert not torch.equal(in_process[0]["views"][0], in_process[0]["views"][1])


def test_the_device_path_gives_the_loaders_values_on_the_cpu(tmp_path: Path) -> None:
    write_photos(tmp_path, 4)
    small = {"count": 1, "size": 8}
    cfg = folder_config(tmp_path, augment_device="model", small_views=small)
    raw = next(iter(build_data_loaders(cfg)["test"]))
    assert [view.dtype for view in raw["views"]] == [torch.uint8] * 3
    assert [tuple(p.shape) for p in raw["view_params"]] == [(4, P.NUM_PARAMS)] * 3
    in_loader = next(iter(build_data_loaders(folder_config(tmp_path, small_views=small))["test"]))
    augment = cfg.data.torchvision
    finished = finish_views(raw, torch.device("cpu"), augment.mean, augment.std)
    assert "view_params" not in finished
    assert torch.equal(finished["image"], in_loader["image"])
    assert all(
        torch.equal(a, b) for a, b in zip(finished["views"], in_loader["views"], strict=True)
    )


def test_training_with_augment_device_model_matches_the_loaders_augmentations(
    tmp_path: Path,
) -> None:
    write_photos(tmp_path / "images", 8)
    losses = []
    for device in ("cpu", "model"):
        cfg = folder_config(tmp_path / "images", augment_device=device)
        cfg.model.backbone.width = 4
        cfg.model.head.dims = [16, 16, 8]
        cfg.optimizer.num_epochs = 1
        cfg.trainer.test_model = False
        cfg.meters.knn.enabled = False
        cfg.hooks.evaluation_report.enabled = False
        cfg.checkpoint.dir = tmp_path / device
        state = SSLTrainer(cfg, hooks=[]).train()
        losses.append([record["loss"] for record in state.history])
    assert losses[0] == losses[1]


def test_per_view_probabilities_reach_their_views_in_both_pipelines() -> None:
    per_view = {"blur_prob": 0.5, "per_view": [{"blur_prob": 1.0}, {"solarize_prob": 0.3}]}
    cfg = folder_config(Path("."), num_views=2, torchvision=per_view, small_views=SMALL)
    augment = cfg.data.torchvision
    assert (augment.for_view(0).blur_prob, augment.for_view(0).solarize_prob) == (1.0, 0.0)
    assert (augment.for_view(1).blur_prob, augment.for_view(1).solarize_prob) == (0.5, 0.3)
    crop_first = collates(cfg)[0]
    assert [view.augment.blur_prob for view in crop_first.views] == [1.0, 0.5, 0.5]
    assert [view.augment.solarize_prob for view in crop_first.views] == [0.0, 0.3, 0.0]
    transforms = collates(
        cfg.model_copy(update={"data": cfg.data.model_copy(update={"pipeline": "torchvision"})})
    )[0]
    blur = [t.transforms[4].p for t in transforms.view_transforms]
    solarize = [t.transforms[5].p for t in transforms.view_transforms]
    assert (blur, solarize) == ([1.0, 0.5, 0.5], [0.0, 0.3, 0.0])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"pipeline": "torchvision", "augment_device": "model"}, "needs data.pipeline: crop_first"),
        ({"torchvision": {"per_view": [{}, {}, {}]}}, "one entry per large view"),
        ({"pipeline": "batch"}, "crop_first or torchvision"),
        ({"torchvision": {"color_jitter": [0.4, 0.4, 0.4, 0.6]}}, "hue at most 0.5"),
        ({"torchvision": {"blur_sigma": [2.0, 1.0]}}, "blur_sigma"),
    ],
)
def test_settings_the_pipeline_cannot_honour_are_refused(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        folder_config(Path("."), **data)


def test_augment_device_cuda_is_refused_without_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = folder_config(write_photos(tmp_path / "images", 2), augment_device="cuda")
    cfg.checkpoint.dir = tmp_path / "run"
    with pytest.raises(ConfigError, match="augment_device is 'cuda' but this machine has no CUDA"):
        SSLTrainer(cfg)


def test_unreadable_files_and_other_images_are_named(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    loader = build_data_loaders(folder_config(tmp_path, batch_size=1))["train"]
    with pytest.raises(DataError, match=r"cannot read image .*broken\.jpg"):
        next(iter(loader))
    collate = CropFirstCollate([], 8, folder_config(tmp_path).data.torchvision, seed=0)
    with pytest.raises(DataError, match=r"item 3: .* takes image files and RGB images"):
        collate([(torch.zeros(1, 8, 8, dtype=torch.uint8), 0, 3)])
    with pytest.raises(
        DataError, match=r"item 5: .* RGB images \(uint8 \[3, H, W\]\), got torch.float32"
    ):
        collate([(torch.zeros(3, 8, 8), 0, 5)])
