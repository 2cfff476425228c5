"""Opens shard sets on each of torchrun's ranks (gloo) and writes down, for each set,
the shards this rank checked and the error it raised, for
tests/integration/test_shard_checks_split.py::

    torchrun --nproc_per_node=2 -m tests.integration.shard_check_job OUT SET...

Rank ``r`` writes ``OUT/rank<r>.json``: ``[{"checked": [shard file names], "error": the
DataError's line or null}, ...]``, one item a set, in order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

from hookbus.engine.errors import DataError
from hookbus.parts.data import shards
from hookbus.parts.data.shard_index import ShardEntry


def main(out: Path, sets: list[str]) -> None:
    dist.init_process_group("gloo")
    checked: list[str] = []
    check = shards.check_shard

    def recorded(path: Path, entry: ShardEntry, classes: list[str], *args: Any) -> None:
        checked.append(path.name)
        check(path, entry, classes, *args)

    shards.check_shard = recorded  # type: ignore[assignment]
    results = []
    for location in sets:
        checked.clear()
        try:
            shards.ShardDataset(location, None)
            error = None
        except DataError as exc:
            error = str(exc)
        results.append({"checked": list(checked), "error": error})
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
