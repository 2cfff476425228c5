"""The code blocks of README.md and docs/, run as written: ``make doc-blocks``.

Every fenced block has an info string. ``bash`` and ``console`` blocks are shell
commands, ``python`` blocks Python; each page runs in a fresh copy of the working tree
(``.venv`` linked in and activated, as the quickstart says), its blocks in page order:
the shell blocks in bash, the Python blocks in one interpreter, as a reader pastes them
(a block that defines ``test_*`` functions is a test file: pytest runs it, with the
page's earlier names importable). A ``console`` block's ``$`` lines are its commands and
the lines below them the output they must print (a ``...`` line stands for any
lines, a line ending in ``...`` for any line that starts so).
``yaml`` and ``json`` blocks must parse; ``text`` blocks (results, logs, layouts) are
not run. A block that cannot run here says why, in an HTML comment on the line before
it (a blank line between)::

    <!-- doc-block: gpu -->            needs a CUDA device
    <!-- doc-block: slurm -->          a SLURM job script
    <!-- doc-block: multi-node -->     needs a second machine
    <!-- doc-block: network REASON --> needs a server or store (its config is checked)
    <!-- doc-block: slow REASON -->    a measurement campaign, minutes to hours
    <!-- doc-block: skip REASON -->    anything else (installing elsewhere, a server run)

Those are validated: ``hookbus validate`` for each ``hookbus train RECIPE ...`` they
hold (for a ``network`` block, whose data a validation cannot read, ``hookbus hooks``
instead: the config and the hook plan, no data read), ``py_compile`` for the Python files they
run, an existing target for ``make``, ``ast.parse`` for Python. A page whose blocks
follow ``make demo`` says so once, ``<!-- doc-blocks: after make demo -->``: the checker
makes the demo run once and copies its ``runs/simclr_digits`` into that page's copy
first.

    python -m tests.doc_blocks                 # every page
    python -m tests.doc_blocks docs/recipes.md  # some pages
    python -m tests.doc_blocks --list          # the blocks and their kinds, nothing run
    python -m tests.doc_blocks --reuse-demo    # the demo run of the last check, if any

Every block's output goes to ``runs/doc-blocks/log.txt``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs")
SHELL = ("bash", "console")
LANGUAGES = (*SHELL, "python", "yaml", "json", "text")
VALIDATE_ONLY = {
    "gpu": "needs a CUDA device",
    "slurm": "a SLURM job script",
    "multi-node": "needs a second machine",
    "network": "",
    "slow": "",
    "skip": "",
}
"""Marker kinds of the blocks that are validated, not run; ``slow``, ``skip`` and
``network`` need a reason."""
AFTER_DEMO = "<!-- doc-blocks: after make demo -->"
DEMO_RUN = "runs/simclr_digits"
MARKER = re.compile(r"^<!-- doc-block: ([\w-]+)\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```(\S*)(.*)$")
COPY_LEFT_OUT = (".venv", ".git", "runs", "site", "dist", "build", "*.egg-info")
COPY_LEFT_OUT += ("__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis")
BLOCK_TIMEOUT_S = 1800
"""The longest a block may run (``make demo`` takes 1-2 minutes on 2 idle cores)."""


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text and its marker."""

    page: str
    line: int
    language: str
    text: str
    marker: str = ""
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """``run``, ``included`` (a file the suite runs), ``validate`` (marked), ``parse``
        (yaml, json) or ``text``."""
        if self.included_file:
            return "included"
        if self.language == "text":
            return "text"
        if self.language in ("yaml", "json"):
            return "parse"
        return "validate" if self.marker else "run"

    @property
    def included_file(self) -> str | None:
        """The file a ``--8<--`` snippet line includes (the block is that file), else None."""
        match = re.fullmatch(r'--8<-- "([^"]+)"\s*', self.text.strip())
        return match.group(1) if match else None


