"""The train order of sharded data: MosaicML ``streaming``'s partition and shuffle."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
from streaming.base.partition import get_partitions
from streaming.base.shuffle import get_shuffle
from torch.utils.data import Sampler

PARTITION_ALGORITHM = "relaxed"
SHUFFLE_ALGORITHM = "py1e"
SHUFFLE_BLOCK_SIZE = 1 << 18
"""The library's defaults: shuffled within blocks of shards, so a node reads few shards."""


class ShardSampler(Sampler[int]):
    """The sample indices of this rank for one pass over the shards, in the order
    ``streaming`` gives them, with :class:`~hookbus.parts.data.sampler.PhaseSampler`'s
    interface (``set_epoch``, ``set_start``, ``drop_last``, ``len``).

    * Order: the library's shuffle of ``(seed, epoch)`` over ``canonical_nodes``
      groups of shards, split into global batches of ``batch_size x world_size``; rank
      ``r`` takes its ``batch_size`` samples of each. The global batches hold the same
      samples for any ``world_size`` that keeps ``batch_size x world_size``.
    * Length: every rank gets as many samples: ``size // world_size`` with
      ``drop_last``, else ``ceil(size / world_size)`` (the library repeats a few).
    * Resume: :meth:`set_start` ``n`` skips the ``n x world_size`` samples the ranks
      had taken (the library's ``drop_first``), in the next iteration only.
    """

    def __init__(
        self,
        shard_sizes: Sequence[int],
        *,
        shuffle: bool,
        seed: int,
        batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
        canonical_nodes: int = 1,
    ) -> None:
        self.shard_sizes = np.asarray(shard_sizes, dtype=np.int64)
        self.dataset_size = int(self.shard_sizes.sum())
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside [0, world_size={world_size})")
        if self.dataset_size < world_size:
            raise ValueError(f"{self.dataset_size} samples cannot give {world_size} ranks one")
        self.shuffle, self.seed, self.batch_size = shuffle, seed, batch_size
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        self.canonical_nodes = canonical_nodes
        per_rank = self.dataset_size / world_size
        self.num_samples = int(per_rank) if drop_last else math.ceil(per_rank)
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Shuffle the following iterations with ``epoch``'s order."""
        self.epoch = epoch

    def set_start(self, num_samples: int) -> None:
        """Skip the first ``num_samples`` of this rank's share (and as many of every other
        rank's), once: the next iteration starts there, the ones after from the start."""
        if not 0 <= num_samples <= self.num_samples:
            raise ValueError(f"start {num_samples} is outside [0, {self.num_samples}]")
        self.start = num_samples

    def rank_indices(self, drop_first: int = 0) -> list[int]:
        """This rank's share of the current epoch after the first ``drop_first`` samples
        of the global order, as the library partitions it."""
        ids = get_partitions(
            PARTITION_ALGORITHM,
            self.dataset_size,
            self.canonical_nodes,
            1,
            self.world_size,
            1,
            self.batch_size,
            drop_first,
        )[0, self.rank, 0].reshape(-1)
        if self.shuffle:
            order = get_shuffle(
                SHUFFLE_ALGORITHM,
                self.shard_sizes,
                self.canonical_nodes,
                self.seed,
                self.epoch,
                SHUFFLE_BLOCK_SIZE,
            )
            ids = np.where(ids != -1, order[ids], -1)
        kept = ids[ids != -1].tolist()
        return kept[: self.num_samples - drop_first // self.world_size]

    def __iter__(self) -> Iterator[int]:
        start, self.start = self.start, 0
        return iter(self.rank_indices(start * self.world_size))

    def __len__(self) -> int:
        return self.num_samples - self.start
