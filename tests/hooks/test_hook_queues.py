"""KeyQueueHook (MoCo) and SwavQueueHook on the fake engine."""

from __future__ import annotations

import torch

from hookbus import FakeEngine
from hookbus.hooks.methods.key_queue import KeyQueueHook
from hookbus.hooks.methods.swav_queue import SwavQueueHook
from tests.method_parts import small_model


def keys(values: list[float]) -> torch.Tensor:
    """Keys ``[n, 2]`` with first coordinate ``values`` (unit length after normalising)."""
    return torch.tensor([[value, 0.0] for value in values])


def test_key_queue_keeps_the_newest_keys_and_wraps_around() -> None:
    queue = KeyQueueHook(size=4)
    queue.enqueue(keys([1, 2, 3]))
    queue.enqueue(keys([4, 5]))
    assert queue.buffer.filled == 4
    assert queue.buffer.position == 1
    assert queue.keys[:, 0].tolist() == [5, 2, 3, 4]
    queue.enqueue(keys([6, 7, 8, 9, 10]))
    assert sorted(queue.keys[:, 0].tolist()) == [7, 8, 9, 10]


def test_key_queue_writes_its_keys_then_queues_normalised_teacher_keys() -> None:
    hook = KeyQueueHook(size=8)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    engine.state.last_output = {"teacher_embeddings": [keys([2, 3]), keys([-4, 5])]}
    engine.step()
    assert "queue" not in engine.state.last_output
    assert hook.keys[: hook.buffer.filled, 0].tolist() == [1, 1, -1, 1]
    engine.state.last_output = {"teacher_embeddings": [keys([2]), keys([2])]}
    engine.step()
    assert engine.state.last_output["queue"][:, 0].tolist() == [1, 1, -1, 1]
    assert hook.buffer.filled == 6


def test_key_queue_is_left_alone_in_test_phases() -> None:
    hook = KeyQueueHook(size=8)
    engine = FakeEngine(train=False)
    hook.attach(engine)
    engine.state.last_output = {"teacher_embeddings": [keys([1]), keys([1])]}
    engine.step()
    assert hook.buffer.filled == 0


def test_key_queue_state_round_trip() -> None:
    hook = KeyQueueHook(size=4)
    hook.enqueue(keys([1, 2, 3, 4, 5]))
    copy = KeyQueueHook(size=4)
    copy.load_state_dict(hook.state_dict())
    assert torch.equal(copy.keys, hook.keys)
    assert (copy.buffer.position, copy.buffer.filled) == (hook.buffer.position, hook.buffer.filled)


def swav_engine(epoch: int) -> FakeEngine:
    return FakeEngine(train=True, train_phase_idx=epoch, base_model=small_model(prototypes=3))


def test_swav_queue_waits_for_its_start_epoch() -> None:
    hook = SwavQueueHook(4, start_epoch=1, assign_views=2)
    engine = swav_engine(epoch=0)
    hook.attach(engine)
    hook.on_start(engine)
    engine.state.last_output = {
        "embeddings": [torch.ones(2, 4), torch.ones(2, 4), torch.ones(2, 4)]
    }
    engine.step()
    assert hook.buffer.filled == 0


def test_swav_queue_fills_newest_first_then_scores_with_the_prototypes() -> None:
    hook = SwavQueueHook(4, start_epoch=0, assign_views=2)
    engine = swav_engine(epoch=0)
    hook.attach(engine)
    hook.on_start(engine)
    for step in range(2):
        first = torch.full((2, 4), float(step + 1))
        engine.state.last_output = {"embeddings": [first, -first, first]}
        engine.step()
        assert "queue_scores" not in engine.state.last_output  # not full before this step
    assert hook.buffer.filled == 4
    assert hook.queue.shape == (2, 4, 4)
    torch.testing.assert_close(hook.queue[0, 0], torch.full((4,), 0.5))
    torch.testing.assert_close(hook.queue[1, 0], torch.full((4,), -0.5))
    engine.state.last_output = {"embeddings": [torch.ones(2, 4)] * 2}
    hook.on_forward(engine)
    prototypes = engine.state.base_model.prototypes
    expected = prototypes(hook.queue[0]).detach()
    torch.testing.assert_close(engine.state.last_output["queue_scores"][0], expected)


def test_swav_queue_state_round_trip() -> None:
    hook = SwavQueueHook(2, assign_views=1)
    engine = swav_engine(epoch=0)
    hook.attach(engine)
    engine.state.last_output = {"embeddings": [torch.randn(3, 4), torch.randn(3, 4)]}
    engine.step()
    copy = SwavQueueHook(2, assign_views=1)
    copy.load_state_dict(hook.state_dict())
    assert torch.equal(copy.queue, hook.queue)
    assert copy.buffer.filled == hook.buffer.filled == 2


def test_a_swav_queue_loaded_from_its_state_goes_on_as_the_saved_one() -> None:
    saved, loaded = SwavQueueHook(5, assign_views=1), SwavQueueHook(5, assign_views=1)
    engine = swav_engine(epoch=0)
    saved.attach(engine)
    generator = torch.Generator().manual_seed(0)
    batches = [[torch.randn(2, 4, generator=generator)] for _ in range(6)]
    for batch in batches[:2]:  # 4 of 5 rows: not yet full
        engine.state.last_output = {"embeddings": batch}
        engine.step()
    loaded.load_state_dict(saved.state_dict())
    other = swav_engine(epoch=0)
    loaded.attach(other)
    for batch in batches[2:]:  # fills, then wraps around twice
        for hook_engine in (engine, other):
            hook_engine.state.last_output = {"embeddings": batch}
            hook_engine.step()
        assert torch.equal(loaded.queue, saved.queue)
        assert loaded.buffer.filled == saved.buffer.filled
    newest = torch.nn.functional.normalize(batches[-1][0], dim=1)
    torch.testing.assert_close(saved.queue[0, :2], newest)  # the last step first, in order
