"""Method hooks with state on 2 gloo processes equal one process on the whole batch.

The MoCo key queue, the SwAV queue and the NNCLR support set gather every rank's
embeddings, the DINO center averages the teacher scores of every rank: with the batch
split over two ranks, each rank must end with the state of one process that saw the
whole batch.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.dist_hook_worker import QUEUE, hook_states
from tests.torchrun import torchrun

ROOT = Path(__file__).resolve().parents[1]


def test_queues_and_center_on_two_ranks_equal_one_process(tmp_path: Path) -> None:
    torchrun(str(ROOT / "tests" / "dist_hook_worker.py"), str(tmp_path), timeout=180)

    expected = hook_states(rank=0, world=1)
    assert expected["key_queue"]["filled"] == QUEUE
    assert expected["swav_queue"]["filled"] == QUEUE
    # 3 steps of the first view's 4 rows into 10: full, the write position wrapped.
    assert (expected["nnclr_support"]["filled"], expected["nnclr_support"]["position"]) == (10, 2)
    assert expected["dino_centering"]["center"].abs().sum() > 0
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        for name, state in expected.items():
            assert got[name].keys() == state.keys(), name
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    assert torch.allclose(got[name][key], value, atol=1e-6), (rank, name, key)
                else:
                    assert got[name][key] == value, (rank, name, key)
