"""Bad weights files and teachers: each refused by ``hookbus train`` in one line naming the
file, exit status 2, before the run directory is made; a pretrained tag that cannot be
downloaded refused within seconds, never a hang.

The rows of the weights-file surface in the bad-input table (the classes of
/work/shared/BAD_INPUTS.md that apply to a file that is read): missing, empty,
truncated, garbled, the wrong format, another model's keys and shapes, a pickle with
code, a claimed size that is huge, a sparse 8 GB file, a FIFO, a link to
``/dev/zero``, a directory, a broken link and a link loop.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import struct
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import yaml

from hookbus.cli import main
from hookbus.engine.config import BackboneConfig
from hookbus.parts.models import BACKBONES

TAGGED = "timm:vit_tiny_patch16_224.augreg_in21k"


def recipe(tmp_path: Path, backbone: dict[str, object] | None = None) -> Path:
    """A recipe of the tiny data set; its backbone a small CNN of width 4 unless given."""
    path = tmp_path / "tiny.yaml"
    raw = {
        "trainer": {"imports": ["hookbus.testing"]},
        "data": {"name": "tiny_test_images", "image_size": 8, "batch_size": 8},
        "model": {"backbone": backbone or {"width": 4}, "head": {"dims": [16, 16, 8]}},
        "optimizer": {"num_epochs": 1, "warmup_epochs": 0},
        "meters": {"knn": {"k": 3}},
        "hooks": {"progress_bar": {"enabled": False}},
    }
    path.write_text(yaml.safe_dump(raw))
    return path


def small_cnn(width: int = 4) -> dict[str, torch.Tensor]:
    return BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=width)).state_dict()


def good_pth(path: Path) -> Path:
    torch.save(small_cnn(), path)
    return path


def refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *overrides: str,
    backbone: dict[str, object] | None = None,
) -> str:
    """The one error line of ``hookbus train`` with ``overrides``; asserts exit status 2
    and that no run directory was made."""
    run = tmp_path / "run"
    train = ["train", str(recipe(tmp_path, backbone)), f"checkpoint.dir={run}", *overrides]
    status = main(train)
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert not run.exists()
    return err.strip()


def weights(path: Path) -> str:
    return f"model.backbone.weights={path}"


class Code:
    """An object whose unpickling would run ``print``."""

    def __reduce__(self) -> tuple[Callable[..., None], tuple[str]]:
        return (print, ("code ran",))


def _truncated(path: Path) -> None:
    data = good_pth(path).read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbled_directory(path: Path) -> None:
    data = bytearray(good_pth(path).read_bytes())
    for i in range(len(data) - 60, len(data) - 20):  # the zip's central directory
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _garbled_pickle(path: Path) -> None:
    # The state dict's pickle, garbled in the middle, in a well-formed zip.
    buffer = io.BytesIO()
    torch.save(small_cnn(), buffer)
    out = io.BytesIO()
    with zipfile.ZipFile(buffer) as old, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename.endswith("data.pkl"):
                middle = len(data) // 2
                data = data[:middle] + b"\xff\xfe\xfd" + data[middle + 3 :]
            new.writestr(item, data)
    path.write_bytes(out.getvalue())


def _code_in_zip(path: Path) -> None:
    torch.save({"conv.weight": torch.zeros(1), "x": Code()}, path)


def _code_legacy(path: Path) -> None:
    path.write_bytes(pickle.dumps({"x": Code()}))


def _safetensors_huge_header(path: Path) -> None:
    path.write_bytes(struct.pack("<Q", (1 << 31)) + b'{"a": 1}')


def _safetensors_truncated(path: Path) -> None:
    from safetensors.torch import save_file

    save_file(small_cnn(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])


def _not_tensors(path: Path) -> None:
    torch.save({"lr": 0.1, "epoch": 3}, path)


def _a_list(path: Path) -> None:
    torch.save(list(small_cnn().values()), path)


def _text(path: Path) -> None:
    path.write_text("these are not weights\n")


def _sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(8 << 30)


FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (lambda path: path.write_bytes(b""), "cannot be read as safetensors or a torch"),
    "truncated": (_truncated, "truncated or garbled"),
    "garbled zip directory": (_garbled_directory, "truncated or garbled"),
    "garbled pickle": (_garbled_pickle, "weights file"),
    "pickle with code (zip)": (_code_in_zip, "holds Python objects besides tensors"),
    "pickle with code (legacy)": (_code_legacy, "holds Python objects besides tensors"),
    "safetensors, huge header claimed": (_safetensors_huge_header, "damaged safetensors"),
    "safetensors, truncated": (_safetensors_truncated, "damaged safetensors"),
    "no tensors": (_not_tensors, "not a state dict of tensors"),
    "a list": (_a_list, "holds a list, not a state dict"),
    "text": (_text, "cannot be read as safetensors or a torch"),
    "sparse 8 GB of zeros": (_sparse, "cannot be read as safetensors or a torch"),
}


@pytest.mark.parametrize("kind", list(FILES))
def test_a_bad_file_is_one_line_naming_it(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expected = FILES[kind]
    path = tmp_path / "weights.pth"
    make(path)
    started = time.monotonic()
    err = refused(tmp_path, capsys, weights(path))
    assert time.monotonic() - started < 30
    assert str(path) in err
    assert expected in err
    assert "code ran" not in capsys.readouterr().out


def test_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, weights(tmp_path / "nowhere.pth"))
    assert err.endswith(f"weights file not found: {tmp_path / 'nowhere.pth'}")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("directory", "is a directory, not a regular file"),
        ("fifo", "is a FIFO (named pipe), not a regular file"),
        ("link to /dev/zero", "is a character device, not a regular file"),
        ("broken link", "weights file not found"),
        ("link loop", "cannot read weights file"),
    ],
)
def test_what_is_no_regular_file_is_refused_without_reading(
    kind: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "weights.pth"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "broken link":
        path.symlink_to(tmp_path / "gone.pth")
    else:
        path.symlink_to(path)
    started = time.monotonic()
    err = refused(tmp_path, capsys, weights(path))
    assert time.monotonic() - started < 30
    assert expected in err


def test_another_models_keys_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "other.pth"
    torch.save({"stem.weight": torch.zeros(3), "blocks.0.weight": torch.zeros(3)}, path)
    err = refused(tmp_path, capsys, weights(path))
    assert f"weights in {path} do not fit the backbone small_cnn: " in err
    # BatchNorm's counters (num_batches_tracked) fill in for themselves: 20 of 24 keys.
    assert "20 missing keys (layers.0.weight, layers.1.weight, " in err
    assert "2 unexpected keys (stem.weight, blocks.0.weight)" in err


def test_wrong_shapes_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wider.pth"
    torch.save(small_cnn(width=8), path)
    err = refused(tmp_path, capsys, weights(path))
    assert "20 wrong shapes (layers.0.weight [8, 1, 3, 3] for [4, 1, 3, 3], " in err
    assert err.endswith("and 14 more)")
    assert "missing" not in err and "unexpected" not in err


def test_weights_that_fit_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = good_pth(tmp_path / "good.pth")
    run = tmp_path / "run"
    assert main(["train", str(recipe(tmp_path)), f"checkpoint.dir={run}", weights(path)]) == 0
    assert (run / "checkpoint.torch").exists()


@pytest.fixture
def empty_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("torch.hub._hub_dir", str(tmp_path / "torch_hub"))
    yield


@pytest.mark.usefixtures("empty_hub_cache")
def test_a_tag_offline_says_how_to_use_a_local_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    err = refused(tmp_path, capsys, backbone={"name": TAGGED, "in_channels": 1})
    assert time.monotonic() - started < 20
    assert err.endswith(
        f"{TAGGED}: timm's pretrained weights are not in the local cache and cannot be "
        "downloaded (HF_HUB_OFFLINE is set); download them where there is a network "
        "(timm.create_model('vit_tiny_patch16_224.augreg_in21k', pretrained=True) fills the "
        "cache, HF_HOME), or save them to a file and set "
        "model.backbone.name=timm:vit_tiny_patch16_224 model.backbone.weights=PATH"
    )


@pytest.mark.slow
@pytest.mark.usefixtures("empty_hub_cache")
def test_a_tag_whose_server_never_answers_fails_within_20_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with socket.socket() as silent:  # connections are taken, never answered
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        started = time.monotonic()
        err = refused(tmp_path, capsys, backbone={"name": TAGGED, "in_channels": 1})
        assert time.monotonic() - started < 20
    assert f"cannot be downloaded ({endpoint}: timed out)" in err
    assert "model.backbone.weights=PATH" in err


@pytest.mark.usefixtures("empty_hub_cache")
def test_a_tag_whose_server_refuses_connections_fails_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: connections are refused
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
        started = time.monotonic()
        err = refused(tmp_path, capsys, backbone={"name": TAGGED, "in_channels": 1})
        assert time.monotonic() - started < 20
    assert "Connection refused" in err
