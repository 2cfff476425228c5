"""ViewCollate, PhaseSampler and the loaders built from the config."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from hookbus import Config
from hookbus.engine.config import AugmentConfig
from hookbus.parts.data import (
    BatchAugment,
    PhaseSampler,
    TensorImageDataset,
    ViewCollate,
    build_data_loaders,
    set_loader_epoch,
)


def dataset(size: int = 40) -> TensorImageDataset:
    images = torch.randn(size, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    return TensorImageDataset(images, torch.arange(size) % 4)


def samples(indices: list[int]) -> list:
    data = dataset()
    return [data[i] for i in indices]


def collate(**options: object) -> ViewCollate:
    return ViewCollate(BatchAugment(AugmentConfig()), 3, seed=7, **options)


def test_train_batch_has_views_labels_and_indices() -> None:
    batch = collate()(samples([4, 9, 2]))
    assert set(batch) == {"views", "label", "index"}
    assert len(batch["views"]) == 3
    assert all(view.shape == (3, 1, 8, 8) for view in batch["views"])
    assert batch["label"].tolist() == [0, 1, 2]
    assert batch["index"].tolist() == [4, 9, 2]
    assert batch["label"].dtype == batch["index"].dtype == torch.long


def test_test_batch_adds_the_clean_images() -> None:
    batch = collate(with_image=True)(samples([4, 9]))
    assert set(batch) == {"views", "image", "label", "index"}
    assert torch.equal(batch["image"], dataset().images[[4, 9]])


def test_memory_batch_has_clean_images_and_no_views() -> None:
    batch = ViewCollate(None, 2, seed=7, with_views=False, with_image=True)(samples([1, 2]))
    assert set(batch) == {"image", "label", "index"}
    assert torch.equal(batch["image"], dataset().images[[1, 2]])


def test_views_of_a_batch_differ_from_each_other() -> None:
    views = collate()(samples([0, 1, 2, 3]))["views"]
    assert (views[0] - views[1]).abs().mean() > 0.1


def test_a_batch_gets_the_same_views_whoever_collates_it_and_when() -> None:
    first = collate()
    first(samples([5, 6]))  # another batch before: no effect on the next one
    alone = first(samples([0, 1, 2]))["views"]
    again = collate()(samples([0, 1, 2]))["views"]
    assert all(torch.equal(a, b) for a, b in zip(alone, again, strict=True))


def test_set_epoch_changes_the_views_reproducibly() -> None:
    collate_fn = collate()
    epoch0 = collate_fn(samples([0, 1]))["views"][0]
    collate_fn.set_epoch(1)
    epoch1 = collate_fn(samples([0, 1]))["views"][0]
    collate_fn.set_epoch(0)
    assert not torch.allclose(epoch0, epoch1)
    assert torch.equal(collate_fn(samples([0, 1]))["views"][0], epoch0)


def test_views_need_an_augment() -> None:
    with pytest.raises(ValueError, match="augment"):
        ViewCollate(None, 2, seed=0)


@pytest.mark.slow
def test_worker_processes_make_the_same_batches() -> None:
    def loader(workers: int) -> DataLoader:
        sampler = PhaseSampler(40, shuffle=True, seed=3)
        result = DataLoader(
            dataset(), batch_size=8, sampler=sampler, collate_fn=collate(), num_workers=workers
        )
        set_loader_epoch(result, 2)
        return result

    in_process = list(loader(0))
    in_workers = list(loader(2))
    assert len(in_process) == len(in_workers) == 5
    for a, b in zip(in_process, in_workers, strict=True):
        assert torch.equal(a["index"], b["index"])
        assert all(torch.equal(x, y) for x, y in zip(a["views"], b["views"], strict=True))


def test_unshuffled_sampler_gives_the_data_set_order() -> None:
    assert list(PhaseSampler(7, shuffle=False, seed=0)) == list(range(7))


def test_shuffled_order_is_a_permutation_fixed_by_seed_and_epoch() -> None:
    sampler = PhaseSampler(50, shuffle=True, seed=1)
    epoch0 = list(sampler)
    assert sorted(epoch0) == list(range(50))
    assert epoch0 != list(range(50))
    assert list(PhaseSampler(50, shuffle=True, seed=1)) == epoch0
    assert list(PhaseSampler(50, shuffle=True, seed=2)) != epoch0
    sampler.set_epoch(1)
    epoch1 = list(sampler)
    assert epoch1 != epoch0
    sampler.set_epoch(1)
    assert list(sampler) == epoch1


def test_shards_are_disjoint_and_cover_the_data_set() -> None:
    shards = [list(PhaseSampler(12, shuffle=True, seed=0, rank=r, world_size=3)) for r in range(3)]
    assert [len(shard) for shard in shards] == [4, 4, 4]
    assert sorted(index for shard in shards for index in shard) == list(range(12))


def test_shards_are_padded_by_wrap_around_without_drop_last() -> None:
    order = list(PhaseSampler(10, shuffle=True, seed=0))
    samplers = [PhaseSampler(10, shuffle=True, seed=0, rank=r, world_size=4) for r in range(4)]
    shards = [list(sampler) for sampler in samplers]
    assert [len(sampler) for sampler in samplers] == [3, 3, 3, 3]
    interleaved = [shards[r][i] for i in range(3) for r in range(4)]
    assert interleaved == order + order[:2]


def test_shards_are_truncated_with_drop_last() -> None:
    order = list(PhaseSampler(10, shuffle=True, seed=0))
    shards = [
        list(PhaseSampler(10, shuffle=True, seed=0, rank=r, world_size=4, drop_last=True))
        for r in range(4)
    ]
    interleaved = [shards[r][i] for i in range(2) for r in range(4)]
    assert interleaved == order[:8]


def test_set_start_skips_exactly_once() -> None:
    sampler = PhaseSampler(20, shuffle=True, seed=0, rank=1, world_size=2)
    full = list(sampler)
    sampler.set_start(4)
    assert len(sampler) == 6
    assert list(sampler) == full[4:]
    assert len(sampler) == 10
    assert list(sampler) == full


def test_set_start_rejects_more_than_the_share() -> None:
    sampler = PhaseSampler(20, shuffle=False, seed=0, world_size=2)
    with pytest.raises(ValueError, match="outside"):
        sampler.set_start(11)


def test_resumed_loader_reproduces_the_rest_of_the_epoch() -> None:
    def loader() -> DataLoader:
        sampler = PhaseSampler(40, shuffle=True, seed=3, drop_last=True)
        return DataLoader(dataset(), batch_size=8, sampler=sampler, collate_fn=collate())

    original = loader()
    set_loader_epoch(original, 5)
    batches = list(original)
    resumed = loader()
    set_loader_epoch(resumed, 5)
    resumed.sampler.set_start(2 * 8)
    assert len(resumed) == 3
    rest = list(resumed)
    assert len(rest) == 3
    for a, b in zip(batches[2:], rest, strict=True):
        assert torch.equal(a["index"], b["index"])
        assert all(torch.equal(x, y) for x, y in zip(a["views"], b["views"], strict=True))


@pytest.fixture(scope="module")
def loaders() -> dict[str, DataLoader]:
    cfg = Config.model_validate({"data": {"batch_size": 100, "test_batch_size": 64}})
    return build_data_loaders(cfg, rank=1, world_size=2)


def test_train_loader_is_shuffled_sharded_and_drops_the_last_batch(loaders: dict) -> None:
    train = loaders["train"]
    assert (train.sampler.shuffle, train.sampler.rank, train.sampler.world_size) == (True, 1, 2)
    assert len(train.sampler) == 648  # 1297 // 2
    assert len(train) == 6
    batch = next(iter(train))
    assert set(batch) == {"views", "label", "index"}
    assert [view.shape for view in batch["views"]] == [(100, 1, 16, 16)] * 2


def test_test_loader_is_ordered_sharded_and_keeps_every_image(loaders: dict) -> None:
    test = loaders["test"]
    assert test.sampler.shuffle is False
    assert len(test.sampler) == 250
    assert len(test) == 4
    batch = next(iter(test))
    assert set(batch) == {"views", "image", "label", "index"}
    assert batch["index"][:3].tolist() == [1, 3, 5]


def test_memory_loader_gives_every_rank_the_whole_train_split(loaders: dict) -> None:
    memory = loaders["memory"]
    indices = torch.cat([batch["index"] for batch in memory])
    assert indices.tolist() == list(range(1297))
    assert set(next(iter(memory))) == {"image", "label", "index"}


def test_set_loader_epoch_reaches_sampler_and_collate(loaders: dict) -> None:
    set_loader_epoch(loaders["train"], 4)
    assert loaders["train"].sampler.epoch == 4
    assert loaders["train"].collate_fn.epoch == 4
