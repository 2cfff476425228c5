"""Photo folders as people have them: a dump of loose photos beside year and trip
folders read whole and unlabelled, class folders only when asked for, tiny images said
in one line, and unreadable photos skipped (counted, listed, bounded) when asked for.
Every image is a real photograph (scikit-learn's china.jpg and flower.jpg)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from hookbus import DATASETS, DataError
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.embed_data import ImageFiles
from hookbus.engine.config import TorchvisionAugmentConfig
from hookbus.hooks.unreadable_images import UNREADABLE_FILE, UnreadableImagesHook
from hookbus.parts.data import build_data_loaders
from hookbus.parts.data.transforms import clean_transform
from hookbus.parts.data.unreadable import UNREADABLE_KEY, stand_ins
from tests.eval_runs import photo_settings, write_run
from tests.photos import make_photo_folder, photograph
from tests.tiny_data import tiny_folder_run

PIPELINES = ("torchvision", "crop_first")


def photo(name: str, size: tuple[int, int]) -> Image.Image:
    return photograph(name).resize(size, Image.Resampling.BILINEAR)


def photo_dump(root: Path) -> dict[str, Image.Image]:
    """Loose photos beside year and trip folders, as a phone's export leaves them: the
    relative paths and the photos written there (PNG, so pixels come back exactly)."""
    layout = {
        "IMG_0001.png": photo("china", (40, 30)),
        "2023/beach.png": photo("flower", (36, 48)),
        "2023/rome/IMG_0102.png": photo("china", (48, 36)),
        "2024/IMG_0200.png": photo("flower", (44, 33)),
    }
    for relative, image in layout.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        image.save(root / relative)
    return layout


def folder_data(root: Path, pipeline: str = "torchvision", **folder: object) -> dict:
    return {
        "name": "image_folder",
        "pipeline": pipeline,
        "image_size": 16,
        "batch_size": 4,
        "test_batch_size": 4,
        "num_workers": 0,
        "folder": {"train_dir": str(root), **folder},
    }


def test_a_photo_dump_is_read_whole_and_unlabelled_by_default(tmp_path: Path) -> None:
    layout = photo_dump(tmp_path)
    cfg = validate_config({"data": folder_data(tmp_path)})
    assert cfg.data.folder.labels == "none"
    train, _ = DATASETS.get("image_folder")(cfg.data)
    assert train.classes == []
    assert [str(path.relative_to(tmp_path)) for path, _ in train.samples] == sorted(layout)
    assert {label for _, label in train.samples} == {-1}
    for index, (path, _) in enumerate(train.samples):
        image, label, position = train[index]
        expected = np.array(layout[str(path.relative_to(tmp_path))])
        assert np.array_equal(image.permute(1, 2, 0).numpy(), expected)
        assert (label, position) == (-1, index)


def test_class_folders_are_labels_only_when_asked_for(tmp_path: Path) -> None:
    photo_dump(tmp_path)
    asked = validate_config({"data": folder_data(tmp_path, labels="class_folders")})
    with pytest.raises(DataError, match=r"holds images beside its class folders \(IMG_0001"):
        DATASETS.get("image_folder")(asked.data)
    (tmp_path / "IMG_0001.png").unlink()
    train, _ = DATASETS.get("image_folder")(asked.data)
    assert train.classes == ["2023", "2024"]
    assert [label for _, label in train.samples] == [0, 0, 1]


def test_images_smaller_than_the_views_are_said_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    photo_dump(tmp_path)
    photo("china", (1, 1)).save(tmp_path / "2023" / "thumb.jpg")
    photo("flower", (12, 40)).save(tmp_path / "icon.png")
    cfg = validate_config({"data": {**folder_data(tmp_path), "image_size": 16}})
    with caplog.at_level(logging.WARNING, logger="hookbus"):
        DATASETS.get("image_folder")(cfg.data)
    assert [record.getMessage() for record in caplog.records] == [
        f"2 of the 6 images in {tmp_path} are smaller than the 16 px views "
        "(data.image_size) and are upsampled to them: 2023/thumb.jpg, icon.png"
    ]
    caplog.clear()
    large = validate_config({"data": {**folder_data(tmp_path / "2024"), "image_size": 16}})
    with caplog.at_level(logging.WARNING, logger="hookbus"):
        DATASETS.get("image_folder")(large.data)
    assert caplog.records == []


def test_a_large_folder_is_checked_on_a_spread_sample(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hookbus.parts.data.small_images.MAX_CHECKED", 2)
    for index in range(4):
        photo("china", (8, 8) if index % 2 == 0 else (40, 30)).save(tmp_path / f"{index}.png")
    cfg = validate_config({"data": folder_data(tmp_path)})
    with caplog.at_level(logging.WARNING, logger="hookbus"):
        DATASETS.get("image_folder")(cfg.data)
    assert [record.getMessage() for record in caplog.records] == [
        f"2 of 2 checked of the 4 images in {tmp_path} are smaller than the 16 px views "
        "(data.image_size) and are upsampled to them: 0.png, 2.png"
    ]


def truncated_photo() -> bytes:
    encoded = io.BytesIO()
    photo("flower", (48, 36)).save(encoded, "JPEG", quality=90)
    data = encoded.getvalue()
    return data[: len(data) // 2]


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_an_unreadable_photo_is_skipped_when_asked_its_place_taken_by_another(
    tmp_path: Path, pipeline: str
) -> None:
    photo_dump(tmp_path)
    bad = tmp_path / "2023" / "broken.jpg"
    bad.write_bytes(truncated_photo())
    data = folder_data(tmp_path, pipeline, skip_unreadable=True)
    loaders = build_data_loaders(validate_config({"data": data}))
    batches = list(loaders["test"])
    assert [len(batch["index"]) for batch in batches] == [4, 1]
    first = batches[0]  # 2023/beach.png, 2023/broken.jpg, 2023/rome/IMG_0102.png, 2024/...
    assert first["index"].tolist() == [0, 1, 2, 3]
    [line] = first[UNREADABLE_KEY]
    assert line.startswith(f"cannot read image {bad}: image file is truncated")
    assert torch.equal(first["image"][1], first["image"][2])  # the next readable one's
    assert not torch.equal(first["image"][0], first["image"][2])
    assert UNREADABLE_KEY not in batches[1]


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_an_unreadable_photo_stops_reading_by_default(tmp_path: Path, pipeline: str) -> None:
    photo_dump(tmp_path)
    (tmp_path / "broken.jpg").write_bytes(truncated_photo())
    loaders = build_data_loaders(validate_config({"data": folder_data(tmp_path, pipeline)}))
    with pytest.raises(DataError, match=r"^cannot read image .*broken\.jpg: image file is trunc"):
        list(loaders["test"])


def test_a_batch_with_no_readable_photo_is_the_decoders_error(tmp_path: Path) -> None:
    for name in ("a.jpg", "b.jpg"):
        (tmp_path / name).write_bytes(truncated_photo())
    data = {**folder_data(tmp_path, "crop_first", skip_unreadable=True), "test_batch_size": 2}
    loaders = build_data_loaders(validate_config({"data": data}))
    with pytest.raises(DataError) as raised:
        list(loaders["test"])
    assert str(raised.value).startswith(f"cannot read image {tmp_path / 'a.jpg'}: image file is")
    assert str(raised.value).endswith(" (and no image of its batch could be read in its place)")


def test_skipping_is_refused_for_data_other_than_an_image_folder() -> None:
    with pytest.raises(ValueError, match="skip_unreadable is for data.name image_folder"):
        validate_config({"data": {"name": "digits", "folder": {"skip_unreadable": True}}})


def write_recipe(tmp_path: Path, root: Path, **folder: object) -> Path:
    recipe = tmp_path / "recipe.yaml"
    data = {**folder_data(root, "crop_first", **folder), "batch_size": 2, "image_size": 16}
    recipe.write_text(yaml.safe_dump(tiny_folder_run(data)))
    return recipe


@pytest.mark.slow
def test_a_run_skips_lists_and_reports_unreadable_photos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "photos"
    photo_dump(root)
    bad = root / "2024" / "broken.jpg"
    bad.write_bytes(truncated_photo())
    recipe = write_recipe(tmp_path, root, skip_unreadable=True, max_unreadable_fraction=0.5)
    run = tmp_path / "run"
    assert main(["train", str(recipe), f"checkpoint.dir={run}", "-q"]) == 0
    [line] = (run / UNREADABLE_FILE).read_text().splitlines()
    assert line.startswith(f"cannot read image {bad}: image file is truncated")
    out = capsys.readouterr().out  # the log's lines
    assert (
        "1 image could not be read and was skipped (data.folder.skip_unreadable): listed in "
        f"{run / UNREADABLE_FILE}"
    ) in out


@pytest.mark.slow
def test_a_run_stops_in_one_line_past_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "photos"
    photo_dump(root)
    bad = root / "2024" / "broken.jpg"
    bad.write_bytes(truncated_photo())
    recipe = write_recipe(tmp_path, root, skip_unreadable=True, max_unreadable_count=0)
    run = tmp_path / "run"
    assert main(["train", str(recipe), f"checkpoint.dir={run}", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "hookbus train: error: 1 image could not be read, over "
        f"data.folder.max_unreadable_count 0 (listed in {run / UNREADABLE_FILE}); the last: "
        f"cannot read image {bad}: image file is truncated"
    )
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_training_evaluation_and_embed_see_a_sideways_photo_upright(
    tmp_path: Path, pipeline: str
) -> None:
    """A phone's portrait photo stored sideways with EXIF orientation 6 gives the same
    clean image as the upright photo: in the test and memory batches that the kNN meter
    and ``hookbus eval`` encode, and in ``hookbus embed``'s reader."""
    upright = photo("china", (36, 48))
    upright.save(tmp_path / "a_upright.png")
    exif = Image.Exif()
    exif[0x0112] = 6  # turn 90 degrees clockwise to show
    upright.transpose(Image.Transpose.ROTATE_90).save(tmp_path / "b_sideways.png", exif=exif)
    loaders = build_data_loaders(validate_config({"data": folder_data(tmp_path, pipeline)}))
    for split in ("test", "memory"):
        [batch] = list(loaders[split])
        assert torch.equal(batch["image"][0], batch["image"][1]), split
    files = [tmp_path / "a_upright.png", tmp_path / "b_sideways.png"]
    embedded = ImageFiles(files, clean_transform(TorchvisionAugmentConfig(), 16), 16)
    (_, first), (_, second) = embedded[0], embedded[1]
    assert isinstance(first, torch.Tensor) and torch.equal(first, second)


