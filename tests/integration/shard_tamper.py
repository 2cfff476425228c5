"""A registered hook that changes a shard set under a running run, for
tests/integration/test_bad_inputs_shards.py: ``trainer.imports:
[tests.integration.shard_tamper]`` and ``hooks.extra: [{name: garble_shards, params:
{folder: DIR, at: N}}]`` cut every shard of ``DIR`` to half its size after train
iteration ``N`` (counted from 1), as another program rewriting the set would."""

from __future__ import annotations

from pathlib import Path

from ignite.engine import Engine

from hookbus import Hook, register_hook


@register_hook("garble_shards")
class GarbleShards(Hook):
    """Cuts the shards of ``folder`` to half after train iteration ``at``.

    Fires on ``on_step``; reads ``train`` and ``iteration``; writes the shard files.
    """

    def __init__(self, folder: str, at: int) -> None:
        super().__init__()
        self.folder = Path(folder)
        self.at = at

    def on_step(self, engine: Engine) -> None:
        if engine.state.train and engine.state.iteration == self.at:
            for shard in sorted(self.folder.glob("*.mds")):
                shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
