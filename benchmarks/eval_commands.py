"""``hookbus eval`` as the benchmark scripts run it: the trained encoder of a run, and the
encoder the run started from (random init), each scored by the command a user types.

    trained = evaluate_run(run_dir)                     # the run's own splits
    initial = evaluate_initial(run_dir, out_dir)        # the same model at random init
    knn_top1(trained), probe_top1(trained)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

KNN_AND_PROBE = ["--k", "20", "--no-low-shot", "--no-retrieval", "--last-blocks", "0"]
"""The parts the tables read: kNN top-1 at k=20 (weighted vote) and the linear probe."""


def hookbus_eval(source: Path, *arguments: str, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``hookbus eval SOURCE ARGUMENTS... --k 20 ...`` (:data:`KNN_AND_PROBE`) in a
    process of its own and return the ``eval.json`` it wrote (in ``--out`` when the
    arguments give one, else in the run directory); a failure stops the script with the
    command's last error lines."""
    command = [sys.executable, "-m", "hookbus", "eval", str(source), *arguments, *KNN_AND_PROBE]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr[-2000:]}")
    out = Path(arguments[arguments.index("--out") + 1]) if "--out" in arguments else source
    return cast(dict[str, Any], json.loads((out / "eval.json").read_text()))


def save_initial(run_dir: Path, path: Path) -> None:
    """Save the backbone the run at ``run_dir`` started from (its config's model built
    after ``torch.manual_seed(trainer.seed)``, as the run and its evaluation report build
    it) to ``path``, as ``hookbus export`` writes a backbone."""
    from hookbus.config import load_config
    from hookbus.parts.models import build_model

    cfg = load_config(run_dir / "config.yaml")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.trainer.seed)
        model = build_model(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(cast(nn.Module, model.backbone).state_dict(), path)


def evaluate_run(run_dir: Path, *data: str) -> dict[str, Any]:
    """``hookbus eval RUN_DIR [DATA]``: the trained encoder (results in the run directory)."""
    return hookbus_eval(run_dir, *data)


def evaluate_initial(run_dir: Path, out: Path, *data: str) -> dict[str, Any]:
    """``hookbus eval`` of the run's encoder at random init (:func:`save_initial` into
    ``out``, the run's ``config.yaml`` as its recipe, results in ``out``)."""
    save_initial(run_dir, out / "backbone.pt")
    recipe = str(run_dir / "config.yaml")
    return hookbus_eval(out / "backbone.pt", *data, "--recipe", recipe, "--out", str(out))


def knn_top1(results: dict[str, Any]) -> float:
    """kNN top-1 at k=20 of ``hookbus eval``'s results."""
    return float(results["knn"]["backbone"]["20"])


def probe_top1(results: dict[str, Any]) -> float:
    """The linear probe's top-1 of ``hookbus eval``'s results."""
    return float(results["linear"]["backbone"]["top1"])
