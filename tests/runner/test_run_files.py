"""Files of a run directory are never written through a link that leads outside it.

Each hook that writes into the run directory is tried against a planted link (the log,
metrics.json, tensorboard/, a temporary file of an atomic write), and ``hookbus
validate`` and ``hookbus train`` refuse such a directory with one line and exit 2 before
anything is written; links that stay inside, and a run directory that is itself a link,
work as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from hookbus import FakeEngine, SSLEvents
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import write_text_atomic
from hookbus.engine.checkpoint.run_files import (
    UnsafeRunPath,
    check_links,
    inside_run_dir,
    open_append,
)
from hookbus.hooks.log import LOG_FILE, LogHook
from hookbus.hooks.metrics_json import METRICS_FILE, MetricsJsonHook
from hookbus.hooks.tensorboard import TENSORBOARD_DIR, TensorBoardHook

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs" / "simclr_digits.yaml")
TINY = [
    "optimizer.num_epochs=1",
    "trainer.test_every_num_epochs=100",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
    "-q",
]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the run directory that a link in it points at."""
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_text("keep me\n")
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir()
    return path


def test_inside_run_dir_resolves_links_that_stay_inside(run_dir: Path) -> None:
    (run_dir / "logs").mkdir()
    (run_dir / LOG_FILE).symlink_to(Path("logs") / "log.txt")
    assert inside_run_dir(run_dir, run_dir / LOG_FILE) == (run_dir / "logs" / "log.txt").resolve()
    with open_append(run_dir, run_dir / LOG_FILE) as file:
        file.write("one\n")
    assert (run_dir / "logs" / "log.txt").read_text() == "one\n"
    check_links(run_dir)


def test_a_link_leading_outside_is_named_with_its_target(run_dir: Path, victim: Path) -> None:
    (run_dir / LOG_FILE).symlink_to(victim)
    with pytest.raises(UnsafeRunPath) as error:
        open_append(run_dir, run_dir / LOG_FILE)
    assert str(error.value) == (
        f"{run_dir / LOG_FILE} leads outside the run directory {run_dir.resolve()} through a "
        f"symbolic link (to {victim.resolve()}); hookbus does not write through it: remove "
        "the link or choose another checkpoint.dir"
    )
    with pytest.raises(UnsafeRunPath, match="log.txt leads outside"):
        check_links(run_dir)
    assert victim.read_text() == "keep me\n"


def test_the_log_hook_refuses_a_linked_log_file(run_dir: Path, victim: Path) -> None:
    (run_dir / LOG_FILE).symlink_to(victim)
    engine = FakeEngine(run_dir=run_dir)
    LogHook(log_frequency=1).attach(engine)
    with pytest.raises(UnsafeRunPath, match="log.txt leads outside"):
        engine.fire_event(SSLEvents.ON_START)
    assert victim.read_text() == "keep me\n"


def test_the_metrics_hook_refuses_a_linked_metrics_file(run_dir: Path, victim: Path) -> None:
    (run_dir / METRICS_FILE).symlink_to(victim)
    engine = FakeEngine(run_dir=run_dir, phase_name="train", loss_sum=torch.tensor(1.0))
    MetricsJsonHook().attach(engine)
    with pytest.raises(UnsafeRunPath, match="metrics.json leads outside"):
        engine.fire_event(SSLEvents.ON_PHASE_END)
    assert victim.read_text() == "keep me\n"


def test_the_tensorboard_hook_refuses_a_linked_folder(run_dir: Path, victim: Path) -> None:
    (run_dir / TENSORBOARD_DIR).symlink_to(victim.parent, target_is_directory=True)
    engine = FakeEngine(run_dir=run_dir)
    TensorBoardHook(log_frequency=1).attach(engine)
    with pytest.raises(UnsafeRunPath, match="tensorboard leads outside"):
        engine.fire_event(SSLEvents.ON_START)
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_an_atomic_write_replaces_a_link_and_never_writes_through_one(
    run_dir: Path, victim: Path
) -> None:
    path = run_dir / "config.yaml"
    planted = run_dir / f".config.yaml.tmp-{os.getpid()}"
    planted.symlink_to(victim)  # where the temporary file will be made
    path.symlink_to(victim)
    write_text_atomic(path, "new\n")
    assert victim.read_text() == "keep me\n"
    assert not path.is_symlink()
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.yaml"]


@pytest.mark.parametrize("name", [LOG_FILE, METRICS_FILE, TENSORBOARD_DIR, "config.yaml"])
def test_validate_and_train_refuse_a_link_out_and_write_nothing(
    run_dir: Path, victim: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_dir / name).symlink_to(victim.parent if name == TENSORBOARD_DIR else victim)
    for command in ("validate", "train"):
        assert main([command, RECIPE, f"checkpoint.dir={run_dir}", *TINY]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"hookbus {command}: error: ")
        assert f"{run_dir / name} leads outside the run directory" in err
        assert len(err.splitlines()) == 1
    assert [p.name for p in run_dir.iterdir()] == [name]
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]
    assert victim.read_text() == "keep me\n"


def test_links_inside_and_a_linked_run_directory_train(tmp_path: Path) -> None:
    real = tmp_path / "scratch" / "run"
    (real / "logs").mkdir(parents=True)
    (real / LOG_FILE).symlink_to(Path("logs") / "log.txt")
    run_dir = tmp_path / "run"
    run_dir.symlink_to(real, target_is_directory=True)
    assert main(["train", RECIPE, f"checkpoint.dir={run_dir}", *TINY]) == 0
    assert "run finished after 5 train iterations" in (real / "logs" / "log.txt").read_text()
    assert (real / METRICS_FILE).is_file()
    assert (real / LOG_FILE).is_symlink()


def test_a_linked_lock_file_is_refused(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / "elsewhere").write_text("")
    (run_dir / ".hookbus.lock").symlink_to("elsewhere")
    assert main(["train", RECIPE, f"checkpoint.dir={run_dir}", *TINY]) == 2
    assert ".hookbus.lock is a symbolic link" in capsys.readouterr().err
