"""The bad-input campaign: every input of tests/bad_inputs.py through `hookbus validate`,
the named ones and a sample of the others through `hookbus train`, in one process.

    .venv/bin/python benchmarks/bad_inputs.py

Prints, per kind of input, how many there were, how many were refused cleanly (exit 2,
one line on stderr naming the key or file, nothing written into the run directory),
the slowest one, and the growth of the process's peak memory over the whole campaign.
Exits 1 when any input was not refused cleanly, and lists those.
"""

from __future__ import annotations

import collections
import random
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import machine, markdown_table, quiet_training_log
from tests.bad_inputs import FILES, NAMED, all_inputs, run_case

TRAIN_SAMPLE = 60
"""Generated inputs sent through `hookbus train` too, drawn with a fixed seed."""


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    quiet_training_log()
    cases = all_inputs()
    generated = cases[len(NAMED) + len(FILES) :]
    train_cases = [*NAMED, *FILES, *random.Random(0).sample(generated, TRAIN_SAMPLE)]
    runs = [("validate", case) for case in cases] + [("train", case) for case in train_cases]
    rows: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0, 0.0, 0])
    failures = []
    start_rss = peak_rss_mb()
    with tempfile.TemporaryDirectory() as workdir:
        for index, (command, case) in enumerate(runs):
            outcome = run_case(case, Path(workdir) / f"case{index}", command)
            row = rows[(command, case.kind)]
            row[0] += 1
            row[1] += outcome.refused_cleanly(case)
            row[2] = max(row[2], outcome.seconds)
            row[3] += outcome.wrote
            if not outcome.refused_cleanly(case):
                failures.append((command, case, outcome))
    growth = peak_rss_mb() - start_rss
    print(f"bad_inputs: {len(cases)} inputs through validate, {len(train_cases)} through train")
    print(f"{machine()}; peak memory grew {growth:.0f} MB over the campaign")
    table = [
        [command, kind, str(n), str(clean), f"{slowest:.2f}", str(wrote)]
        for (command, kind), (n, clean, slowest, wrote) in sorted(rows.items())
    ]
    total = sum(row[0] for row in rows.values())
    clean = sum(row[1] for row in rows.values())
    table.append(
        ["all", "", str(total), str(clean), f"{max(r[2] for r in rows.values()):.2f}", "0"]
    )
    print(
        markdown_table(
            ["command", "kind", "inputs", "refused cleanly", "slowest s", "wrote"], table
        )
    )
    for command, case, outcome in failures:
        print(f"NOT CLEAN: {command} {case.overrides or case.recipe!r}: {outcome}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
