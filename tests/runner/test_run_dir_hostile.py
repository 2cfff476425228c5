"""Run directories holding, by a name hookbus writes, the wrong kind of entry: a folder
named ``metrics.json`` or like a leftover temporary file, a FIFO as ``log.txt``, a file
as ``tensorboard``. ``validate`` and ``train`` refuse them with one line naming the
path, exit status 2, and write nothing (never an IsADirectoryError traceback, never a
hang on a FIFO)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hookbus.cli import main
from hookbus.engine.checkpoint.run_files import UnfitRunEntry, check_entries

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs" / "simclr_digits.yaml")


def folder(path: Path) -> None:
    path.mkdir()


def fifo(path: Path) -> None:
    os.mkfifo(path)


def file(path: Path) -> None:
    path.write_text("")


CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("metrics.json", folder, "is a directory, where hookbus writes a file"),
    ("log.txt", folder, "is a directory, where hookbus writes a file"),
    ("config.yaml", folder, "is a directory, where hookbus writes a file"),
    ("checkpoint.torch", folder, "is a directory, where hookbus writes a file"),
    ("curves.json", folder, "is a directory, where hookbus writes a file"),
    (".hookbus.lock", folder, "is a directory, where hookbus writes a file"),
    (".checkpoint.torch.tmp-4242", folder, "is a directory, where hookbus writes a temporary file"),
    (".config.yaml.tmp-1", folder, "is a directory, where hookbus writes a temporary file"),
    (
        "phase00000_batch0000003.torch",
        folder,
        "is a directory, where hookbus writes a checkpoint file",
    ),
    (
        "phase00000_batch0000003.torch.sha256",
        folder,
        "is a directory, where hookbus writes a checkpoint file",
    ),
    ("metrics.json", fifo, "is a FIFO, where hookbus writes a file"),
    ("log.txt", fifo, "is a FIFO, where hookbus writes a file"),
    ("config.yaml", fifo, "is a FIFO, where hookbus writes a file"),
    (".metrics.json.tmp-7", fifo, "is a FIFO, where hookbus writes a temporary file"),
    ("tensorboard", file, "is a regular file, where hookbus writes a folder"),
    ("tensorboard", fifo, "is a FIFO, where hookbus writes a folder"),
]


@pytest.mark.parametrize(("name", "make", "message"), CASES)
def test_the_wrong_kind_of_entry_is_named(
    tmp_path: Path, name: str, make: Callable[[Path], None], message: str
) -> None:
    make(tmp_path / name)
    with pytest.raises(UnfitRunEntry) as caught:
        check_entries(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / name} {message}: move it out")


def test_a_link_inside_is_judged_by_what_it_leads_to(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "metrics.json").symlink_to("elsewhere")
    with pytest.raises(UnfitRunEntry, match="metrics.json is a directory"):
        check_entries(tmp_path)


def test_the_right_kinds_and_other_names_are_fine(tmp_path: Path) -> None:
    for name in ("metrics.json", "log.txt", ".config.yaml.tmp-3", "phase00000_batch0000001.torch"):
        (tmp_path / name).write_text("")
    (tmp_path / "checkpoint.torch").symlink_to("phase00000_batch0000001.torch")
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "my_notes").mkdir()
    os.mkfifo(tmp_path / "my_pipe")
    check_entries(tmp_path)


@pytest.mark.parametrize("command", ["validate", "train"])
@pytest.mark.parametrize(
    ("name", "make"),
    [("metrics.json", folder), (".checkpoint.torch.tmp-99", folder), ("log.txt", fifo)],
)
def test_the_command_refuses_in_one_line_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    name: str,
    make: Callable[[Path], None],
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    make(run_dir / name)
    assert main([command, RECIPE, f"checkpoint.dir={run_dir}", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"hookbus {command}: error: {run_dir / name} is a ")
    assert sorted(os.listdir(run_dir)) == [name]


def test_the_hostile_campaign_runs_its_torch_free_cases_cleanly(tmp_path: Path) -> None:
    """A fast subset of benchmarks/hostile_inputs.py: the cases the command line settles
    before it loads torch (a malformed launch variable, a full standard output)."""
    from benchmarks import hostile_inputs

    picked = {"WORLD_SIZE=abc", "LOCAL_RANK=x", "hookbus recipes > /dev/full"}
    cases = [case for case in hostile_inputs.CASES if case.name in picked]
    assert len(cases) == len(picked)
    for index, case in enumerate(cases):
        outcome = hostile_inputs.run_case(case, tmp_path / f"case{index}", timeout=120)
        assert outcome.clean(case), f"{case.name}: {outcome}"
        assert not outcome.wrote
