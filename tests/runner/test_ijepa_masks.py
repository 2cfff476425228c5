"""I-JEPA's multi-block masks, made in the collate: counts, scales, aspect ratios, no
context patch among the targets, the same masks for the same batch, and settings that
leave no context refused when the loaders are built."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hookbus.cli import main
from hookbus.config import load_config
from hookbus.engine.errors import ConfigError
from hookbus.parts.data.build import collates
from hookbus.parts.data.ijepa_masks import (
    BlockMaskCollate,
    BlockMaskSettings,
    batch_masks,
    block_settings,
    block_size,
    check_drawable,
    place_block,
)
from hookbus.parts.models.patch_grid import patch_grid

PAPER = BlockMaskSettings()
GRID = (14, 14)  # ViT-x/16 at 224 px


def rows_and_columns(indices: torch.Tensor, width: int) -> tuple[set[int], set[int]]:
    return {int(i) // width for i in indices}, {int(i) % width for i in indices}


def draws(count: int, settings: BlockMaskSettings = PAPER, batch: int = 4):
    for seed in range(count):
        yield batch_masks(torch.Generator().manual_seed(seed), batch, GRID, settings)


def test_each_image_gets_m_target_blocks_of_one_size_and_a_context() -> None:
    context, targets = batch_masks(torch.Generator().manual_seed(0), 5, GRID, PAPER)
    assert targets.shape[:2] == (5, 4)
    assert context.shape[0] == 5 and context.shape[1] >= PAPER.min_context
    assert context.dtype == targets.dtype == torch.long


def test_every_target_block_is_a_full_rectangle_of_the_batchs_size() -> None:
    for _, targets in draws(20):
        sizes = set()
        for block in targets.flatten(0, 1):
            rows, columns = rows_and_columns(block, GRID[1])
            assert len(rows) * len(columns) == len(block)  # a full rectangle
            assert rows == set(range(min(rows), max(rows) + 1))
            assert columns == set(range(min(columns), max(columns) + 1))
            sizes.add((len(rows), len(columns)))
        assert len(sizes) == 1


def test_no_context_patch_is_a_target_patch() -> None:
    for context, targets in draws(30):
        for image in range(len(context)):
            assert not set(context[image].tolist()) & set(targets[image].flatten().tolist())


def test_target_blocks_follow_the_papers_scale_and_aspect_ratio() -> None:
    areas, ratios = [], []
    for seed in range(300):
        h, w = block_size(torch.Generator().manual_seed(seed), GRID, (0.15, 0.2), (0.75, 1.5))
        areas.append(h * w / (GRID[0] * GRID[1]))
        ratios.append(h / w)
    # Whole patches: a block of int(s * 196) patches rounds its sides to integers.
    assert min(areas) >= 0.13 and max(areas) <= 0.23
    assert min(ratios) >= 0.6 and max(ratios) <= 1.7
    assert min(ratios) < 0.9 and max(ratios) > 1.3  # the whole range is drawn
    assert sum(areas) / len(areas) == pytest.approx(0.175, abs=0.015)


@pytest.mark.parametrize("seed", range(5))
def test_a_block_size_is_the_formula_of_one_uniform_draw(seed: int) -> None:
    u = torch.rand(1, generator=torch.Generator().manual_seed(seed)).item()
    patches = int((0.15 + u * 0.05) * 196)
    ratio = 0.75 + u * 0.75
    expected = (round(math.sqrt(patches * ratio)), round(math.sqrt(patches / ratio)))
    drawn = block_size(torch.Generator().manual_seed(seed), GRID, (0.15, 0.2), (0.75, 1.5))
    assert drawn == expected


def test_the_context_block_is_square_and_never_spans_the_grid() -> None:
    # The authors' bound: a block is at most one patch short of the grid's side.
    for seed in range(50):
        size = block_size(torch.Generator().manual_seed(seed), GRID, (0.85, 1.0), (1.0, 1.0))
        assert size == (13, 13)
    assert block_size(torch.Generator().manual_seed(0), (4, 4), (1.0, 1.0), (1.0, 1.0)) == (3, 3)


def test_target_blocks_reach_every_row_and_column() -> None:
    seen = set()
    for _, targets in draws(40):
        seen |= set(targets.flatten().tolist())
    assert seen == set(range(GRID[0] * GRID[1]))


def test_contexts_are_cut_to_the_batchs_smallest_keeping_their_first_patches() -> None:
    generator = torch.Generator().manual_seed(7)
    context, _ = batch_masks(generator, 6, GRID, PAPER)
    for row in context:
        assert row.tolist() == sorted(set(row.tolist()))  # ascending, no repeats


def test_settings_that_leave_no_context_are_refused_with_the_keys_to_change() -> None:
    crowded = BlockMaskSettings(targets=8, target_scale=(0.5, 0.5), min_context=20)
    with pytest.raises(ValueError, match="loss.ijepa.min_context_patches=20"):
        batch_masks(torch.Generator().manual_seed(0), 2, (4, 4), crowded)


class FakeViews:
    """A collate stand-in: its batch holds the first sample's index and its epoch."""

    def __init__(self) -> None:
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __call__(self, samples: list) -> dict:
        return {"epoch": self.epoch}


