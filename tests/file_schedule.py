"""How ``make test`` hands the suite to its pytest-xdist workers (``--dist loadgroup``).

tests/conftest.py returns :class:`FileScheduling` from ``pytest_xdist_make_scheduler``.
It keeps each test file on one worker, so a module fixture's training or ``torchrun``
launch happens once, and every file that calls :func:`tests.loss_reference.two_rank_results`
on one worker, so their shared two-rank launch happens once. It hands the files out
heaviest first (:data:`SECONDS`), so that the longest ones do not start last and leave one
worker running alone at the end; a worker takes its next file when it has two tests left.

The grouping is done here, in the controller, from the test ids alone: xdist's own
``xdist_group`` marker names the group by appending it to the test id, which pytest 9.2's
structured test ids no longer allow, and xdist then ran every test as a group of its own
(module fixtures set up on both workers, the heavy files anywhere in the queue).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

SHARED_LAUNCH = "two_ranks"
"""The group of the files whose tests read the one shared two-rank launch."""

SECONDS: dict[str, float] = {
    "tests/integration/test_kill_resume.py": 491,
    "tests/runner/test_compose_smoke.py": 307,
    "tests/integration/test_launcher.py": 166,
    "tests/runner/test_bad_input_table.py": 140,
    "tests/integration/test_multi_node.py": 128,
    "tests/integration/test_distributed.py": 91,
    "tests/integration/test_kills_mid_write.py": 80,
    "tests/integration/test_fsdp_methods.py": 75,
    "tests/integration/test_distillation_distributed.py": 70,
    "tests/integration/test_fsdp.py": 69,
    "tests/integration/test_shards.py": 67,
    "tests/integration/test_layers.py": 55,
    "tests/integration/test_end_of_run.py": 54,
    "tests/integration/test_benchmarks.py": 54,
    "tests/integration/test_python_parts.py": 53,
    "tests/integration/test_wheel.py": 52,
    "tests/integration/test_unreadable_inputs.py": 51,
    "tests/runner/test_recipes.py": 45,
    "tests/runner/test_embed_bad_inputs.py": 43,
    "tests/integration/test_preemption.py": 43,
    "tests/integration/test_shards_s3.py": 41,
    "tests/runner/test_timm_masked.py": 41,
    "tests/integration/test_ctrl_c.py": 39,
    "tests/integration/test_photos_end_to_end.py": 33,
    "tests/integration/test_srun.py": 32,
    "tests/integration/test_import_paths.py": 31,
    "tests/integration/test_eval_distributed.py": 28,
    "tests/integration/test_bad_inputs_sharded_ckpt.py": 28,
    "tests/runner/test_ignite_engine.py": 28,
    "tests/integration/test_bad_inputs_shards.py": 27,
    "tests/runner/test_ijepa_recipes.py": 26,
    "tests/integration/test_shard_checks_split.py": 23,
    "tests/hooks/test_distributed_hooks.py": 20,
    "tests/runner/test_ignite_habits.py": 19,
    "tests/runner/test_loader_worker_errors.py": 18,
    "tests/runner/test_hook_mlflow.py": 17,
    "tests/runner/test_compose.py": 17,
    "tests/runner/test_bad_inputs_image_folders.py": 17,
}
"""The seconds each file's tests took in a full run of ``make test``'s pytest (two
workers, 6 December 2026, other jobs at a load average of 5 to 7: about twice an idle
machine's), for the files of 15 s or more; tests/integration/test_typing_contract.py is
left out (its mypy took 190 s on a cold cache, where ``make test``'s own mypy run leaves
the cache warm: about 13 s). A file not named here comes after these, the files with
more tests first. Only the order depends on these figures: a stale or missing one can
make the run longer, never wrong."""


def shared_launch_files(tests: Path) -> frozenset[str]:
    """The test files under ``tests`` (as test ids name them) that call ``two_rank_results``."""
    root = tests.parent
    return frozenset(
        path.relative_to(root).as_posix()
        for path in tests.rglob("test_*.py")
        if "two_rank_results(" in path.read_text(encoding="utf-8")
    )


class FileScheduling(LoadScopeScheduling):
    """Each test file is one unit of work (the files of the shared two-rank launch one
    together, a test marked ``xdist_group`` where xdist can name it in its group), handed
    out heaviest first."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.shared = shared_launch_files(config.rootpath / "tests")

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):
            return nodeid.rsplit("@", 1)[-1]
        path = nodeid.split("::", 1)[0]
        return SHARED_LAUNCH if path in self.shared else path

    def _weight(self, scope: str, size: int) -> tuple[float, int]:
        paths = self.shared if scope == SHARED_LAUNCH else (scope,)
        return (-sum(SECONDS.get(path, 0.0) for path in paths), -size)

    def schedule(self) -> None:
        """As xdist's own, but with the units in the order of :meth:`_weight`."""
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._reschedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return
        units: dict[str, dict[str, bool]] = {}
        for nodeid in self.collection:
            units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        for scope in sorted(units, key=lambda scope: self._weight(scope, len(units[scope]))):
            self.workqueue[scope] = units[scope]
        for _ in range(max(0, len(self.nodes) - len(self.workqueue))):
            unused, _assigned = self.assigned_work.popitem()
            unused.shutdown()
        for node in self.nodes:
            self._assign_work_unit(node)
        for node in self.nodes:
            self._reschedule(node)
        if not self.workqueue:
            for node in self.nodes:
                node.shutdown()
