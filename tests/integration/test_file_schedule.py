"""``make test``'s scheduler (tests/file_schedule.py), driven as pytest-xdist drives it:
each file on one worker, the files of the shared two-rank launch together, the
heaviest files handed out first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import file_schedule
from tests.file_schedule import FileScheduling


class Worker:
    """What the scheduler calls on a pytest-xdist worker."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.done = 0
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


def _write(tests: Path, name: str, text: str = "") -> str:
    path = tests / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return f"tests/{name}"


def test_each_file_runs_on_one_worker_and_the_heaviest_start_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = tmp_path / "tests"
    call = "ranks = two_rank_results(case)\n"
    files = {
        "light": (_write(tests, "kernel/test_light.py"), 6),
        "heavy": (_write(tests, "integration/test_heavy.py"), 2),
        "middle": (_write(tests, "runner/test_middle.py"), 3),
        "shared_a": (_write(tests, "parts/test_loss_a.py", call), 2),
        "shared_b": (_write(tests, "hooks/test_hook_b.py", call), 3),
        "other": (_write(tests, "parts/test_other.py"), 4),
    }
    monkeypatch.setattr(
        file_schedule,
        "SECONDS",
        {files["heavy"][0]: 300.0, files["middle"][0]: 50.0, files["shared_a"][0]: 20.0},
    )
    collection = [f"{path}::test_{i}" for path, count in files.values() for i in range(count)]
    config = SimpleNamespace(
        rootpath=tmp_path, getvalue=lambda name: ["2*popen"] if name == "tx" else None
    )
    scheduler = FileScheduling(config)  # type: ignore[arg-type]
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)  # type: ignore[arg-type]
    for worker in workers:
        scheduler.add_node_collection(worker, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    ran: dict[str, set[int]] = {}
    while any(worker.done < len(worker.sent) for worker in workers):
        for number, worker in enumerate(workers):
            if worker.done < len(worker.sent):
                index = worker.sent[worker.done]
                worker.done += 1
                ran.setdefault(collection[index].split("::")[0], set()).add(number)
                scheduler.mark_test_complete(worker, index)  # type: ignore[arg-type]
    assert scheduler.tests_finished
    assert sorted(index for worker in workers for index in worker.sent) == list(
        range(len(collection))
    )
    assert all(len(where) == 1 for where in ran.values()), ran
    assert ran[files["shared_a"][0]] == ran[files["shared_b"][0]]
    first = [collection[worker.sent[0]].split("::")[0] for worker in workers]
    assert first == [files["heavy"][0], files["middle"][0]]
    assert scheduler.shared == {files["shared_a"][0], files["shared_b"][0]}
