"""iBOT's and DINOv2's block-wise patch masks: their sizes, their shares of a batch, and
their draws from torch's checkpointed generator."""

from __future__ import annotations

import random

import pytest
import torch

from hookbus.engine.process import distributed
from hookbus.parts.models.ibot_masks import batch_masks, block_mask, draw_batch_masks


@pytest.mark.parametrize(("rows", "cols", "count"), [(14, 14, 58), (14, 14, 19), (4, 4, 6)])
def test_a_block_mask_holds_at_most_the_patches_asked_and_nearly_all(
    rows: int, cols: int, count: int
) -> None:
    rng = random.Random(0)
    sizes = [int(block_mask(rng, rows, cols, count).sum()) for _ in range(40)]
    assert max(sizes) <= count
    assert sum(sizes) / len(sizes) >= 0.75 * count


def test_a_block_mask_is_made_of_blocks_not_scattered_patches() -> None:
    rng = random.Random(1)
    for _ in range(20):
        mask = block_mask(rng, 14, 14, 40).view(14, 14)
        padded = torch.nn.functional.pad(mask.float(), (1, 1, 1, 1))
        neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
        # Rectangles of 4 patches or more; only the last few patches, when fewer than 4
        # are missing, may come as a lone patch.
        assert int((neighbours[mask] == 0).sum()) <= 3


def test_half_the_batch_is_masked_with_ratios_spread_over_the_range() -> None:
    masks = batch_masks(random.Random(0), 40, 14, 14, 0.5, (0.1, 0.5))
    counts = masks.sum(dim=1)
    assert masks.shape == (40, 196) and masks.dtype == torch.bool
    assert int((counts > 0).sum()) == 20
    masked = sorted(int(count) for count in counts if count)
    assert masked[0] <= int(196 * 0.12) and masked[-1] >= int(196 * 0.45)
    assert masked[-1] <= int(196 * 0.5)


@pytest.mark.parametrize(("probability", "masked"), [(0.0, 0), (1.0, 6), (0.5, 3)])
def test_the_share_of_masked_views_is_int_of_the_probability(
    probability: float, masked: int
) -> None:
    masks = batch_masks(random.Random(3), 6, 4, 4, probability, (0.3, 0.5))
    assert int((masks.sum(dim=1) > 0).sum()) == masked


def test_masks_are_drawn_from_torchs_generator_and_advance_it() -> None:
    torch.manual_seed(5)
    first = draw_batch_masks(16, 4, 4, 0.5, (0.1, 0.5), "cpu")
    after = torch.rand(1)
    torch.manual_seed(5)
    again = draw_batch_masks(16, 4, 4, 0.5, (0.1, 0.5), "cpu")
    assert torch.equal(first, again)
    assert torch.equal(torch.rand(1), after)  # the same draws consumed
    torch.manual_seed(6)
    assert not torch.equal(draw_batch_masks(16, 4, 4, 0.5, (0.1, 0.5), "cpu"), first)


def test_each_rank_draws_its_own_masks_from_the_same_generator_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(7)
    rank0 = draw_batch_masks(16, 4, 4, 0.5, (0.1, 0.5), "cpu")
    monkeypatch.setattr(distributed, "rank", lambda: 1)
    torch.manual_seed(7)
    rank1 = draw_batch_masks(16, 4, 4, 0.5, (0.1, 0.5), "cpu")
    assert not torch.equal(rank0, rank1)
