"""The running center of the teacher's masked-patch scores (iBOT): its EMA over the
masked patches of every rank, on one process and on two gloo ranks with uneven counts."""

from __future__ import annotations

import torch
import torch.distributed as dist

from hookbus import FakeEngine, SSLEvents
from hookbus.hooks.methods.patch_centering import PatchCenteringHook
from tests.loss_reference import on_two_ranks, two_rank_results

DIM = 3
ROWS = [[5, 2], [0, 0], [1, 6]]
"""Masked patches of rank 0 and rank 1 at each step: uneven, and none at all in step 2."""


def patch_scores(step: int) -> list[torch.Tensor]:
    """Each rank's teacher patch scores at ``step``, the same on every process."""
    generator = torch.Generator().manual_seed(step)
    return [torch.randn(rows, DIM, generator=generator) for rows in ROWS[step]]


def centers(rank: int, world: int, momentum: float = 0.5) -> list[torch.Tensor]:
    """The center after each step, the process holding rank ``rank``'s patches (all of
    them for ``world`` 1)."""
    hook = PatchCenteringHook(center_momentum=momentum)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    seen = []
    for step in range(len(ROWS)):
        shares = patch_scores(step)
        mine = shares[rank] if world > 1 else torch.cat(shares)
        engine.state.last_output = {"teacher_patch_scores": mine}
        engine.fire_event(SSLEvents.ON_FORWARD)
        engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
        seen.append(hook.center.clone())
    return seen


def test_the_center_is_an_ema_of_the_mean_masked_patch_score() -> None:
    got = centers(0, 1, momentum=0.5)
    first = torch.cat(patch_scores(0)).mean(dim=0) * 0.5
    torch.testing.assert_close(got[0], first)
    torch.testing.assert_close(got[1], first)  # no masked patch anywhere: it stays
    third = first * 0.5 + torch.cat(patch_scores(2)).mean(dim=0) * 0.5
    torch.testing.assert_close(got[2], third)


def test_the_loss_reads_the_center_from_the_output() -> None:
    hook = PatchCenteringHook()
    engine = FakeEngine(train=True)
    hook.attach(engine)
    engine.state.last_output = {"teacher_patch_scores": torch.ones(4, DIM)}
    engine.fire_event(SSLEvents.ON_FORWARD)
    assert torch.equal(engine.state.last_output["teacher_patch_center"], torch.zeros(DIM))


def test_a_test_phase_leaves_the_center() -> None:
    hook = PatchCenteringHook()
    engine = FakeEngine(train=False)
    hook.attach(engine)
    engine.state.last_output = {"teacher_patch_scores": torch.ones(4, DIM)}
    engine.fire_event(SSLEvents.ON_FORWARD)
    engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
    assert torch.equal(hook.center, torch.zeros(DIM))


def test_the_center_round_trips_through_its_state() -> None:
    hook, again = PatchCenteringHook(), PatchCenteringHook()
    assert hook.state_dict()["center"].numel() == 0
    hook.center = torch.arange(3.0)
    again.load_state_dict(hook.state_dict())
    assert torch.equal(again.center, torch.arange(3.0))


@on_two_ranks
def patch_centers_on_each_rank() -> dict:
    return {"centers": centers(dist.get_rank(), dist.get_world_size())}


def test_two_gloo_ranks_with_uneven_masked_patches_equal_one_process() -> None:
    expected = centers(0, 1)
    for saved in two_rank_results(patch_centers_on_each_rank):
        for got, want in zip(saved["centers"], expected, strict=True):
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
