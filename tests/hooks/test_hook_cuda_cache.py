from __future__ import annotations

import pytest
import torch

from hookbus import HOOKS, Config, FakeEngine, Priority
from hookbus.hooks.cuda_cache import CudaCacheHook


@pytest.fixture
def cleared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    return calls


def iterations_cleared(engine: FakeEngine, cleared: list[int], steps: int, train: bool) -> list:
    at = []
    for _ in range(steps):
        before = len(cleared)
        engine.step(train=train)
        if len(cleared) > before:
            at.append(engine.state.iteration)
    return at


def test_registered_with_priority() -> None:
    assert HOOKS.get("cuda_cache") is CudaCacheHook
    assert CudaCacheHook(clear_freq=1).priority == Priority.LOW
    assert CudaCacheHook(clear_freq=1).name == "cuda_cache"


def test_from_section_uses_clear_freq() -> None:
    cfg = Config()
    cfg.model.cuda_cache.clear_freq = 25
    assert CudaCacheHook.from_section(cfg.model.cuda_cache).clear_freq == 25


def test_empties_cache_every_clear_freq_train_iterations(cleared: list[int]) -> None:
    engine = FakeEngine(device=torch.device("cuda"))
    CudaCacheHook(clear_freq=3).attach(engine)
    assert iterations_cleared(engine, cleared, 7, train=True) == [3, 6]


def test_never_in_test_phases(cleared: list[int]) -> None:
    engine = FakeEngine(device="cuda", iteration=3)
    CudaCacheHook(clear_freq=3).attach(engine)
    assert iterations_cleared(engine, cleared, 4, train=False) == []


def test_never_on_cpu(cleared: list[int]) -> None:
    engine = FakeEngine(device="cpu")
    CudaCacheHook(clear_freq=1).attach(engine)
    assert iterations_cleared(engine, cleared, 3, train=True) == []
