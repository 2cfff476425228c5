"""SLURM's own way: a task srun started takes its rank, world, local rank and meeting
place from srun's variables; a bad or inconsistent one is one line naming it, exit 2."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hookbus.cli import main
from hookbus.engine.process.launch_env import (
    LaunchEnvironment,
    LaunchEnvironmentError,
    launch_environment,
)
from hookbus.engine.process.slurm_hosts import expand_hostlist, first_host, tasks_per_node

ROOT = Path(__file__).resolve().parents[2]

TASK = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NODELIST": "node[07-08]",
    "SLURM_JOB_NODELIST": "node[07-08]",
}
"""The variables srun gives task 3 of a step of 4 tasks, 2 on each of two nodes."""


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("gpu5", ["gpu5"]),
        ("a[8-10],b,c[1]", ["a8", "a9", "a10", "b", "c1"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("h-1.example.org,h[09-10].x", ["h-1.example.org", "h09.x", "h10.x"]),
    ],
)
def test_a_node_list_is_expanded_in_order_with_its_padding(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts
    assert first_host(text) == hosts[0]


def test_the_first_host_of_a_huge_list_is_found_without_spelling_the_list_out() -> None:
    assert first_host("n[000000001-999999999],m[1-999999999]") == "n000000001"
    with pytest.raises(ValueError, match="names more than 10 hosts"):
        expand_hostlist("n[1-999999999]", limit=10)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("node[01-03", "unclosed"),
        ("node01-03]", "unmatched or nested bracket"),
        ("node[[1]]", "unmatched or nested bracket"),
        ("node[3-1]", "counts down"),
        ("node[a-b]", "not N or N-M"),
        ("node[]", "not N or N-M"),
        ("a,,b", "empty host name"),
        ("no de1", "characters outside"),
        ("n1,$(reboot)", "characters outside"),
        ("node1\n", "characters outside"),
        ("n[1]" * 9, "more than 8 ranges"),
    ],
)
def test_a_malformed_node_list_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        first_host(text)


def test_tasks_per_node_are_spelled_out() -> None:
    assert tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    for text in ("2(3)", "2\n"):
        with pytest.raises(ValueError, match="not N or N"):
            tasks_per_node(text)


def test_an_srun_task_takes_its_place_from_slurms_variables() -> None:
    assert launch_environment(TASK) == LaunchEnvironment(
        4, 3, 1, "node07", 15000 + 4242, True, local_world_size=2, source="slurm"
    )


def test_master_addr_and_port_set_in_the_job_win_over_the_node_list_and_job_id() -> None:
    env = launch_environment({**TASK, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29511"})
    assert (env.master_addr, env.master_port) == ("10.0.0.5", 29511)


def test_without_step_variables_the_job_node_list_and_ntasks_serve() -> None:
    task = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_ID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "1",
        "SLURM_NODELIST": "cn[3-4]",
    }
    assert launch_environment(task) == LaunchEnvironment(
        2, 1, 1, "cn3", 15007, True, local_world_size=2, source="slurm"
    )


def test_torchruns_variables_win_over_slurms() -> None:
    environ = {**TASK, "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    env = launch_environment(environ)
    assert (env.world_size, env.rank, env.source) == (2, 1, "torchrun")


def test_one_task_or_no_srun_step_is_one_process(caplog: pytest.LogCaptureFixture) -> None:
    assert launch_environment({**TASK, "SLURM_NTASKS": "1"}).world_size == 1
    batch_shell = {key: value for key, value in TASK.items() if "STEP" not in key}
    with caplog.at_level(logging.WARNING, logger="hookbus"):
        env = launch_environment({**batch_shell, "SLURM_NTASKS": "5"})
    assert (env.world_size, env.launched) == (1, False)
    assert "SLURM_NTASKS=5, but srun did not start this process" in caplog.text


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SLURM_NTASKS": "four"}, "SLURM_NTASKS='four' is not a whole number"),
        ({"SLURM_NTASKS": "-4"}, "SLURM_NTASKS='-4' is below 1"),
        ({"SLURM_PROCID": "4"}, "SLURM_PROCID='4' is not below SLURM_NTASKS=4"),
        ({"SLURM_PROCID": None}, "SLURM_PROCID is not set, and SLURM_NTASKS=4 needs it"),
        ({"SLURM_LOCALID": "2"}, "SLURM_LOCALID='2' is not below 2 tasks on node 1"),
        ({"SLURM_LOCALID": "x"}, "SLURM_LOCALID='x' is not a whole number"),
        ({"SLURM_LOCALID": None}, "SLURM_LOCALID is not set"),
        ({"SLURM_STEP_NUM_TASKS": "3"}, "SLURM_STEP_NUM_TASKS=3 disagrees with SLURM_NTASKS=4"),
        ({"SLURM_STEP_TASKS_PER_NODE": "3(x2)"}, "counts 6 tasks on 2 nodes, and SLURM_NTASKS=4"),
        ({"SLURM_STEP_TASKS_PER_NODE": "2,x"}, "SLURM_STEP_TASKS_PER_NODE='2,x' has 'x'"),
        ({"SLURM_NODEID": "2"}, "SLURM_NODEID='2' is not below 2 nodes"),
        ({"SLURM_NODEID": None}, "SLURM_NODEID is not set"),
        ({"SLURM_STEP_NODELIST": "node[07-"}, "SLURM_STEP_NODELIST='node[07-' is not a SLURM"),
        (
            {"SLURM_STEP_NODELIST": None, "SLURM_JOB_NODELIST": None},
            "SLURM_STEP_NODELIST is not set, and SLURM_NTASKS=4 needs it (or MASTER_ADDR)",
        ),
        ({"SLURM_JOB_ID": None}, "SLURM_JOB_ID is not set, and SLURM_NTASKS=4 needs it"),
        ({"SLURM_JOB_ID": "12a"}, "SLURM_JOB_ID='12a' is not a whole number"),
        ({"MASTER_PORT": "0"}, "MASTER_PORT='0' is below 1"),
    ],
)
def test_a_bad_or_inconsistent_slurm_variable_is_named(
    changes: dict[str, str | None], message: str
) -> None:
    environ = {**TASK, **changes}
    with pytest.raises(LaunchEnvironmentError) as caught:
        launch_environment({key: value for key, value in environ.items() if value is not None})
    assert message in str(caught.value)


def test_train_refuses_a_bad_slurm_variable_in_one_line_writing_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**TASK, "SLURM_PROCID": "9"}.items():
        monkeypatch.setenv(name, value)
    run = tmp_path / "run"
    recipe = str(ROOT / "configs" / "simclr_digits.yaml")
    assert main(["train", recipe, f"checkpoint.dir={run}"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "hookbus train: error: environment variable SLURM_PROCID='9' is not below SLURM_NTASKS=4"
    ]
    assert not run.exists()
