"""``hookbus eval``: the scores of the run's own encoder on its images, the features cached
by the encoder's hash, the same numbers from an export, each part switched off, the
table and ``eval.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.checkpoint.checkpoint_io import load_checkpoint
from hookbus.eval_cache import CACHE_DIR
from hookbus.export import export_backbone
from hookbus.parts.meters.frozen_eval import knn_accuracy
from hookbus.parts.models import build_model
from hookbus.testing import tiny_images
from tests.eval_runs import TINY, write_run

SCORES = ("knn", "linear", "low_shot", "retrieval")


def results(folder: Path) -> dict:
    return json.loads((folder / "eval.json").read_text())


def scores(found: dict) -> dict:
    """The scores of a results file, without its timings and cache flag."""
    return {part: found[part] for part in SCORES if part in found}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run on hookbus.testing's tiny images (24 train, 8 test, 4 classes), evaluated once."""
    run_dir = tmp_path_factory.mktemp("eval") / "run"
    write_run(run_dir, TINY)
    assert main(["eval", str(run_dir), "-q"]) == 0
    return run_dir


def test_eval_scores_the_encoder_of_the_newest_checkpoint(run: Path) -> None:
    found = results(run)
    checkpoint = load_checkpoint(run / "checkpoint.torch")
    model = build_model(validate_config(checkpoint["config"]))
    model.load_state_dict(checkpoint["model"])
    train, test = tiny_images(24, 0), tiny_images(8, 1)
    with torch.no_grad():
        train_x, test_x = model.eval().encode(train.images), model.encode(test.images)
    for k in (10, 20):
        expected = knn_accuracy(
            train_x, train.labels, test_x, test.labels, k=k, vote="weighted", temperature=0.07
        )
        assert found["knn"]["backbone"][str(k)] == expected
    assert (found["train_images"], found["test_images"]) == (24, 8)
    assert found["classes"] == ["0", "1", "2", "3"]
    assert found["features"] == {"backbone": {"dims": 16}}
    assert found["not_applicable"]["kNN k=200"] == "k is more than the 24 train images"
    assert set(found["not_applicable"]) == {"kNN k=200", "last_blocks"}
    assert found["source"] == str(run / "phase00000_batch0000003.torch")
    assert 0 <= found["linear"]["backbone"]["top1"] <= 1
    assert [part["images"] for part in found["low_shot"]["backbone"].values()] == [[4] * 5, [4] * 5]
    assert set(found["retrieval"]["backbone"]["recall_at"]) == {"1", "5", "10"}
    (cache,) = (run / CACHE_DIR).iterdir()
    saved = torch.load(cache, weights_only=True)
    torch.testing.assert_close(saved["train"]["features"]["backbone"], train_x)
    torch.testing.assert_close(saved["test"]["features"]["backbone"], test_x)
    assert saved["test"]["labels"].tolist() == test.labels.tolist()


def test_the_table_names_every_score_and_the_results_file(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(run), "-q"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"evaluation of {run}/phase00000_batch0000003.torch on tiny")
    assert lines[1].split()[:4] == ["features", "dims", "kNN", "k=10"]
    assert "1% labels (4 images, 5 draws)" in lines[1] and "R@10" in lines[1]
    assert lines[2].split()[:2] == ["backbone", "16"]
    assert "kNN k=200: not computed, k is more than the 24 train images" in out
    assert out.rstrip().endswith(f"wrote {run}/eval.json")


def test_a_second_eval_reads_the_cache_and_a_new_checkpoint_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    write_run(run_dir, TINY)
    assert main(["eval", str(run_dir), "-q"]) == 0
    first = results(run_dir)
    assert main(["eval", str(run_dir), "-q"]) == 0
    second = results(run_dir)
    assert (first["cached_features"], second["cached_features"]) == (False, True)
    assert scores(second) == scores(first)
    assert second["seconds"]["extract"] == 0
    write_run(run_dir, TINY, seed=1, batches=6)  # the newest checkpoint: other weights
    assert main(["eval", str(run_dir), "-q"]) == 0
    third = results(run_dir)
    assert third["cached_features"] is False
    assert third["source"].endswith("phase00000_batch0000006.torch")
    assert scores(third) != scores(first)
    assert len(list((run_dir / CACHE_DIR).iterdir())) == 2
    cache = sorted((run_dir / CACHE_DIR).iterdir(), key=lambda path: path.stat().st_mtime)[-1]
    cache.write_bytes(b"PK\x03\x04 not a zip at all")
    capsys.readouterr()
    assert main(["eval", str(run_dir), "-q"]) == 0
    assert f"feature cache {cache} cannot be used (PytorchStreamReader" in capsys.readouterr().out
    assert results(run_dir)["cached_features"] is False
    assert scores(results(run_dir)) == scores(third)
    assert torch.load(cache, weights_only=True)["format"] == "hookbus-eval-features-1"


def test_an_export_with_its_recipe_gives_the_checkpoints_numbers(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "backbone.pth"
    export_backbone(run / "checkpoint.torch", exported)
    recipe = str(run / "config.yaml")
    out = tmp_path / "results"
    assert main(["eval", str(exported), "--recipe", recipe, "--out", str(out), "-q"]) == 0
    assert scores(results(out)) == scores(results(run))
    assert main(["eval", str(exported), "--recipe", recipe, "-q"]) == 2
    assert "give the folder to write the results into (--out)" in capsys.readouterr().err
    assert main(["eval", str(exported), "--out", str(out), "-q"]) == 2
    assert "give its run's recipe with --recipe" in capsys.readouterr().err


def test_each_part_is_switched_off_by_its_flag(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "none"
    flags = ["--no-knn", "--no-linear", "--no-low-shot", "--no-retrieval"]
    assert main(["eval", str(run), "--out", str(out), *flags, "-q"]) == 0
    assert not set(SCORES) & set(results(out))
    assert main(["eval", str(run), "--out", str(out), "--no-linear", "--no-low-shot", "-q"]) == 0
    assert set(SCORES) & set(results(out)) == {"knn", "retrieval"}
    assert results(out)["knn"] == results(run)["knn"]
    assert main(["eval", str(run), "--out", str(out), "--k", "3", "--recall-at", "2", "-q"]) == 0
    assert list(results(out)["knn"]["backbone"]) == ["3"]
    assert list(results(out)["retrieval"]["backbone"]["recall_at"]) == ["2"]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--k", "0"], "k must be at least 1"),
        (["--recall-at", "-2"], "k must be at least 1"),
        (["--temperature", "0"], "temperature must be positive"),
        (["--temperature", "nan"], "temperature must be positive"),
        (["--low-shot", "1.5"], "low-shot fractions must be in (0, 1)"),
        (["--draws", "0"], "low-shot draws must be at least 1"),
        (["--last-blocks", "-1"], "--last-blocks must be 0 (off) or more"),
        (["--batch-size", "0"], "batch size must be at least 1"),
        (["--no-linear"], "switch the low-shot part off too"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_status_2(
    run: Path, flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (run / "eval.json").read_bytes()
    assert main(["eval", str(run), *flags, "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hookbus eval: error: ") and named in err
    assert len(err.strip().splitlines()) == 1
    assert (run / "eval.json").read_bytes() == before