def pages() -> list[Path]:
    """README.md and every page under docs/, in order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def extract(page: Path) -> list[Block]:
    """Every fenced block of ``page``; raises ValueError on an untagged block or a bad marker."""
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)
    lines = page.read_text().splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        info = match.group(1).lstrip("{").lstrip(".")
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), None)
        if end is None:
            raise ValueError(f"{name}:{index + 1}: a code block that is never closed")
        if info not in LANGUAGES:
            raise ValueError(
                f"{name}:{index + 1}: code block language {info!r}; "
                f"give it one of {', '.join(LANGUAGES)}"
            )
        marker, reason = _marker(lines, index, name)
        text = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(Block(name, index + 1, info, text, marker, reason))
        index = end + 1
    return blocks


def _marker(lines: list[str], fence: int, page: str) -> tuple[str, str]:
    """The ``<!-- doc-block: ... -->`` marker on the last non-blank line before ``fence``."""
    before = next((line for line in reversed(lines[:fence]) if line.strip()), "")
    match = MARKER.match(before.strip())
    if not match:
        return "", ""
    kind, reason = match.groups()
    if kind not in VALIDATE_ONLY:
        raise ValueError(
            f"{page}:{fence + 1}: unknown doc-block marker {kind!r} "
            f"(known: {', '.join(VALIDATE_ONLY)})"
        )
    if not (reason or VALIDATE_ONLY[kind]):
        raise ValueError(f"{page}:{fence + 1}: doc-block marker {kind!r} needs a reason")
    return kind, reason or VALIDATE_ONLY[kind]


def after_demo(page: str) -> bool:
    """Whether the page's blocks follow ``make demo`` (they read its run)."""
    return AFTER_DEMO in (ROOT / page).read_text()


def commands(block: Block) -> list[str]:
    """A shell block's command lines: continuations joined; comments and prompts dropped.

    In a ``console`` block only the ``$`` lines are commands.
    """
    text = block.text.replace("\\\n", " ")
    if block.language == "console":
        return [line[2:].strip() for line in text.splitlines() if line.startswith("$ ")]
    found = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True) if line.strip() else []
        if words and not line.lstrip().startswith("#"):
            found.append(line.split(" #")[0].strip())
    return found


def console_session(block: Block) -> list[tuple[str, list[str]]]:
    """A console block's ``(command, expected output lines)`` pairs."""
    session: list[tuple[str, list[str]]] = []
    for line in block.text.replace("\\\n", " ").splitlines():
        if line.startswith("$ "):
            session.append((line[2:].strip(), []))
        elif session:
            session[-1][1].append(line)
    return session


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``: a ``...`` line stands for any lines, a line
    ending in ``...`` for any line that starts as it does."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(output_matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    want, got = expected[0].rstrip(), actual[0].rstrip()
    same = got.startswith(want[:-3]) if want.endswith("...") else got == want
    return same and output_matches(expected[1:], actual[1:])


TRAIN_COMMAND = re.compile(r"hookbus train[ \t]+(?!-)(\S+)((?:[ \t]+(?!-)[^\s'&|;]+)*)")
"""A ``hookbus train`` command: its recipe and its overrides, up to the end of its line."""
COMPOSED_TRAIN = re.compile(
    r"hookbus train((?:[ \t]+--(?:method|model|data|out)[ \t]+[^\s'&|;]+)+)"
    r"((?:[ \t]+(?!-)[^\s'&|;]+)*)"
)
"""A composed ``hookbus train --method M --model X --data DIR``: its choices and overrides."""
PYTHON_FILE = re.compile(r"python\s+((?:benchmarks|examples|tests)/\S+\.py)")
MAKE_TARGET = re.compile(r"(?:^|\s)make\s+([\w-]+)")


def validations(block: Block) -> list[list[str]]:
    """What validating a marked shell block runs: ``hookbus validate`` of each train command.

    Raises ValueError when a Python file it runs does not compile or a make target is
    missing (checked here, without running anything).
    """
    if block.language == "python":
        ast.parse(block.text, filename=block.where)
        return []
    for path in PYTHON_FILE.findall(block.text):
        if not (ROOT / path).is_file():
            raise ValueError(f"{block.where}: {path} does not exist")
        ast.parse((ROOT / path).read_text(), filename=path)
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    for target in MAKE_TARGET.findall(block.text):
        if target not in targets:
            raise ValueError(f"{block.where}: make target {target!r} is not in the Makefile")
    text = re.sub(r"(^|\s)#.*$", "", block.text, flags=re.M).replace("\\\n", " ")
    check = ["hookbus", "hooks" if block.marker == "network" else "validate"]
    return [
        [*check, recipe, *overrides.split()] for recipe, overrides in TRAIN_COMMAND.findall(text)
    ] + [
        [*check, *choices.split(), *overrides.split()]
        for choices, overrides in COMPOSED_TRAIN.findall(text)
    ]


