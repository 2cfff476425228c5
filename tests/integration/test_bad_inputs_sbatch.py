"""``hookbus sbatch``'s rows of the bad-input table: each class of input it reads (the
recipe's path and file, the overrides, the options) and writes (the script on standard
output), and what comes of it. No planted name runs a command: the script is parsed by
``bash -n`` and run with ``srun`` and ``scontrol`` stubbed on ``PATH``, and the stub
``srun`` must receive the recipe and overrides exactly as given."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hookbus.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECIPE_TEXT = (ROOT / "configs" / "simclr_digits.yaml").read_text()
OPTIONS = ["--nodes=1", "--gpus-per-node=0", "--time=00:10:00"]


@dataclass(frozen=True)
class Row:
    """One row: the class of input, the recipe's file name (None: the shipped recipe),
    the overrides, the options, and the outcome: the exit status and a piece of the one
    error line (empty for a script)."""

    kind: str
    name: str | None
    overrides: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    status: int = 0
    says: str = ""


PLANTED = [
    "quote's.yaml",
    'double"quote.yaml',
    "$(touch PLANTED_DOLLAR).yaml",
    "`touch PLANTED_BACKTICK`.yaml",
    "semi;touch PLANTED_SEMI.yaml",
    "glob*[a].yaml",
    "-rf --help.yaml",
    "space and \\backslash.yaml",
]
"""Recipe file names that a script would run as commands, split or expand if it wrote
them unquoted: each is accepted, quoted, and reaches srun unchanged."""

ROWS = [
    *(Row("shell metacharacters in the recipe's name", name) for name in PLANTED),
    Row(
        "shell metacharacters in an override",
        None,
        ("checkpoint.dir=runs/$(touch PLANTED_OVERRIDE)`touch PLANTED_TICK`;x'\"",),
    ),
    Row("newline in the recipe's name", "a\ntouch PLANTED_NEWLINE.yaml", status=2, says="'\\n'"),
    Row("carriage return in the recipe's name", "a\rb.yaml", status=2, says="'\\r'"),
    Row("escape in the recipe's name", "a\x1b[2Jb.yaml", status=2, says="'\\x1b'"),
    Row(
        "newline in an override",
        None,
        ("checkpoint.dir=runs/a\ntouch PLANTED_NEWLINE_OVERRIDE",),
        status=2,
        says="the override",
    ),
    Row("tab in an override", None, ("checkpoint.dir=runs/a\tb",), status=2, says="'\\t'"),
    Row("newline in the time limit", None, options=("--time=00:10:00\nid",), status=2),
    Row("newline in the job name", None, options=("--job-name=a\nid",), status=2),
    Row("newline in the partition", None, options=("--partition=cpu\nid",), status=2),
    Row("missing recipe", "absent.yaml", status=2, says="absent.yaml"),
    Row("empty recipe: the defaults, as validate takes it", "empty.yaml"),
    Row("garbled recipe", "garbled.yaml", status=2),
    Row("directory in place of the recipe", "folder.yaml", status=2),
    Row("no GPUs: a CPU-only script", None, options=("--gpus-per-node=0",)),
    Row("negative GPUs", None, options=("--gpus-per-node=-2",), status=2, says="--gpus-per-node"),
    Row("huge node count", None, options=("--nodes=99999999999999999999",)),
]


def _recipe(tmp_path: Path, name: str | None) -> str:
    """The recipe argument of a row: a file named ``name`` in ``tmp_path`` (made as the
    row's class says), or the shipped recipe's name."""
    if name is None:
        return "simclr_digits"
    path = tmp_path / name
    if name == "empty.yaml":
        path.write_text("")
    elif name == "garbled.yaml":
        path.write_bytes(b"\x00\xff\xfe: [\n")
    elif name == "folder.yaml":
        path.mkdir()
    elif name != "absent.yaml":
        path.write_text(RECIPE_TEXT)
    return str(path)


def _sbatch(
    capsys: pytest.CaptureFixture[str], row: Row, recipe: str
) -> tuple[int, str, list[str]]:
    status = main(["sbatch", *OPTIONS, *row.options, recipe, *row.overrides])
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


STUB_SRUN = """#!/bin/bash
# Records its arguments, one per NUL-terminated entry, and runs nothing.
printf '%s\\0' "$@" > "$SRUN_ARGS"
"""


def _run_with_stubs(script: Path, tmp_path: Path) -> list[str]:
    """Run ``script`` with bash, ``srun`` and ``scontrol`` stubbed; srun's arguments."""
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name, text in (("srun", STUB_SRUN), ("scontrol", "#!/bin/bash\n")):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    record = tmp_path / "srun_args"
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "SRUN_ARGS": str(record)}
    done = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return record.read_bytes().decode().split("\0")[:-1]


def row_id(row: Row) -> str:
    return f"{row.kind}: {row.name!r} {row.overrides} {row.options}"[:90]


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_sbatch_row(row: Row, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    recipe = _recipe(work, row.name)
    status, script, errors = _sbatch(capsys, row, recipe)
    assert status == row.status, errors
    if status:
        assert len(errors) == 1, errors
        assert errors[0].startswith("hookbus sbatch: error: ")
        assert row.says in errors[0]
        assert script == ""
        return
    assert errors == []
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    parsed = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert (parsed.returncode, parsed.stderr) == (0, "")
    assert _run_with_stubs(path, work) == ["hookbus", "train", recipe, *row.overrides]
    assert sorted(entry.name for entry in work.iterdir() if "PLANTED" in entry.name) == sorted(
        name for name in PLANTED if "PLANTED" in name and (work / name).exists()
    )  # the planted recipe files themselves, and no file a planted command made


@pytest.mark.slow
def test_a_script_to_a_full_device_is_one_line_and_status_1() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "hookbus", "sbatch", *OPTIONS, "simclr_digits"],
            cwd=ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "hookbus sbatch: error: cannot write standard output: No space left on device"
    ]