def samples(first: int, count: int = 4) -> list:
    return [(torch.zeros(1), 0, first + offset) for offset in range(count)]


def test_the_same_batch_gets_the_same_masks_in_any_process_and_order() -> None:
    one = BlockMaskCollate(FakeViews(), GRID, PAPER, seed=3)
    two = BlockMaskCollate(FakeViews(), GRID, PAPER, seed=3)
    two(samples(0))  # another batch first: the masks do not run on a stream
    a, b = one(samples(8)), two(samples(8))
    assert torch.equal(a["context_keep"], b["context_keep"])
    assert torch.equal(a["target_keep"], b["target_keep"])


def test_the_masks_change_with_the_epoch_the_seed_and_the_batch() -> None:
    collate = BlockMaskCollate(FakeViews(), GRID, PAPER, seed=3)
    first = collate(samples(0))["target_keep"]
    assert not torch.equal(first, collate(samples(4))["target_keep"])
    assert not torch.equal(
        first, BlockMaskCollate(FakeViews(), GRID, PAPER, seed=4)(samples(0))["target_keep"]
    )
    collate.set_epoch(1)
    batch = collate(samples(0))
    assert batch["epoch"] == 1  # the views' collate has the epoch too
    assert not torch.equal(first, batch["target_keep"])


def test_a_grid_too_small_for_blocks_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2x2"):
        BlockMaskCollate(FakeViews(), (1, 1), PAPER, seed=0)


AUTHORS = BlockMaskSettings(placement="authors")


def test_the_authors_placement_never_touches_the_last_row_or_column() -> None:
    rows, columns, context_rows = set(), set(), set()
    for context, targets in draws(60, AUTHORS):
        for block in targets.flatten(0, 1):
            block_rows, block_columns = rows_and_columns(block, GRID[1])
            rows |= block_rows
            columns |= block_columns
        context_rows |= rows_and_columns(context.flatten(), GRID[1])[0]
    assert rows == columns == set(range(GRID[0] - 1))  # every row but the last
    assert GRID[0] - 1 not in context_rows


def test_the_authors_placement_draws_the_corner_from_zero_to_side_minus_size() -> None:
    generator = torch.Generator().manual_seed(0)
    tops = set()
    for _ in range(400):
        block = place_block(generator, (8, 8), (3, 2), "authors")
        tops.add(int(block.any(dim=1).nonzero()[0]))
        assert int(block.sum()) == 6
    assert tops == set(range(8 - 3))  # 0 .. 4: torch.randint(0, H - h)


RECIPES = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("recipe", ["ijepa_digits_vit_tiny", "ijepa_imagefolder_vit_s16"])
def test_the_shipped_recipes_masks_are_drawable_at_setup(recipe: str) -> None:
    cfg = load_config(RECIPES / f"{recipe}.yaml")
    check_drawable(patch_grid(cfg), block_settings(cfg))  # no error


def test_a_recipe_on_a_grid_too_small_for_its_blocks_is_refused_when_loaders_are_built() -> None:
    # 8 px in 2 px patches: a 4x4 grid, whose largest context (3x3) cannot keep the
    # recipe's 10 context patches.
    cfg = load_config(RECIPES / "ijepa_digits_vit_tiny.yaml", ["data.image_size=8"])
    assert patch_grid(cfg) == (4, 4)
    with pytest.raises(ConfigError, match=r"^loss\.ijepa: masks cannot be drawn: .*4x4 grid"):
        collates(cfg)


@pytest.mark.slow
def test_hookbus_validate_refuses_it_in_one_line_with_exit_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = RECIPES / "ijepa_digits_vit_tiny.yaml"
    assert main(["validate", str(recipe), "data.image_size=8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "loss.ijepa.min_context_patches=10" in err and "4x4 grid" in err


def test_a_grid_under_2x2_is_refused_as_a_config_error() -> None:
    with pytest.raises(ConfigError, match="at least 2x2.*1x1"):
        check_drawable((1, 1), PAPER)
