"""Every read of a user's file is bounded before it happens: a FIFO, a device or a file
over its limit (sparse files here: huge, yet no disk) is refused in one line naming the
file and the limit, without waiting; checksums stream the checkpoint; checkpoints load
with ``weights_only=True`` and their tensors mapped from the file."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
import torch

from hookbus.cli import main
from hookbus.engine.bounded_files import (
    MAX_IMAGE_BYTES,
    check_regular,
    describe_size,
    json_depth,
    loads_json_bounded,
    read_bounded,
    read_text_bounded,
)
from hookbus.engine.checkpoint.checkpoint_io import (
    FORMAT,
    MAX_SIDECAR_BYTES,
    checksum_path,
    load_checkpoint,
    load_verified_checkpoint,
    save_atomic,
    verify_checksum,
)
from hookbus.engine.config.config_io import read_yaml
from hookbus.engine.errors import CheckpointError, ConfigError, DataError, UserError
from hookbus.parts.data.image_folder import read_image
from hookbus.parts.models.pretrained import read_backbone_weights
from tests.runner.test_export_safety import within


def fake_checkpoint(path: Path, weights: int = 4) -> Path:
    """A checkpoint file with its sidecar, holding ``weights`` float32 values."""
    save_atomic(
        {
            "format": FORMAT,
            "phase_idx": 0,
            "train_phase_idx": 0,
            "iteration": 1,
            "iteration_num": 1,
            "model": {"backbone.w": torch.arange(weights, dtype=torch.float32)},
            "optimizer": {},
            "hooks": {},
        },
        path,
    )
    return path


def validate(capsys: pytest.CaptureFixture[str], recipe: Path | str) -> tuple[int, str]:
    with within(20):
        status = main(["validate", str(recipe)])
    return status, capsys.readouterr().err.strip()


def test_sizes_are_named_for_people() -> None:
    assert [describe_size(n) for n in (512, 4096, 1 << 20, 8 << 30)] == [
        "512 bytes",
        "4.0 KiB",
        "1.0 MiB",
        "8.0 GiB",
    ]


def test_a_recipe_that_is_dev_zero_is_refused_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, err = validate(capsys, "/dev/zero")
    assert status == 2
    assert err == (
        "hookbus validate: error: config file /dev/zero is a character device, not a regular "
        "file: hookbus reads only regular files"
    )


def test_a_sparse_4_gib_recipe_is_refused_naming_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "huge.yaml"
    recipe.touch()
    os.truncate(recipe, 4 << 30)
    status, err = validate(capsys, recipe)
    assert status == 2
    assert err == (
        f"hookbus validate: error: config file {recipe} is 4.0 GiB, over hookbus's limit of "
        "1.0 MiB for it"
    )


def test_a_fifo_recipe_is_refused_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "pipe.yaml"
    os.mkfifo(recipe)
    status, err = validate(capsys, recipe)
    assert status == 2
    assert "is a FIFO (named pipe), not a regular file" in err and str(recipe) in err


@pytest.mark.parametrize("kind", ["a symbolic link loop", "a broken symbolic link"])
def test_a_recipe_that_is_a_link_to_nothing_is_named_so(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "loop.yaml"
    if kind == "a symbolic link loop":
        recipe.symlink_to(recipe)
        said = "is a symbolic link loop: it leads nowhere"
    else:
        recipe.symlink_to(tmp_path / "gone.yaml")
        said = f"is a broken symbolic link (to {tmp_path / 'gone.yaml'})"
    for command in ("validate", "train", "hooks"):
        with within(20):
            assert main([command, str(recipe)]) == 2
        assert capsys.readouterr().err == f"hookbus {command}: error: config file {recipe} {said}\n"


def test_a_file_at_the_limit_is_read_and_one_byte_more_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("x" * 64)
    assert read_text_bounded(path, "notes", 64) == "x" * 64
    path.write_text("x" * 65)
    with pytest.raises(UserError, match="is 65 bytes, over hookbus's limit of 64 bytes"):
        read_text_bounded(path, "notes", 64)


def test_a_missing_recipe_keeps_its_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"^config file not found: {tmp_path / 'no.yaml'}$"):
        read_yaml(tmp_path / "no.yaml")


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path: Path) -> None:
    # /proc files report size 0 and yield more: the read itself is bounded too.
    with pytest.raises(UserError, match="grew past the limit of 16 bytes"):
        read_bounded(Path("/proc/self/maps"), "file", 16)


def test_an_8_gib_sparse_jpeg_is_refused_naming_the_file_and_limit(tmp_path: Path) -> None:
    from hookbus.parts.data.image_decode import SourceImage

    image = tmp_path / "huge.jpg"
    image.touch()
    os.truncate(image, 8 << 30)
    limit = describe_size(MAX_IMAGE_BYTES)
    with pytest.raises(
        DataError, match=f"^image {image} is 8.0 GiB, over hookbus's limit of {limit}"
    ):
        SourceImage(image, str(image))


def test_a_fifo_image_is_refused_by_both_pipelines(tmp_path: Path) -> None:
    from hookbus.parts.data.image_decode import SourceImage

    image = tmp_path / "pipe.jpg"
    os.mkfifo(image)
    with within(10):
        with pytest.raises(DataError, match="is a FIFO"):
            SourceImage(image, str(image))
        with pytest.raises(DataError, match="is a FIFO"):
            read_image(image)


def test_a_huge_sidecar_is_refused_naming_the_limit(tmp_path: Path) -> None:
    path = fake_checkpoint(tmp_path / "phase00000_batch0000001.torch")
    os.truncate(checksum_path(path), 2 << 30)
    with pytest.raises(
        CheckpointError, match=f"over hookbus's limit of {MAX_SIDECAR_BYTES // 1024}.0 KiB"
    ):
        verify_checksum(path)


def test_a_fifo_sidecar_is_refused_without_waiting(tmp_path: Path) -> None:
    path = fake_checkpoint(tmp_path / "phase00000_batch0000001.torch")
    checksum_path(path).unlink()
    os.mkfifo(checksum_path(path))
    with within(10), pytest.raises(CheckpointError, match="checksum file .* is a FIFO"):
        verify_checksum(path)


def test_a_fifo_checkpoint_with_a_sidecar_is_refused_without_waiting(tmp_path: Path) -> None:
    good = fake_checkpoint(tmp_path / "good.torch")
    fifo = tmp_path / "phase00000_batch0000002.torch"
    os.mkfifo(fifo)
    checksum_path(fifo).write_bytes(checksum_path(good).read_bytes())
    with within(10), pytest.raises(CheckpointError, match="checkpoint .* is a FIFO"):
        load_verified_checkpoint(fifo)
    with within(10), pytest.raises(CheckpointError, match="checkpoint .* is a FIFO"):
        load_checkpoint(fifo)


def test_pretrained_weights_that_are_a_fifo_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "weights.pth"
    os.mkfifo(fifo)
    with within(10), pytest.raises(CheckpointError, match="weights file .* is a FIFO"):
        read_backbone_weights(fifo)


def test_the_checksum_streams_the_checkpoint(tmp_path: Path) -> None:
    path = fake_checkpoint(tmp_path / "big.torch", weights=4 << 20)  # 16 MiB of weights
    tracemalloc.start()
    try:
        verify_checksum(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert os.path.getsize(path) > 16 << 20
    assert peak < 1 << 20


def test_a_truncated_checkpoint_is_refused_before_it_is_hashed(tmp_path: Path) -> None:
    path = fake_checkpoint(tmp_path / "c.torch")
    os.truncate(path, os.path.getsize(path) - 1)
    with pytest.raises(CheckpointError, match="bytes, its checksum file says .*: truncated"):
        verify_checksum(path)


def test_checkpoints_load_weights_only_and_mapped_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fake_checkpoint(tmp_path / "c.torch")
    calls = []
    real_load = torch.load

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    loaded = load_verified_checkpoint(path)
    assert torch.equal(loaded["model"]["backbone.w"], torch.arange(4, dtype=torch.float32))
    assert [(call["weights_only"], call["mmap"]) for call in calls] == [(True, True)]


def test_check_regular_refuses_a_directory_without_opening_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=f"^image {tmp_path} is a directory, not a regular file"):
        check_regular(tmp_path, "image", error=DataError)


def test_json_depth_counts_nesting_outside_strings() -> None:
    assert json_depth('{"a": [1, {"b": "]]]"}], "c": "[[[\\"["}') == 3
    assert json_depth("5") == 0


@pytest.mark.slow
def test_json_nested_deeper_than_the_limit_is_refused_not_recursed() -> None:
    with pytest.raises(UserError, match="nested deeper than 4 levels"):
        loads_json_bounded("[" * 200_000 + "]" * 200_000, "x.json", max_depth=4)
    assert loads_json_bounded("[[[[1]]]]", "x.json", max_depth=4) == [[[[1]]]]
