"""Helpers of the loss tests: small random float64 inputs and value/gradient comparison."""

from __future__ import annotations

import math

import torch


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
