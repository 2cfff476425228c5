"""On several ranks a local shard set is checked once per machine, not once per rank:
each rank checks its share of the shards before the first step, and a bad shard, found
by the one rank that checks it, is the same one line on every rank."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hookbus.parts.data.shard_index import read_index
from tests.torchrun import torchrun


@pytest.mark.slow
def test_two_ranks_check_each_shard_once_and_both_report_the_bad_one(
    shards: Path, tmp_path: Path
) -> None:
    names = [Path(entry.basename).name for entry in read_index(shards / "index.json")]
    assert len(names) >= 3
    bad = tmp_path / "bad"
    shutil.copytree(shards, bad)
    garbled = bad / names[1]  # the second shard: rank 1's share on a machine of 2 ranks
    data = bytearray(garbled.read_bytes())
    data[len(data) // 2] ^= 0xFF
    garbled.write_bytes(bytes(data))

    torchrun("-m", "tests.integration.shard_check_job", str(tmp_path), str(shards), str(bad))
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]

    clean = [rank[0] for rank in ranks]
    assert [result["error"] for result in clean] == [None, None]
    assert sorted(clean[0]["checked"] + clean[1]["checked"]) == sorted(names)
    assert not set(clean[0]["checked"]) & set(clean[1]["checked"])

    damaged = [rank[1] for rank in ranks]
    assert names[1] not in damaged[0]["checked"] and names[1] in damaged[1]["checked"]
    line = f"shard {garbled} does not match its sha256 in index.json: corrupt"
    assert [result["error"] for result in damaged] == [line, line]
