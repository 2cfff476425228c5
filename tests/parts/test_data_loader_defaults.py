"""Loader defaults that keep the step fed: persistent workers, prefetch, pinned memory."""

from __future__ import annotations

import pytest
import torch

from hookbus import Config
from hookbus.config import validate_config
from hookbus.parts.data import build_data_loaders, set_loader_epoch
from hookbus.parts.data.build import pin_memory
from hookbus.parts.data.loader import SSLDataLoader
from hookbus.parts.data.shared import SharedInt


def _digits(**data: object) -> Config:
    return validate_config({"data": {"batch_size": 256, **data}}, "test config")


def _epoch_views(cfg: Config, epochs: int) -> list[list[torch.Tensor]]:
    loader = build_data_loaders(cfg)["train"]
    views = []
    for epoch in range(epochs):
        set_loader_epoch(loader, epoch)
        views.append([batch["views"][0] for batch in loader])
    return views


def test_workers_are_persistent_and_prefetch_as_configured() -> None:
    loaders = build_data_loaders(_digits(num_workers=2, prefetch_factor=3))
    assert all(loader.persistent_workers for loader in loaders.values())
    assert all(loader.prefetch_factor == 3 for loader in loaders.values())
    assert not build_data_loaders(_digits())["train"].persistent_workers


@pytest.mark.slow
def test_persistent_workers_see_each_new_epoch() -> None:
    in_process = _epoch_views(_digits(), epochs=2)
    in_workers = _epoch_views(_digits(num_workers=1), epochs=2)
    for mine, theirs in zip(in_process, in_workers, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    assert not torch.equal(in_workers[0][0], in_workers[1][0])


def test_pin_memory_auto_pins_only_for_a_cuda_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pin_memory(_digits()) is False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pin_memory(_digits()) is True
    cpu_run = validate_config({"machine": {"device": "cpu"}}, "test config")
    assert pin_memory(cpu_run) is False
    assert pin_memory(_digits(pin_memory=False)) is False
    assert pin_memory(_digits(pin_memory=True)) is True


def test_shared_int_is_per_instance_and_reads_back() -> None:
    class Holder:
        value = SharedInt()

        def __init__(self, value: int) -> None:
            self.value = value

    first, second = Holder(1), Holder(2)
    first.value = 7
    assert (first.value, second.value) == (7, 2)


def test_batches_made_in_process_use_one_torch_thread() -> None:
    seen: list[int] = []

    def collate(samples: list[int]) -> list[int]:
        seen.append(torch.get_num_threads())
        return samples

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        loader = SSLDataLoader(list(range(6)), batch_size=2, collate_fn=collate)
        assert [batch for batch in loader] == [[0, 1], [2, 3], [4, 5]]
        assert seen == [1, 1, 1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_the_run_loaders_are_ssl_data_loaders() -> None:
    loaders = build_data_loaders(_digits())
    assert all(isinstance(loader, SSLDataLoader) for loader in loaders.values())
