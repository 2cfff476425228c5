"""Collective losses on 2 gloo processes equal one process on the concatenated batch.

NT-Xent gathers negatives with gradients, Barlow Twins reduces its cross-correlation,
SwAV's Sinkhorn normalises over the global batch: with the data split over two ranks,
each must give the loss and gradients of one process holding the whole batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.dist_grad_worker import GLOBAL_BATCH, OUTPUT_KEY, global_embeddings, loss_of
from tests.torchrun import torchrun

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(OUTPUT_KEY))
def test_collective_loss_gradients_on_two_ranks_equal_one_process(
    tmp_path: Path, name: str
) -> None:
    torchrun(str(ROOT / "tests" / "dist_grad_worker.py"), str(tmp_path), name, timeout=180)

    views = [view.clone().requires_grad_(True) for view in global_embeddings()]
    loss = loss_of(name, views)
    loss.backward()
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    shard = GLOBAL_BATCH // 2
    # DDP averages gradients over ranks, so each rank's gradient, halved, must equal the
    # single-process gradient of its shard; the mean of the rank losses is the global loss.
    assert torch.allclose((ranks[0]["loss"] + ranks[1]["loss"]) / 2, loss.detach(), atol=1e-6)
    for view, expected in enumerate(views):
        for rank, saved in enumerate(ranks):
            local = saved["grads"][view] / 2
            assert torch.allclose(
                local, expected.grad[rank * shard : (rank + 1) * shard], atol=1e-6
            )
