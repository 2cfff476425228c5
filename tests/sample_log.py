"""A registered hook that writes down the samples each rank trains on, for the tests
that check which samples a resumed run reads.

Recipes reach it with ``trainer.imports: [tests.sample_log]`` and
``hooks.extra: [{name: record_samples, params: {path: FILE}}]``; rank ``r`` appends to
``FILE.rank<r>``.
"""

from __future__ import annotations

from pathlib import Path

from hookbus import Hook, RunEngine, register_hook


@register_hook("record_samples")
class RecordSamples(Hook):
    """Appends ``iteration index index ...`` (the data set indices of the batch) to
    ``<path>.rank<rank>`` at every train step.

    Fires on ``on_forward`` in train phases; reads ``rank``, ``iteration`` and the
    batch's ``"index"``; writes only its file.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def on_forward(self, engine: RunEngine) -> None:
        state = engine.state
        if not state.train:
            return
        indices = " ".join(str(int(i)) for i in state.batch["index"])
        with Path(f"{self.path}.rank{state.rank}").open("a") as log:
            log.write(f"{state.iteration} {indices}\n")


def global_batches(path: Path) -> dict[int, list[int]]:
    """``{iteration: sorted indices of every rank}`` of the files ``record_samples``
    wrote at ``path``; a repeated iteration (read twice) fails."""
    batches: dict[int, list[int]] = {}
    seen: set[tuple[str, int]] = set()
    for log in sorted(path.parent.glob(f"{path.name}.rank*")):
        for line in log.read_text().splitlines():
            iteration, *indices = (int(word) for word in line.split())
            assert (log.name, iteration) not in seen, f"{log.name} read {iteration} twice"
            seen.add((log.name, iteration))
            batches[iteration] = sorted([*batches.get(iteration, []), *indices])
    return batches
