"""The config from ``hookbus train`` (and ``hookbus validate``) into the trainer is read
once and each of its checks runs once: counted by the calls of the checks' code."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from hookbus.cli import main
from hookbus.engine.checkpoint.run_lock import check_run_dir
from hookbus.engine.config.config_io import validate_config
from hookbus.engine.methods.entries import check_method, check_views
from hookbus.engine.process.distributed import check_device
from hookbus.parts.models.build import check_backbone_options
from hookbus.parts.models.compiled import check_compile
from hookbus.parts.sharding import check_strategy
from hookbus.parts.task import (
    check_component_names,
    check_labels_for_evaluation,
    check_options_are_read,
)

CHECKS: list[Callable[..., Any]] = [
    validate_config,
    check_method,
    check_views,
    check_component_names,
    check_options_are_read,
    check_backbone_options,
    check_compile,
    check_strategy,
    check_device,
    check_run_dir,
    check_labels_for_evaluation,
]
TINY = [
    "simclr_digits",
    "data.name=synthetic",
    "data.synthetic.train_size=32",
    "data.synthetic.test_size=16",
    "data.synthetic.channels=1",
    "data.batch_size=16",
    "optimizer.num_epochs=1",
    "optimizer.warmup_epochs=0",
    "meters.knn.k=3",
    "hooks.progress_bar.enabled=false",
    "hooks.evaluation_report.enabled=false",
    "hooks.summary_plot.enabled=false",
]


def calls_of_the_checks(argv: list[str]) -> Counter[str]:
    """Run ``hookbus ARGV`` in this process (exit status 0 asserted) and count the calls
    of each of :data:`CHECKS`, by name."""
    codes = {check.__code__: check.__name__ for check in CHECKS}
    calls: Counter[str] = Counter()

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            calls[codes[frame.f_code]] += 1

    sys.setprofile(count)
    try:
        status = main(argv)
    finally:
        sys.setprofile(None)
    assert status == 0
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "validate"])
def test_each_config_check_runs_once_on_the_way_into_the_trainer(
    command: str, tmp_path: Path
) -> None:
    calls = calls_of_the_checks([command, *TINY, f"checkpoint.dir={tmp_path / 'run'}"])
    assert calls == Counter({check.__name__: 1 for check in CHECKS})