def test_an_evaluation_reads_every_image_even_of_a_run_that_skipped_some(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_photo_folder(tmp_path / "photos", per_class=2, size=24)
    bad = folder / "test" / "flower" / "001.jpg"
    bad.write_bytes(truncated_photo())
    settings = photo_settings(folder, size=16)
    settings["data"]["folder"]["skip_unreadable"] = True
    write_run(tmp_path / "run", settings)
    assert main(["eval", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hookbus eval: error: cannot read image {bad}: ")
    assert len(err.splitlines()) == 1


def test_a_stand_in_is_the_next_readable_image_of_the_batch() -> None:
    assert stand_ins([None, "bad a", None, "bad b"]) == [0, 2, 2, 0]
    assert stand_ins(["bad a", None]) == [1, 1]
    with pytest.raises(DataError, match=r"^bad a \(and no image of its batch"):
        stand_ins(["bad a", "bad b"])


def test_the_skipped_list_goes_on_after_a_resume() -> None:
    hook = UnreadableImagesHook(max_count=1)
    hook.load_state_dict({"skipped": ["cannot read image a.jpg: truncated"]})
    again = UnreadableImagesHook(max_count=1)
    again.load_state_dict(hook.state_dict())
    assert again.skipped == ["cannot read image a.jpg: truncated"]
    with pytest.raises(DataError, match=r"^2 images could not be read, over data.folder.max_"):
        again.skipped.append("cannot read image b.jpg: truncated")
        again._check_bounds(100, Path("run") / UNREADABLE_FILE)
