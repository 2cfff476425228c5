"""A resumed run goes on from its checkpoint only where it can: not with fewer epochs than
the checkpoint has trained, and not on another number of processes (the real one, not the
config key that asked for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookbus import ConfigError, SSLTrainer
from hookbus.cli import main
from hookbus.config import Config
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, load_checkpoint
from hookbus.engine.config.config_changes import (
    check_epochs,
    check_world_size,
    config_changes,
    elastic_resume,
    saved_world_size,
)
from hookbus.engine.process import distributed
from hookbus.parts import task
from tests.conftest import tiny_config
from tests.tiny_data import CONFIGS, TINY_RECIPE


def train(run_dir: Path, epochs: int) -> None:
    SSLTrainer(tiny_config(run_dir, optimizer={"num_epochs": epochs})).train()


def test_fewer_epochs_than_the_checkpoint_has_trained_are_refused(tmp_path: Path) -> None:
    train(tmp_path / "run", 2)
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1})
    with pytest.raises(ConfigError) as error:
        SSLTrainer(cfg).train()
    message = str(error.value)
    assert message.startswith("optimizer.num_epochs is 1, but checkpoint ")
    assert "has trained 2 epochs: a resumed run cannot train fewer" in message
    assert "Set optimizer.num_epochs to 2 or more" in message
    assert "another checkpoint.dir" in message


def test_as_many_epochs_as_trained_finds_the_run_complete(tmp_path: Path) -> None:
    train(tmp_path / "run", 2)
    state = SSLTrainer(tiny_config(tmp_path / "run", optimizer={"num_epochs": 2})).train()
    assert state.iteration == 6


@pytest.mark.parametrize(
    ("train_phase_idx", "num_epochs", "refused"),
    [
        (2, 3, False),  # inside epoch 3 of 3
        (2, 2, True),  # inside epoch 3: it has begun one epoch more than asked
        (39, 2, True),  # the finished demo run of 40 epochs, asked for 2
        (-1, 1, False),  # stopped before its first epoch ended
    ],
)
def test_epochs_begun_count_against_num_epochs(
    train_phase_idx: int, num_epochs: int, refused: bool, tmp_path: Path
) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": num_epochs})
    checkpoint = {"train_phase_idx": train_phase_idx}
    if refused:
        with pytest.raises(ConfigError, match=f"has trained {train_phase_idx + 1} epochs"):
            check_epochs(checkpoint, cfg, "ckpt")
    else:
        check_epochs(checkpoint, cfg, "ckpt")


def test_the_command_refuses_fewer_epochs_in_one_line_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    recipe = str(CONFIGS / "simclr_digits.yaml")
    overrides = [*TINY_RECIPE, f"checkpoint.dir={run}", "trainer.test_model=false"]
    assert main(["train", recipe, *overrides, "optimizer.num_epochs=2", "-q"]) == 0
    log = (run / "log.txt").read_text()
    capsys.readouterr()
    assert main(["train", recipe, *overrides, "optimizer.num_epochs=1", "-q"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no "run stopped" line: the run never started
    assert err.count("\n") == 1
    assert err.startswith("hookbus train: error: optimizer.num_epochs is 1, but checkpoint ")
    assert "has trained 2 epochs" in err
    assert (run / "log.txt").read_text() == log


def test_checkpoints_record_the_number_of_processes(tmp_path: Path) -> None:
    train(tmp_path / "run", 1)
    assert load_checkpoint(tmp_path / "run" / POINTER_NAME)["world_size"] == 1


def test_a_one_process_checkpoint_is_not_resumed_by_two_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what torchrun or the launcher give the run: a process group of 2; the config key
    # distributed.nproc_per_node is left at 1, as it is under torchrun
    train(tmp_path / "run", 1)
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    # one process and no process group: the model's DDP wrapping is stood in for
    monkeypatch.setattr(task, "DistributedDataParallel", lambda model, **_: model)
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 2})
    with pytest.raises(ConfigError) as error:
        SSLTrainer(cfg).train()
    message = str(error.value)
    assert "was trained by 1 process, and this run has 2" in message
    assert "distributed.nproc_per_node=1" in message


def world(size: int | None, nproc_per_node: int = 1) -> dict[str, Any]:
    checkpoint: dict[str, Any] = {"config": {"distributed": {"nproc_per_node": nproc_per_node}}}
    if size is not None:
        checkpoint["world_size"] = size
    return checkpoint


@pytest.mark.parametrize(
    ("checkpoint", "trained_by"),
    [
        (world(2, nproc_per_node=1), 2),  # torchrun with 2 ranks: the key says 1
        (world(1, nproc_per_node=2), 1),
        (world(None, nproc_per_node=2), 2),  # from before checkpoints recorded it
        ({"config": {}}, 1),
        ({}, 1),
    ],
)
def test_the_processes_that_trained_a_checkpoint(
    checkpoint: dict[str, Any], trained_by: int
) -> None:
    assert saved_world_size(checkpoint) == trained_by


def test_torchrun_and_the_launcher_resume_each_others_checkpoints_of_the_same_size(
    tmp_path: Path,
) -> None:
    cfg = tiny_config(tmp_path)
    assert check_world_size(world(2, nproc_per_node=1), cfg, 2, "ckpt") is None  # torchrun's
    assert check_world_size(world(2, nproc_per_node=2), cfg, 2, "ckpt") is None  # launcher's


def test_a_change_in_the_number_of_processes_is_refused_both_ways(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path)
    with pytest.raises(ConfigError, match="trained by 2 processes, and this run has 1: a res"):
        check_world_size(world(2), cfg, 1, "ckpt")
    with pytest.raises(ConfigError, match="trained by 1 process, and this run has 4: a res"):
        check_world_size(world(1, nproc_per_node=1), cfg, 4, "ckpt")


def shards_config(
    folder: Path, batch_size: int, canonical_nodes: int = 1, **sections: dict[str, Any]
) -> Config:
    """A tiny config that reads shards (a folder with an index: validation reads no
    more) with ``batch_size`` a rank."""
    (folder / "index.json").write_text("{}")
    shards = {"path": str(folder), "canonical_nodes": canonical_nodes}
    data = {"name": "shards", "shards": shards, "batch_size": batch_size}
    return tiny_config(folder / "run", data=data, **sections)


def shards_checkpoint(cfg: Config, world_size: int) -> dict[str, Any]:
    return {"config": cfg.model_dump(mode="json"), "world_size": world_size}


@pytest.mark.parametrize(
    ("trained", "resumed"),
    [((1, 8), (2, 4)), ((2, 4), (1, 8)), ((4, 2), (2, 4)), ((2, 4), (8, 1))],
)
def test_shards_resume_on_another_number_of_processes_with_the_same_global_batch(
    tmp_path: Path, trained: tuple[int, int], resumed: tuple[int, int]
) -> None:
    (saved_world, saved_batch), (world_size, batch) = trained, resumed
    checkpoint = shards_checkpoint(shards_config(tmp_path, saved_batch), saved_world)
    cfg = shards_config(tmp_path, batch)
    assert elastic_resume(checkpoint, cfg, world_size)
    line = check_world_size(checkpoint, cfg, world_size, "ckpt")
    assert line is not None
    assert f"goes on with {world_size} and the same global batch of 8 " in line
    assert "the weights are not those of a run that never changed" in line
    changes = config_changes(checkpoint["config"], cfg, mid_phase=True, source="ckpt", elastic=True)
    assert changes == [f"data.batch_size: {saved_batch} -> {batch}"]
    with pytest.raises(ConfigError, match=r"data.batch_size: \d -> \d"):
        config_changes(checkpoint["config"], cfg, mid_phase=True, source="ckpt")


@pytest.mark.parametrize(
    ("world_size", "batch", "sections", "hint"),
    [
        (2, 8, {}, "global batch: data.batch_size=4)"),  # the global batch doubles
        (3, 3, {}, "a number of processes that divides its global batch of 8)"),
        (2, 4, {"distributed": {"strategy": "fsdp"}}, "data.batch_size=4)"),
    ],
)
def test_shards_on_another_number_of_processes_are_refused_without_the_same_global_batch(
    tmp_path: Path, world_size: int, batch: int, sections: dict[str, Any], hint: str
) -> None:
    checkpoint = shards_checkpoint(shards_config(tmp_path, 8), 1)
    cfg = shards_config(tmp_path, batch, **sections)
    assert not elastic_resume(checkpoint, cfg, world_size)
    with pytest.raises(ConfigError) as error:
        check_world_size(checkpoint, cfg, world_size, "ckpt")
    message = str(error.value)
    assert f"trained by 1 process, and this run has {world_size}" in message
    assert message.split(" (data.name shards resumes")[1].startswith(" on another number")
    assert hint in message


def test_other_canonical_nodes_or_other_data_keep_the_number_of_processes(tmp_path: Path) -> None:
    checkpoint = shards_checkpoint(shards_config(tmp_path, 8), 1)
    regrouped = shards_config(tmp_path, 4, canonical_nodes=2)
    assert not elastic_resume(checkpoint, regrouped, 2)
    folder = tiny_config(tmp_path / "run", data={"batch_size": 4})
    assert not elastic_resume(checkpoint, folder, 2)
    with pytest.raises(ConfigError, match="keeps its number of processes. Run it with 1"):
        check_world_size(checkpoint, folder, 2, "ckpt")


def test_the_launch_key_alone_may_change(tmp_path: Path) -> None:
    saved = tiny_config(tmp_path / "run").model_dump(mode="json")
    cfg = tiny_config(tmp_path / "run", distributed={"nproc_per_node": 2})
    changes = config_changes(saved, cfg, mid_phase=True, source="ckpt")
    assert changes == ["distributed.nproc_per_node: 1 -> 2"]
