"""The index sampler of a phase: shuffled per epoch, sharded across ranks, resumable."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from hookbus.parts.data.seeding import mix_seed


class PhaseSampler(Sampler[int]):
    """Indices ``0 .. dataset_size - 1`` for this rank, for one pass over the data.

    * Order: ``0, 1, 2, ...`` or, when ``shuffle``, a permutation drawn from a
      ``torch.Generator`` seeded from ``(seed, epoch)`` (see :meth:`set_epoch`); every
      rank draws the same permutation.
    * Sharding: rank ``r`` takes positions ``r, r + world_size, ...`` of that order,
      so every rank gets the same number of indices. Without ``drop_last`` the order
      is first padded by wrapping around to a multiple of ``world_size`` (a few
      indices repeat); with ``drop_last`` it is truncated instead (a few are left out).
    * Resume: :meth:`set_start` skips the first indices of this rank's share in the
      next iteration only.
    """

    def __init__(
        self,
        dataset_size: int,
        *,
        shuffle: bool,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
    ) -> None:
        if dataset_size < 1:
            raise ValueError(f"dataset_size must be positive, got {dataset_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside [0, world_size={world_size})")
        self.dataset_size = dataset_size
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.drop_last = drop_last
        if drop_last:
            self.num_samples = dataset_size // world_size
        else:
            self.num_samples = math.ceil(dataset_size / world_size)
        if self.num_samples == 0:
            raise ValueError(
                f"{dataset_size} samples cannot give each of {world_size} ranks one with drop_last"
            )
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Shuffle the following iterations with ``epoch``'s permutation."""
        self.epoch = epoch

    def set_start(self, num_samples: int) -> None:
        """Skip the first ``num_samples`` indices of this rank's share, once.

        The skip applies to the next iteration and is used up when that iteration
        begins (``iter(sampler)``; inside a DataLoader, when the first batch is
        requested); the ones after it start from the beginning again. Until then,
        ``len(sampler)`` counts only the indices left. To resume after ``n`` batches,
        skip ``n * batch_size`` samples.
        """
        if not 0 <= num_samples <= self.num_samples:
            raise ValueError(f"start {num_samples} is outside [0, {self.num_samples}]")
        self.start = num_samples

    def _rank_indices(self) -> list[int]:
        """This rank's whole share for the current epoch, skip not applied."""
        if self.shuffle:
            generator = torch.Generator().manual_seed(mix_seed(self.seed, self.epoch))
            order = torch.randperm(self.dataset_size, generator=generator)
        else:
            order = torch.arange(self.dataset_size)
        total = self.num_samples * self.world_size
        order = order.repeat(math.ceil(total / self.dataset_size))[:total]
        return order[self.rank :: self.world_size].tolist()

    def __iter__(self) -> Iterator[int]:
        start, self.start = self.start, 0
        return iter(self._rank_indices()[start:])

    def __len__(self) -> int:
        return self.num_samples - self.start
