"""Top-k classification accuracy of the model's logits (linear evaluation)."""

from __future__ import annotations

from hookbus.parts.meters.base import Meter


class AccuracyMeter(Meter):
    """Top-k accuracy of ``output["logits"]`` ``[B, C]`` against ``batch["label"]``.

    A sample counts for top-k when its label is among its ``k`` highest logits (all of
    them when ``C < k``). Values: ``{"top1": ..., "top5": ...}`` for ``topk=(1, 5)``
    (NaN before any update). Active in train and test phases.
    """

    name = "accuracy"
    phases = ("train", "test")

    def __init__(self, topk: tuple[int, ...] = (1, 5)) -> None:
        if not topk or min(topk) < 1:
            raise ValueError(f"topk needs positive values, got {topk}")
        self.topk = tuple(sorted(set(topk)))
        self.count_names = ("total", *(f"top{k}" for k in self.topk))
        self.value_names = tuple(f"top{k}" for k in self.topk)
        super().__init__()

    def update(self, output: dict, batch: dict) -> None:
        """Count the samples whose label is in their top-k logits, for each k; a sample
        with a negative label (the padding of a sharded test split) is not counted."""
        logits = output["logits"].detach()
        labels = batch["label"].to(logits.device)
        ranked = logits.topk(min(max(self.topk), logits.shape[1]), dim=1).indices
        hits = ranked == labels[:, None]
        for k in self.topk:
            self.add(f"top{k}", hits[:, :k].any(dim=1).sum())
        self.add("total", (labels >= 0).sum())

    def value(self) -> dict[str, float]:
        """``{"top<k>": accuracy}`` for each k."""
        total = float(self.counts["total"])
        return {
            f"top{k}": float(self.counts[f"top{k}"]) / total if total else float("nan")
            for k in self.topk
        }
