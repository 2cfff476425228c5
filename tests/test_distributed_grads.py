"""Collective losses on 2 gloo processes equal one process on the concatenated batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from engine.losses.nt_xent import NTXentLoss
from tests.dist_grad_worker import GLOBAL_BATCH, global_embeddings

ROOT = Path(__file__).resolve().parents[1]


def test_nt_xent_gradients_on_two_ranks_equal_one_process(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(ROOT / "tests" / "dist_grad_worker.py"),
        str(tmp_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]

    views = [view.clone().requires_grad_(True) for view in global_embeddings()]
    loss = NTXentLoss(temperature=0.5)({"embeddings": views}, {})
    loss.backward()
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    shard = GLOBAL_BATCH // 2
    # DDP averages gradients over ranks: the mean of the rank losses is the global loss.
    assert torch.allclose((ranks[0]["loss"] + ranks[1]["loss"]) / 2, loss.detach(), atol=1e-6)
    for view, expected in enumerate(views):
        for rank, saved in enumerate(ranks):
            local = saved["grads"][view] / 2
            assert torch.allclose(
                local, expected.grad[rank * shard : (rank + 1) * shard], atol=1e-6
            )
