"""The launch environment: malformed distributed variables are one line naming the
variable (exit status 2, nothing written), and processes that never all meet end
within ``distributed.init_timeout_seconds`` with one line instead of waiting."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch.distributed as dist

from hookbus.cli import main
from hookbus.engine.process.distributed import RendezvousFailure, init_from_environment
from hookbus.engine.process.launch_env import (
    LaunchEnvironment,
    LaunchEnvironmentError,
    launch_environment,
)
from hookbus.launcher import free_port
from hookbus.testing import tiny_config

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs" / "simclr_digits.yaml")
MEET = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc' is not a whole number"),
        ({"WORLD_SIZE": ""}, "WORLD_SIZE='' is not a whole number"),
        ({"WORLD_SIZE": "2.0", **MEET}, "WORLD_SIZE='2.0' is not a whole number"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0' is below 1"),
        ({"WORLD_SIZE": "-2"}, "WORLD_SIZE='-2' is below 1"),
        ({"WORLD_SIZE": "9" * 40}, "is not a whole number"),
        ({"WORLD_SIZE": "2", "RANK": "2", **MEET}, "RANK='2' is not below WORLD_SIZE=2"),
        ({"WORLD_SIZE": "2", "RANK": "-1", **MEET}, "RANK='-1' is below 0"),
        ({"WORLD_SIZE": "2", "RANK": "one", **MEET}, "RANK='one' is not a whole number"),
        ({"WORLD_SIZE": "2", "LOCAL_RANK": "x", **MEET}, "LOCAL_RANK='x' is not a whole number"),
        ({"LOCAL_RANK": "-1"}, "LOCAL_RANK='-1' is below 0"),
        (
            {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "2", **MEET},
            "LOCAL_RANK='2' is not below LOCAL_WORLD_SIZE=2",
        ),
        (
            {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3", **MEET},
            "LOCAL_WORLD_SIZE='3' is not at most WORLD_SIZE=2",
        ),
        ({"WORLD_SIZE": "2", **MEET, "MASTER_PORT": "70000"}, "MASTER_PORT='70000' is not at"),
        ({"WORLD_SIZE": "2", **MEET, "MASTER_PORT": "http"}, "MASTER_PORT='http' is not a whole"),
        ({"WORLD_SIZE": "2", "MASTER_PORT": "29500"}, "MASTER_ADDR is not set"),
        ({"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "MASTER_PORT is not set"),
        ({"WORLD_SIZE": "2", "MASTER_ADDR": " ", "MASTER_PORT": "1"}, "MASTER_ADDR is not set"),
    ],
)
def test_a_malformed_variable_is_named(environ: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchEnvironmentError, match="environment variable ") as caught:
        launch_environment(environ)
    assert message in str(caught.value)


def test_no_variables_is_one_process() -> None:
    assert launch_environment({}) == LaunchEnvironment(1, 0, 0, None, None, launched=False)


def test_torchruns_variables_are_read() -> None:
    environ = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert launch_environment({**environ, **MEET}) == LaunchEnvironment(
        4, 3, 1, "127.0.0.1", 29500, launched=True, local_world_size=2, source="torchrun"
    )


@pytest.mark.parametrize(
    ("variable", "value"), [("WORLD_SIZE", "abc"), ("LOCAL_RANK", "x"), ("RANK", "-1")]
)
def test_train_refuses_a_malformed_variable_in_one_line_writing_nothing(
    variable: str,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv(variable, value)
    run_dir = tmp_path / "run"
    assert main(["train", RECIPE, f"checkpoint.dir={run_dir}", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"hookbus train: error: environment variable {variable}=")
    assert not run_dir.exists()


def test_a_rank_0_alone_ends_within_the_init_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_PORT", str(port))
    cfg = tiny_config(tmp_path / "run", distributed={"init_timeout_seconds": 2})
    started = time.monotonic()
    with pytest.raises(RendezvousFailure) as caught:
        init_from_environment(cfg)
    assert time.monotonic() - started < 30
    assert str(caught.value).startswith(
        f"rank 0 of 2: the processes did not all meet at 127.0.0.1:{port} within "
        "distributed.init_timeout_seconds (2 s): "
    )
    assert "1/2 clients joined" in str(caught.value)
    assert not dist.is_initialized()
