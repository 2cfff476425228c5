"""NnclrSupportHook (NNCLR's support set) on the fake engine.

Two gloo ranks holding the support set of one process: tests/hooks/test_distributed_hooks.py.
"""

from __future__ import annotations

import pytest
import torch

from hookbus import FakeEngine
from hookbus.config import validate_config
from hookbus.hook_set import method_hooks
from hookbus.hooks.methods.nnclr_support import NnclrSupportHook


def rows(values: list[float]) -> torch.Tensor:
    """Rows ``[n, 2]`` with first coordinate ``values`` (unit length after normalising)."""
    return torch.tensor([[value, 0.0] for value in values])


def test_fills_in_order_then_overwrites_the_oldest() -> None:
    hook = NnclrSupportHook(size=4)
    hook.enqueue(rows([1, 2, 3]))
    assert (hook.buffer.filled, hook.buffer.position) == (3, 3)
    assert hook.support[:3, 0].tolist() == [1, 2, 3]
    hook.enqueue(rows([4, 5]))
    assert (hook.buffer.filled, hook.buffer.position) == (4, 1)
    assert hook.support[:, 0].tolist() == [5, 2, 3, 4]


def test_more_rows_than_the_size_keep_the_newest() -> None:
    hook = NnclrSupportHook(size=3)
    hook.enqueue(rows([1]))
    hook.enqueue(rows([2, 3, 4, 5, 6]))
    # Written from position 1 on; the next row written replaces the oldest, 4.
    assert hook.support[:, 0].tolist() == [6, 4, 5]
    assert (hook.buffer.filled, hook.buffer.position) == (3, 1)


def test_the_nearest_row_by_cosine_similarity() -> None:
    hook = NnclrSupportHook(size=4)
    # Row 2 is long but points away; cosine, not dot product, decides.
    support = torch.tensor([[1.0, 0.0], [0.6, 0.8], [-5.0, 0.1], [0.0, -1.0]])
    hook.enqueue(support)
    queries = torch.tensor([[3.0, 0.2], [1.0, 1.2], [-1.0, 0.0], [0.1, -2.0]])
    torch.testing.assert_close(hook.nearest(queries), support[[0, 1, 2, 3]])


def test_only_the_filled_rows_are_searched() -> None:
    hook = NnclrSupportHook(size=4)
    hook.enqueue(torch.tensor([[0.0, 1.0]]))
    # The three zero rows not yet written would be nearer to [0, -1] than row 0.
    torch.testing.assert_close(
        hook.nearest(torch.tensor([[0.0, -1.0]])), torch.tensor([[0.0, 1.0]])
    )


def test_an_empty_support_set_gives_each_embedding_itself() -> None:
    hook = NnclrSupportHook(size=4)
    neighbours = hook.nearest(torch.tensor([[3.0, 4.0]], requires_grad=True))
    torch.testing.assert_close(neighbours, torch.tensor([[0.6, 0.8]]))
    assert not neighbours.requires_grad


def test_writes_neighbours_then_queues_the_first_views_normalised_embeddings() -> None:
    hook = NnclrSupportHook(size=8)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    engine.state.last_output = {"embeddings": [rows([2, -3]), rows([-4, 5])]}
    engine.step()
    # Before the first step each embedding is its own neighbour.
    assert [view[:, 0].tolist() for view in engine.state.last_output["neighbours"]] == [
        [1, -1],
        [-1, 1],
    ]
    assert hook.support[: hook.buffer.filled, 0].tolist() == [1, -1]
    engine.state.last_output = {"embeddings": [rows([7]), rows([-7])]}
    engine.step()
    assert [view[:, 0].tolist() for view in engine.state.last_output["neighbours"]] == [[1], [-1]]
    assert hook.support[: hook.buffer.filled, 0].tolist() == [1, -1, 1]


def test_test_phases_read_the_support_set_but_never_write_it() -> None:
    hook = NnclrSupportHook(size=8)
    hook.enqueue(rows([1]))
    engine = FakeEngine(train=False)
    hook.attach(engine)
    engine.state.last_output = {"embeddings": [rows([-1]), rows([1])]}
    engine.step()
    assert hook.buffer.filled == 1
    assert [view[:, 0].tolist() for view in engine.state.last_output["neighbours"]] == [[1], [1]]


def test_state_round_trip_keeps_rows_position_and_fill() -> None:
    hook = NnclrSupportHook(size=4)
    hook.enqueue(rows([1, 2, 3]))
    hook.enqueue(rows([4, 5]))
    copy = NnclrSupportHook(size=4)
    copy.load_state_dict(hook.state_dict())
    assert torch.equal(copy.support, hook.support)
    saved, loaded = hook.buffer, copy.buffer
    assert (loaded.position, loaded.filled) == (saved.position, saved.filled) == (1, 4)


def test_an_empty_state_round_trips_to_an_empty_support_set() -> None:
    copy = NnclrSupportHook(size=4)
    copy.load_state_dict(NnclrSupportHook(size=4).state_dict())
    assert (copy.support, copy.buffer.position, copy.buffer.filled) == (None, 0, 0)


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="size must be at least 1"):
        NnclrSupportHook(size=0)


def test_loss_nnclr_adds_the_hook_with_the_configured_size() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "nnclr", "nnclr": {"queue_size": 77}},
            "model": {"predictor": {"dims": [64, 64]}, "head": {"dims": [128, 64]}},
        }
    )
    (hook,) = method_hooks(cfg)
    assert isinstance(hook, NnclrSupportHook)
    assert (hook.name, hook.size) == ("nnclr_support", 77)
