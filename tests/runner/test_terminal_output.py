"""On a terminal, log lines and progress bars never share a line: one bar per phase, below
the phase's log lines.

The byte stream a terminal receives is replayed on a small screen model (a carriage
return goes back to the first column, text overwrites, ``ESC[K`` erases to the end of
the line, ``ESC[nA`` moves up), and the lines it leaves are what a user sees.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from tqdm import tqdm

from hookbus.console import ConsoleHandler
from tests.tiny_data import TINY

ROOT = Path(__file__).resolve().parents[2]
CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
BAR = re.compile(r"\d+%\|")
LOG = re.compile(r"\d\d:\d\d:\d\d (run|phase|epoch|resum|learning)")


def screen(text: str) -> list[str]:
    """The lines a terminal shows after receiving ``text``, trailing blanks removed."""
    rows: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(text):
        escape = CSI.match(text, i)
        if escape:
            count = int(escape.group(1) or 1) if escape.group(1).isdigit() else 1
            if escape.group(2) == "K":
                del rows[row][col:]
            elif escape.group(2) == "A":
                row = max(row - count, 0)
            i = escape.end()
            continue
        char = text[i]
        if char == "\r":
            col = 0
        elif char == "\n":
            row += 1
            col = 0
            if row == len(rows):
                rows.append([])
        else:
            line = rows[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
        i += 1
    return ["".join(line).rstrip() for line in rows]


def test_the_screen_model_overwrites_after_a_carriage_return() -> None:
    assert screen("abcdef\rxy\n12\x1b[K\r1\x1b[K\n") == ["xycdef", "1", ""]


def test_a_console_line_clears_the_bar_and_the_bar_is_redrawn_below_it() -> None:
    stream = io.StringIO()
    handler = ConsoleHandler(stream, "a test stream")
    handler.setFormatter(logging.Formatter("%(message)s"))
    bar = tqdm(total=2, desc="epoch 1/1", file=stream, ncols=60, mininterval=0)
    bar.update(1)
    handler.emit(logging.makeLogRecord({"msg": "phase 1/1 train | epoch 1/1 | iter 1/2"}))
    bar.update(1)
    bar.close()
    lines = [line for line in screen(stream.getvalue()) if line]
    assert lines[0] == "phase 1/1 train | epoch 1/1 | iter 1/2"
    assert len(lines) == 2 and lines[1].startswith("epoch 1/1: 100%|")


def run_in_a_terminal(args: list[str]) -> tuple[int, str]:
    """Run ``args`` with a pseudo-terminal of 120 columns as stdin, stdout and stderr;
    returns the exit status and everything it wrote."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "120"}
    process = subprocess.Popen(args, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    received = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child side closed
            break
        if not chunk:
            break
        received += chunk
    os.close(main)
    return process.wait(timeout=120), received.decode("utf-8", "replace")


@pytest.mark.slow
def test_hookbus_train_on_a_terminal_keeps_bars_and_log_lines_apart(tmp_path: Path) -> None:
    status, received = run_in_a_terminal(
        [
            sys.executable,
            "-m",
            "hookbus",
            "train",
            str(ROOT / "configs" / "simclr_digits.yaml"),
            "trainer.imports=[tests.tiny_data]",
            f"data.name={TINY}",
            "data.image_size=8",
            "data.batch_size=8",
            "data.test_batch_size=8",
            "meters.knn.k=3",
            "optimizer.num_epochs=2",
            "machine.num_threads=1",
            "optimizer.warmup_epochs=0",
            "trainer.log_frequency=1",
            "trainer.test_every_num_epochs=1",
            "hooks.evaluation_report.enabled=false",
            "hooks.summary_plot.enabled=false",
            "hooks.tensorboard.enabled=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ]
    )
    assert status == 0, received
    lines = screen(received)
    glued = [line for line in lines if BAR.search(line) and LOG.search(line)]
    assert glued == []
    bars = [line.split(":")[0] for line in lines if BAR.search(line)]
    assert bars == ["epoch 1/2", "test after epoch 1/2", "epoch 2/2", "test after epoch 2/2"]
    assert all("100%|" in line for line in lines if BAR.search(line))
    # each phase's bar sits below its log lines: the line above it is the phase's last
    above = [lines[i - 1] for i, line in enumerate(lines) if BAR.search(line)]
    assert [line.split(" ", 1)[1].split(" |")[0] for line in above] == [
        "phase 1/4 train done",
        "phase 2/4 test done",
        "phase 3/4 train done",
        "phase 4/4 test done",
    ]
    steps = [line for line in lines if LOG.search(line) and "| iter " in line]
    assert [line.split(" | ")[1] for line in steps] == ["epoch 1/2"] * 3 + ["epoch 2/2"] * 3


def test_main_in_a_process_leaves_the_hookbus_logger_as_it_found_it() -> None:
    """A ``main()`` called in a process (a test, a notebook) takes its console handler
    away when it returns: a later log line never goes to a stream that is closed by then."""
    from hookbus.cli import main

    hookbus_logger = logging.getLogger("hookbus")
    before = (list(hookbus_logger.handlers), hookbus_logger.level, hookbus_logger.propagate)
    for argv in (["recipes"], ["schema"], ["recipes", "--show", "no_such_recipe"]):
        main(argv)
        after = (list(hookbus_logger.handlers), hookbus_logger.level, hookbus_logger.propagate)
        assert after == before, argv


def test_the_console_handler_is_there_while_a_command_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookbus import cli
    from hookbus.console import CONSOLE_HANDLER

    seen: list[list[str]] = []

    def recipes(args: object) -> int:
        seen.append([h.get_name() for h in logging.getLogger("hookbus").handlers])
        return 0

    monkeypatch.setattr(cli, "_recipes", recipes)
    assert cli.main(["recipes"]) == 0
    assert [names.count(CONSOLE_HANDLER) for names in seen] == [1]
    assert CONSOLE_HANDLER not in [h.get_name() for h in logging.getLogger("hookbus").handlers]
