"""Fine-tuning on the digits: from a SimCLR checkpoint vs from random init.

    .venv/bin/python benchmarks/fine_tune_digits.py
    .venv/bin/python benchmarks/fine_tune_digits.py --checkpoint runs/x/checkpoint.torch

Trains the SimCLR digits recipe (unless ``--checkpoint`` names one), then runs
``configs/fine_tune_digits.yaml`` twice, from that checkpoint and with
``model.fine_tune.checkpoint=null`` (the same backbone at random init), and prints the
top-1 accuracy of the fine-tuned classifier on the held-out split at every test phase
(every 5 epochs), its top-5 and the kNN top-1 of the fine-tuned backbone at the last
one (from ``metrics.json``), and the wall time of each run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.linear_eval_digits import parse_args, runs_from_both_starts


def held_out_phases(run_dir: Path) -> list[tuple[int, dict]]:
    """Each test phase in ``run_dir/metrics.json`` with the train epochs done before it."""
    rows = [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]
    return [
        (sum(row["train"] for row in rows[:index]), row)
        for index, row in enumerate(rows)
        if not row["train"]
    ]


def main() -> int:
    args = parse_args(__doc__, "fine_tune_digits_bench")
    header = None
    runs = runs_from_both_starts("fine_tune_digits.yaml", "model.fine_tune.checkpoint", args)
    for name, run_dir, seconds in runs:
        phases = held_out_phases(run_dir)
        if header is None:
            epochs = " / ".join(str(epoch) for epoch, _ in phases)
            header = f"| backbone at the start | top-1 after {epochs} epochs | top-5 | kNN top-1 |"
            print(f"{header} seconds |\n|---|---|---|---|---|")
        last = phases[-1][1]
        top1 = " / ".join(f"{row['top1']:.4f}" for _, row in phases)
        print(
            f"| {name} | {top1} | {last['top5']:.4f} | {last['knn_top1']:.4f} | {seconds:.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
