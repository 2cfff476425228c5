"""Helpers of the loss tests: small random float64 inputs, value/gradient comparison, and
cases run on two gloo ranks, all in one ``torchrun`` launch.

Run by that launch as ``python tests/loss_reference.py OUT MODULE:FUNCTION...``: each rank
runs every named case and saves what it returns to ``OUT/<index>_rank<rank>.pt``.
"""

from __future__ import annotations

import gc
import importlib
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


def tensors(count: int, rows: int = 6, cols: int = 5, seed: int = 0) -> list[torch.Tensor]:
    """``count`` random float64 ``[rows, cols]`` tensors that require gradients."""
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(rows, cols, generator=generator, dtype=torch.float64).requires_grad_()
        for _ in range(count)
    ]


def unit(vector: torch.Tensor) -> torch.Tensor:
    """``vector`` divided by its Euclidean length, written out."""
    return vector / torch.sqrt(sum(value * value for value in vector))


def log_softmax_entry(logits: list[torch.Tensor], index: int) -> torch.Tensor:
    """``log(exp(logits[index]) / sum_j exp(logits[j]))`` from scalar terms."""
    return logits[index] - torch.log(sum(torch.exp(value) for value in logits))


def assert_same_value_and_gradients(
    ours: torch.Tensor, reference: torch.Tensor, inputs: list[torch.Tensor], tol: float = 1e-6
) -> None:
    """Equal values, and equal gradients with respect to every input."""
    ours_grads = torch.autograd.grad(ours, inputs, allow_unused=True)
    ref_grads = torch.autograd.grad(reference, inputs, allow_unused=True)
    assert math.isclose(float(ours.detach()), float(reference.detach()), rel_tol=tol, abs_tol=tol)
    for got, want in zip(ours_grads, ref_grads, strict=True):
        if want is None:
            assert got is None or torch.count_nonzero(got) == 0
        else:
            torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol)


TWO_RANKS = 2
"""The processes every two-rank case runs on (gloo, on loopback)."""

RankCase = Callable[[], dict[str, Any]]
"""A function run on every rank inside an initialised gloo group; it returns tensors
(in dicts and lists) to compare in the test process."""

_CASES: dict[str, RankCase] = {}
_RESULTS: dict[str, list[dict[str, Any]]] = {}
_FAILURE: list[str] = []


def on_two_ranks(case: RankCase) -> RankCase:
    """Register a module-level ``case`` to run on two gloo ranks (see :func:`two_rank_results`)."""
    if "." in case.__qualname__:
        raise ValueError(f"{case.__qualname__}: a two-rank case must be a module-level function")
    _CASES[f"{case.__module__}:{case.__qualname__}"] = case
    return case


def two_rank_results(case: RankCase) -> list[dict[str, Any]]:
    """What ``case`` returned on rank 0 and on rank 1.

    The first call launches ONE ``torchrun`` with every case registered so far (pytest
    imports the test modules, and so registers their cases, before any test runs), each
    rank running them in turn; later calls read the saved results. A failed launch fails
    every case's test with its stderr.
    """
    from tests.torchrun import torchrun

    if not _RESULTS and not _FAILURE:
        names = list(_CASES)
        with tempfile.TemporaryDirectory() as folder:
            try:
                torchrun(__file__, folder, *names, processes=TWO_RANKS, timeout=300)
            except AssertionError as exc:
                _FAILURE.append(str(exc))
            else:
                for index, name in enumerate(names):
                    _RESULTS[name] = [
                        torch.load(Path(folder) / f"{index}_rank{rank}.pt", weights_only=True)
                        for rank in range(TWO_RANKS)
                    ]
    if _FAILURE:
        raise AssertionError(f"the two-rank launch failed: {_FAILURE[0]}")
    return _RESULTS[f"{case.__module__}:{case.__qualname__}"]


def shard(tensor: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Rank ``rank``'s rows of a global batch ``tensor`` split in ``world`` equal shards."""
    size = len(tensor) // world
    return tensor[rank * size : (rank + 1) * size]


@dataclass(frozen=True)
class ShardedLoss:
    """A loss whose distributed code path is checked: two ranks, each holding its shard
    of a global batch, against one process holding the whole batch.

    ``loss`` maps a model output (``{key: [per-view tensor [B, D]]}``) to the loss;
    ``batch`` gives the global batch's output, the same on every rank; the gradients of
    the outputs under ``grad_keys`` are compared; ``reference`` (default: ``loss``) gives
    the one-process value the ranks must match.
    """

    loss: Callable[[dict[str, list[torch.Tensor]]], torch.Tensor]
    batch: Callable[[], dict[str, list[torch.Tensor]]]
    grad_keys: tuple[str, ...]
    reference: Callable[[dict[str, list[torch.Tensor]]], torch.Tensor] | None = None

    def outputs(self, rank: int = 0, world: int = 1) -> dict[str, list[torch.Tensor]]:
        """Rank ``rank``'s shard of the batch (the whole batch for ``world`` 1), the
        outputs under ``grad_keys`` requiring gradients."""
        return {
            key: [
                shard(view, rank, world).detach().clone().requires_grad_(key in self.grad_keys)
                for view in views
            ]
            for key, views in self.batch().items()
        }

    def on_rank(self) -> dict[str, Any]:
        """Under torchrun: this rank's loss on its shard, and the gradients of the shard."""
        outputs = self.outputs(dist.get_rank(), dist.get_world_size())
        loss = self.loss(outputs)
        loss.backward()
        grads = {key: [view.grad for view in outputs[key]] for key in self.grad_keys}
        return {"loss": loss.detach(), "grads": grads}

    def assert_ranks_match_one_process(
        self, ranks: list[dict[str, Any]], *, atol: float = 1e-6, rtol: float = 1e-5
    ) -> None:
        """The mean of the ranks' losses is the one-process loss of the whole batch, a
        shard alone gives another loss (the ranks did use each other's rows), and each
        rank's gradient over the number of ranks (DDP's mean) is the one-process
        gradient of its rows."""
        world = len(ranks)
        whole = self.outputs()
        expected = (self.reference or self.loss)(whole)
        keyed = [(key, view) for key in self.grad_keys for view in range(len(whole[key]))]
        wanted = torch.autograd.grad(expected, [whole[key][view] for key, view in keyed])
        mean = sum(saved["loss"] for saved in ranks) / world
        torch.testing.assert_close(mean, expected.detach().to(mean.dtype), atol=atol, rtol=rtol)
        alone = self.loss(self.outputs(0, world)).detach()
        assert not torch.allclose(alone, ranks[0]["loss"], atol=1e-3)
        for (key, view), want in zip(keyed, wanted, strict=True):
            for rank, saved in enumerate(ranks):
                got = saved["grads"][key][view]
                mine = shard(want, rank, world).to(got.dtype)
                torch.testing.assert_close(got / world, mine, atol=atol, rtol=rtol)


def _run_cases(out: Path, names: list[str]) -> None:
    """The torchrun side of :func:`two_rank_results`: every case on this rank."""
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for index, name in enumerate(names):
        module, function = name.split(":")
        result = getattr(importlib.import_module(module), function)()
        torch.save(result, out / f"{index}_rank{rank}.pt")
    # Free what the cases left holding the group's tensors and works while the
    # interpreter is whole: a gloo thread that lets go of a tensor while the interpreter
    # tears down aborts the process ("terminate called without an active exception")
    # after every case has passed.
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    _run_cases(Path(sys.argv[1]), sys.argv[2:])
