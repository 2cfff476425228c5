"""``hookbus embed`` and :func:`hookbus.embed_images`: rows that are the exported backbone's
forward of each image file, in order, from a checkpoint, a run directory or an export."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

import hookbus
from benchmarks import bench_embed
from hookbus import Config, embed_images, save_embeddings
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.checkpoint.checkpoint_io import (
    FORMAT,
    checkpoint_name,
    point_to_newest,
    save_atomic,
)
from hookbus.engine.config.config_io import config_to_yaml
from hookbus.export import export_backbone
from hookbus.parts.models import SmallCNN, build_model
from tests.conftest import tiny_config
from tests.photos import make_photo_folder

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
"""The run's normalisation: not the default, so that embed must read it from the run."""


def photo_config(run_dir: Path) -> Config:
    """A run on image files: 32 px, a small CNN of width 4 (16 features)."""
    return validate_config(
        {
            "data": {
                "name": "image_folder",
                "pipeline": "torchvision",
                "image_size": 32,
                "folder": {"train_dir": str(run_dir)},
                "torchvision": {"mean": list(MEAN), "std": list(STD)},
            },
            "model": {"backbone": {"width": 4, "in_channels": 3}, "head": {"dims": [16, 16, 8]}},
            "checkpoint": {"dir": str(run_dir)},
        },
        "photo test config",
    )


def write_run(run_dir: Path, cfg: Config, model: torch.nn.Module) -> Path:
    """A run directory holding ``model`` as its one checkpoint and ``config.yaml``."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(config_to_yaml(cfg))
    path = run_dir / checkpoint_name(0, 3)
    checkpoint = {"format": FORMAT, "phase_idx": 0, "train_phase_idx": 0, "iteration": 3}
    checkpoint |= {"iteration_num": 3, "optimizer": {}, "hooks": {}}
    save_atomic(
        checkpoint | {"model": model.state_dict(), "config": cfg.model_dump(mode="json")}, path
    )
    point_to_newest(run_dir, path.name)
    return path


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """500 JPEG photographs (2 splits x 2 classes x 125), shorter side 32 px."""
    return make_photo_folder(tmp_path_factory.mktemp("photos"), per_class=125, size=32)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoint of a run on images: a seeded model whose BatchNorm statistics are
    not the initial ones (eval mode shows), saved as a run's checkpoint."""
    run_dir = tmp_path_factory.mktemp("runs") / "photo_run"
    cfg = photo_config(run_dir)
    torch.manual_seed(0)
    model = build_model(cfg)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return write_run(run_dir, cfg, model)


@pytest.fixture(scope="module")
def exported(run: Path) -> Path:
    out = run.parent.parent / "backbone.pth"
    export_backbone(run, out)
    return out