# --- running ---------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, os, re, sys, traceback, types
    results = os.fdopen(int(sys.argv[1]), "w")
    session = types.ModuleType("doc_session")
    sys.modules["doc_session"] = session
    for request in sys.stdin:
        request = json.loads(request)
        before = set(vars(session))
        try:
            code = compile(request["code"], request["where"], "exec")
            tests = re.findall(r"^def (test_\\w+)", request["code"], flags=re.M)
            if tests:
                import pytest
                path = os.path.join(request["tmp"], "test_doc_block.py")
                with open(path, "w") as file:
                    file.write("from doc_session import *\\n" + request["code"])
                status = pytest.main(["-q", "-p", "no:cacheprovider", "-c", os.devnull,
                                      "--rootdir", request["tmp"], path])
                error = "" if status == 0 else f"pytest exit status {int(status)}"
            else:
                exec(code, vars(session))
                error = ""
        except BaseException:
            error = traceback.format_exc(limit=-3)
        sys.stdout.flush(); sys.stderr.flush()
        results.write(json.dumps({"error": error}) + "\\n"); results.flush()
    """
)


class PageRun:
    """A fresh copy of the working tree where one page's blocks run, in order."""

    def __init__(self, page: str, demo_run: Path | None, log: Path) -> None:
        self.page = page
        self.home = Path(tempfile.mkdtemp(prefix="doc-blocks-"))
        self.copy = self.home / "hookbus"
        # Links stay links (hookbus/engine -> ../engine): followed, they would add files
        # to the package's list, and the copy's make would reinstall the shared .venv
        # from the copy, which is gone when the page ends.
        shutil.copytree(
            ROOT, self.copy, symlinks=True, ignore=shutil.ignore_patterns(*COPY_LEFT_OUT)
        )
        (self.copy / ".venv").symlink_to(ROOT / ".venv")
        stamp = (ROOT / ".venv" / ".installed").stat().st_mtime
        for name in ("setup.cfg", "pyproject.toml"):  # make sees the install as up to date
            os.utime(self.copy / name, (stamp - 1, stamp - 1))
        if demo_run is not None:
            shutil.copytree(demo_run, self.copy / DEMO_RUN, symlinks=True)
        self.env = activated_env()
        self.log = log.open("a")
        self.worker: subprocess.Popen[str] | None = None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stdin.close()
            self.worker.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def run(self, block: Block) -> str:
        """Run or check one block; returns the error ("" when it did what it says)."""
        self.log.write(f"\n=== {block.where} ({block.kind} {block.language})\n")
        self.log.flush()
        try:
            if block.kind == "text":
                return ""
            if block.kind == "parse":
                loads = yaml.safe_load if block.language == "yaml" else json.loads
                loads(block.text)
                return ""
            if block.kind == "included":
                return _check_included(block)
            if block.kind == "validate":
                return self._validate(block)
            if block.language == "python":
                return self._python(block)
            if block.language == "console":
                return self._console(block)
            return self._shell(block.text)
        except (ValueError, SyntaxError, yaml.YAMLError) as exc:
            return str(exc)

    def _shell(self, script: str) -> str:
        status, _ = run_command(
            ["bash", "-e", "-o", "pipefail", "-c", script], self.copy, self.env, self.log
        )
        return "" if status == 0 else f"exit status {status}"

    def _console(self, block: Block) -> str:
        for command, expected in console_session(block):
            status, printed = run_command(
                ["bash", "-o", "pipefail", "-c", command], self.copy, self.env, None
            )
            actual = printed.splitlines()
            self.log.write(printed)
            if not expected and status != 0:
                return f"{command}: exit status {status}"
            if expected and not output_matches(expected, actual):
                return f"{command}: printed\n" + "\n".join(actual[-20:])
        return ""

    def _validate(self, block: Block) -> str:
        for command in validations(block):
            error = self._shell(shlex.join(command))
            if error:
                return f"{shlex.join(command)}: {error}"
        return ""

    def _python(self, block: Block) -> str:
        if self.worker is None:
            reader, writer = os.pipe()
            self.worker = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "python"), "-u", "-c", WORKER, str(writer)],
                cwd=self.copy,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                text=True,
                pass_fds=(writer,),
            )
            os.close(writer)
            self.results = os.fdopen(reader)
        request = {"code": block.text, "where": block.where, "tmp": str(self.home)}
        self.worker.stdin.write(json.dumps(request) + "\n")
        self.worker.stdin.flush()
        answer = self.results.readline()
        if not answer:
            return f"the Python session ended (exit status {self.worker.wait()})"
        return json.loads(answer)["error"]


