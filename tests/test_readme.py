"""The README's Python examples run as written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    named = {}
    for block in blocks:
        if "class PrintLossEvery" in block:
            named["hook"] = block
        elif "def test_prints_every_second_iteration" in block:
            named["test"] = block
        elif "EarlyStopping" in block:
            named["ignite"] = block
        elif "SSLTrainer(" in block:
            named["api"] = block
    assert set(named) == {"hook", "test", "api", "ignite"}
    return named


def test_readme_hook_and_its_unit_test(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _python_blocks()
    namespace: dict[str, Any] = {}
    exec(blocks["hook"], namespace)
    exec(blocks["test"], namespace)
    namespace["test_prints_every_second_iteration"](capsys)


def test_readme_api_example_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "simclr_digits.yaml", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    namespace: dict[str, Any] = {}
    exec(blocks["hook"], namespace)
    exec(blocks["api"], namespace)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['meter_sync', 'ignite EPOCH_COMPLETED', 'log', 'checkpoint']"
    assert out[1].startswith("10 ")  # 2 epochs of 5 steps
    assert (tmp_path / "runs" / "simclr_digits" / "checkpoint.torch").exists()


def test_readme_ignite_example_records_the_running_average(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hookbus import load_config

    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "simclr_digits.yaml", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(_python_blocks()["api"].split("cfg = ")[0], namespace)
    namespace["cfg"] = load_config(
        "configs/simclr_digits.yaml",
        [
            "optimizer.num_epochs=2",
            "checkpoint.dir=runs/ignite",
            "hooks.evaluation_report.enabled=false",
        ],
    )
    exec(_python_blocks()["ignite"], namespace)
    lines = (tmp_path / "runs" / "ignite" / "metrics.json").read_text().splitlines()
    assert sum('"avg"' in line for line in lines) == 2  # the two train phases