@pytest.fixture(scope="module")
def expected(photos: Path, exported: Path) -> tuple[list[str], torch.Tensor]:
    """The files under ``photos`` in sorted order and a direct forward of the exported
    backbone on each: Pillow, resize to 32 / 0.875, center crop, the run's normalisation."""
    backbone = SmallCNN(in_channels=3, width=4)
    backbone.load_state_dict(torch.load(exported, weights_only=True))
    transform = v2.Compose(
        [
            v2.PILToTensor(),
            v2.Resize(37, antialias=True),
            v2.CenterCrop(32),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )
    files = sorted(photos.rglob("*.jpg"))
    with torch.no_grad():
        images = torch.stack([transform(Image.open(path).convert("RGB")) for path in files])
        rows = backbone.eval()(images)
    return [str(path) for path in files], rows


def test_a_checkpoint_embeds_each_image_as_the_exported_backbone_does(
    run: Path, photos: Path, expected: tuple[list[str], torch.Tensor]
) -> None:
    result = embed_images(run, photos, batch_size=96, num_workers=0)
    paths, rows = expected
    assert len(paths) == 500
    assert result.paths == paths
    assert result.embeddings.shape == (500, 16)
    assert result.embeddings.dtype == torch.float32
    torch.testing.assert_close(result.embeddings, rows, atol=1e-5, rtol=0)
    assert result.source == run
    assert result.device == "cpu"
    assert result.images_per_second > 0


def test_an_export_with_its_recipe_embeds_as_the_checkpoint_does(
    run: Path, exported: Path, photos: Path, expected: tuple[list[str], torch.Tensor]
) -> None:
    result = embed_images(
        exported, photos, recipe=run.parent / "config.yaml", batch_size=64, num_workers=1
    )
    assert result.paths == expected[0]
    torch.testing.assert_close(result.embeddings, expected[1], atol=1e-5, rtol=0)


def test_a_run_directory_embeds_with_its_newest_checkpoint_and_files_keep_their_order(
    run: Path, photos: Path, expected: tuple[list[str], torch.Tensor]
) -> None:
    paths, rows = expected
    files = [paths[7], photos / "train" / "flower", paths[3]]
    result = embed_images(run.parent, files, num_workers=0)
    flowers = [i for i, path in enumerate(paths) if "/train/flower/" in path]
    assert result.source == run
    assert result.paths == [paths[7], *(paths[i] for i in flowers), paths[3]]
    torch.testing.assert_close(result.embeddings, rows[[7, *flowers, 3]], atol=1e-5, rtol=0)


def test_the_image_size_can_be_changed(run: Path, photos: Path) -> None:
    result = embed_images(run, photos / "test" / "china", image_size=24, num_workers=0)
    assert result.embeddings.shape == (125, 16)


@pytest.mark.parametrize("form", ["pt", "npz", "csv"])
def test_the_command_writes_a_file_loaded_in_one_line(
    form: str,
    run: Path,
    photos: Path,
    expected: tuple[list[str], torch.Tensor],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / f"photos.{form}"
    arguments = [str(run.parent), str(photos / "test"), "--out", str(out), "--num-workers", "0"]
    assert main(["embed", *arguments, "-q"]) == 0
    paths, rows = expected[0][:250], expected[1][:250]  # test/ comes before train/
    if form == "pt":
        loaded = torch.load(out, weights_only=True)
        assert loaded["paths"] == paths
        torch.testing.assert_close(loaded["embeddings"], rows, atol=1e-5, rtol=0)
    elif form == "npz":
        loaded = np.load(out)
        assert loaded["paths"].tolist() == paths
        np.testing.assert_allclose(loaded["embeddings"], rows.numpy(), atol=1e-5, rtol=0)
    else:
        lines = out.read_text().splitlines()
        assert lines[0] == "path," + ",".join(f"e{i}" for i in range(16))
        assert [line.split(",")[0] for line in lines[1:]] == paths
        values = np.array([[float(v) for v in line.split(",")[1:]] for line in lines[1:]])
        np.testing.assert_allclose(values, rows.numpy(), atol=1e-5, rtol=0)
    report = capsys.readouterr().out
    assert report.startswith(f"wrote {out}: 250 embeddings of 16 dimensions from {run}; ")
    assert " images/s on cpu " in report
    assert list(tmp_path.iterdir()) == [out]


def test_save_embeddings_refuses_an_existing_file_unless_overwrite(
    run: Path, photos: Path, tmp_path: Path
) -> None:
    result = embed_images(run, photos / "test" / "china" / "000.jpg", num_workers=0)
    out = tmp_path / "one.bin"
    save_embeddings(result, out, format="npz")
    with pytest.raises(hookbus.UserError, match="exists: give --overwrite"):
        save_embeddings(result, out, format="npz")
    out.write_text("old")
    save_embeddings(result, out, format="npz", overwrite=True)
    assert np.load(out)["embeddings"].shape == (1, 16)


def test_embed_images_is_public_and_typed() -> None:
    assert "embed_images" in hookbus.__all__ and "save_embeddings" in hookbus.__all__
    assert hookbus.embed_images.__annotations__["return"] == "Embeddings"
    assert "Example::" in hookbus.embed_images.__doc__


@pytest.fixture(scope="module")
def broken_folder(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three good photos and a truncated JPEG between them."""
    folder = tmp_path_factory.mktemp("broken")
    for index in (0, 2, 3):
        (folder / f"{index}.jpg").write_bytes((photos / "test" / "china" / "000.jpg").read_bytes())
    (folder / "1.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a photo")
    return folder


def _digits_checkpoint(tmp_path: Path) -> Path:
    """A checkpoint of a run on in-memory tensors (the tiny data set)."""
    cfg = tiny_config(tmp_path / "tiny")
    return write_run(tmp_path / "tiny", cfg, build_model(cfg))


def _other_recipe(tmp_path: Path) -> Path:
    """A recipe whose small CNN is twice as wide as the exported one."""
    cfg = photo_config(tmp_path / "other")
    backbone = cfg.model.backbone.model_copy(update={"width": 8})
    cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update={"backbone": backbone})})
    path = tmp_path / "other.yaml"
    path.write_text(config_to_yaml(cfg))
    return path


ERRORS = {
    "missing source": (
        lambda tmp, run, photos: [str(tmp / "nope.torch"), str(photos)],
        "embedding source not found: ",
    ),
    "empty folder": (lambda tmp, run, photos: [str(run), str(tmp)], "no images in "),
    "missing image": (
        lambda tmp, run, photos: [str(run), str(tmp / "gone.jpg")],
        "image file or folder not found: ",
    ),
    "export without recipe": (
        lambda tmp, run, photos: [str(run.parent.parent / "backbone.pth"), str(photos)],
        "is an exported backbone, which does not say how it was built",
    ),
    "export with another recipe": (
        lambda tmp, run, photos: [
            str(run.parent.parent / "backbone.pth"),
            str(photos),
            "--recipe",
            str(_other_recipe(tmp)),
        ],
        "do not fit backbone small_cnn: Error(s) in loading state_dict for SmallCNN: size "
        "mismatch for layers.0.weight",
    ),
    "checkpoint with recipe": (
        lambda tmp, run, photos: [str(run), str(photos), "--recipe", "simclr_digits"],
        "is a checkpoint, which carries its run's config",
    ),
    "run on tensors": (
        lambda tmp, run, photos: [str(_digits_checkpoint(tmp)), str(photos)],
        "was trained on in-memory tensors",
    ),
    "not a checkpoint": (
        lambda tmp, run, photos: [str(run.parent / "config.yaml"), str(photos)],
        "cannot load ",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_a_user_error_is_one_line_exit_2_and_writes_nothing(
    case: str,
    run: Path,
    exported: Path,
    photos: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments, message = ERRORS[case]
    out = tmp_path / "out" / "emb.pt"
    assert main(["embed", *arguments(tmp_path, run, photos), "--out", str(out), "-q"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("hookbus embed: error: ") and message in error
    assert error.count("\n") == 1
    assert not out.parent.exists()


@pytest.mark.parametrize("workers", [0, 2])
def test_an_unreadable_image_is_named(
    workers: int,
    run: Path,
    broken_folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "emb.npz"
    arguments = [str(run), str(broken_folder), "--out", str(out), "--batch-size", "2"]
    assert main(["embed", *arguments, "--num-workers", str(workers), "-q"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"hookbus embed: error: cannot read image {broken_folder / '1.jpg'}")
    assert error.count("\n") == 1
    assert not out.exists()


def test_an_existing_output_is_refused_before_any_work_unless_overwrite(
    run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "emb.pt"
    out.write_bytes(b"keep me")
    arguments = ["embed", str(run), str(photos / "test" / "china"), "--out", str(out), "-q"]
    assert main(arguments) == 2
    assert "exists: give --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"
    assert main([*arguments, "--overwrite"]) == 0
    assert len(torch.load(out, weights_only=True)["paths"]) == 125


@pytest.mark.parametrize(
    ("source", "name", "message"),
    [
        ("checkpoint", "phase00000_batch0000003.torch", "is the input file"),
        ("run directory", "phase00000_batch0000003.torch", "a file hookbus keeps in the run"),
        ("run directory", "checkpoint.torch", "a file hookbus keeps in the run directory"),
        ("run directory", "emb.txt", "does not say the format"),
    ],
)
def test_an_output_that_is_the_source_a_run_file_or_of_no_format_is_refused(
    source: str,
    name: str,
    message: str,
    run: Path,
    photos: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = run.parent / name
    before = out.read_bytes() if out.exists() else None
    given = run if source == "checkpoint" else run.parent
    arguments = ["embed", str(given), str(photos), "--out", str(out), "--overwrite", "-q"]
    assert main(arguments) == 2
    assert message in capsys.readouterr().err
    assert (out.read_bytes() if out.exists() else None) == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_is_refused_without_it(
    run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "emb.pt"
    arguments = [str(run), str(photos), "--out", str(out), "--device", "cuda", "-q"]
    assert main(["embed", *arguments]) == 2
    assert capsys.readouterr().err == (
        "hookbus embed: error: device cuda: CUDA is not available on this machine; use cpu\n"
    )


def test_the_benchmark_measures_embed_beside_the_pipeline_and_a_hand_loop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench_embed.main(["--images", "8", "--size", "32", "--rounds", "1", "--workers", "0"])
    table = capsys.readouterr().out
    assert "| hookbus embed |" in table and "| hand-written loop |" in table
    assert "embed / hand-written loop" in table and "embed / training pipeline" in table


def test_the_command_counts_the_images_on_a_progress_bar_on_stderr(
    run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = [str(photos / "test" / "china" / f"00{index}.jpg") for index in range(3)]
    out = tmp_path / "three.pt"
    assert main(["embed", str(run), *images, "--out", str(out), "--num-workers", "0"]) == 0
    captured = capsys.readouterr()
    assert "embed: 100%" in captured.err and "3/3" in captured.err
    assert captured.out.startswith(f"wrote {out}: 3 embeddings") and "images/s" in captured.out