def run_command(argv: list[str], cwd: Path, env: dict[str, str], log: Any) -> tuple[int, str]:
    """Run ``argv`` in its own process group, its output to ``log`` (None: returned).

    Past :data:`BLOCK_TIMEOUT_S` the whole group is killed (``make`` and the training it
    started), and the status is 124.
    """
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=log if log is not None else subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        printed, _ = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        printed, _ = process.communicate()
        return 124, printed or ""
    return process.returncode, printed or ""


def _check_included(block: Block) -> str:
    """A ``--8<--`` block shows a file of the checkout that the test suite runs."""
    path = ROOT / block.included_file
    if not path.is_file():
        return f"{block.included_file} does not exist"
    ast.parse(path.read_text(), filename=str(path))
    return ""


def activated_env() -> dict[str, str]:
    """The environment after ``. .venv/bin/activate``."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(ROOT / ".venv")
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONHOME", None)
    return env


def make_demo(kept: Path, log: Path) -> Path:
    """``make demo`` once, in its own copy; keeps the finished run directory at ``kept``."""
    run = PageRun("make demo", None, log)
    try:
        start = time.monotonic()
        error = run._shell("make demo")
        if error:
            raise SystemExit(f"make demo: {error} (see {log})")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(run.copy / DEMO_RUN, kept, symlinks=True)
        print(f"ok   make demo {'':40} {'demo':9} {time.monotonic() - start:6.1f} s")
    finally:
        run.close()
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.doc_blocks", description=__doc__)
    parser.add_argument("pages", nargs="*", help="pages to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    parser.add_argument(
        "--out", default="runs/doc-blocks", help="where the log and the demo run go"
    )
    parser.add_argument(
        "--reuse-demo", action="store_true", help="reuse the demo run of an earlier check"
    )
    args = parser.parse_args(argv)
    chosen = [ROOT / page for page in args.pages] or pages()
    by_page = {str(page.relative_to(ROOT)): extract(page) for page in chosen}
    if args.list:
        for blocks in by_page.values():
            for block in blocks:
                print(f"{block.where:45} {block.language:8} {block.kind:9} {block.reason}")
        print(counts_line([block for blocks in by_page.values() for block in blocks]))
        return 0
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    log.write_text("")
    demo = None
    if any(after_demo(page) for page in by_page):
        demo = out / "simclr_digits"
        if not (args.reuse_demo and (demo / "checkpoint.torch").exists()):
            make_demo(demo, log)
    failures = []
    for page, blocks in by_page.items():
        run = PageRun(page, demo if after_demo(page) else None, log)
        try:
            for block in blocks:
                start = time.monotonic()
                error = run.run(block)
                status = "FAIL" if error else "ok"
                print(
                    f"{status:4} {block.where:45} {block.kind:9} {time.monotonic() - start:6.1f} s"
                )
                if error:
                    failures.append((block, error))
                    print(textwrap.indent(error.rstrip(), "     "))
        finally:
            run.close()
    every = [block for blocks in by_page.values() for block in blocks]
    print(counts_line(every))
    print(f"{len(failures)} failed (output in {log})" if failures else "every block as written")
    return 1 if failures else 0


def counts_line(blocks: list[Block]) -> str:
    """How many of ``blocks`` are of each kind, in one line."""
    kinds = [block.kind for block in blocks]
    return (
        f"{len(blocks)} blocks: {kinds.count('run')} run, {kinds.count('included')} files the "
        f"suite runs, {kinds.count('validate')} validated only, {kinds.count('parse')} parsed "
        f"(yaml, json), {kinds.count('text')} text (output, layout)"
    )


if __name__ == "__main__":
    sys.exit(main())
