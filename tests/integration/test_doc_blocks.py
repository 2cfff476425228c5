"""The code blocks of README.md and docs/: each is run, validated or marked with a reason.

``make doc-blocks`` (tests/doc_blocks.py) runs every block, trainings included (minutes:
CI runs it after ``make test``). Here, in seconds: the extraction and each block's kind,
the parsing of every Python, YAML and JSON block, the static checks of the blocks that
cannot run here (their ``hookbus validate`` runs in ``make doc-blocks``), and what runs
in a second, in this process: the ``hookbus`` commands of the docs that train nothing,
the user errors that console blocks show, and the README's hook with its unit test.
"""

from __future__ import annotations

import ast
import contextlib
import io
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hookbus.cli import main
from tests.doc_blocks import (
    ROOT,
    Block,
    PageRun,
    console_session,
    counts_line,
    extract,
    output_matches,
    pages,
    validations,
)

BLOCKS = [block for page in pages() for block in extract(page)]
FAST_COMMANDS = ("recipes", "validate", "hooks", "schema")
"""``hookbus`` commands that build at most the data and the model: a second or so."""


def blocks_of(kind: str, *languages: str) -> list[Block]:
    return [b for b in BLOCKS if b.kind == kind and (not languages or b.language in languages)]


def test_every_page_has_its_blocks_tagged_and_counted() -> None:
    line = counts_line(BLOCKS)
    print(line)
    kinds = {block.kind for block in BLOCKS}
    assert kinds <= {"run", "included", "validate", "parse", "text"}
    assert len(blocks_of("run")) >= 40, line
    assert all(block.reason for block in blocks_of("validate")), line


def test_a_block_without_a_language_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```\nmake demo\n```\n")
    with pytest.raises(ValueError, match="page.md:3: code block language ''"):
        extract(page)


def test_a_marker_names_a_known_kind_and_slow_gives_a_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n<!-- doc-block: gpu -->\n\n```bash\nx\n```\n")
    assert [(b.kind, b.marker, b.reason) for b in extract(page)] == [
        ("validate", "gpu", "needs a CUDA device")
    ]
    page.write_text("# t\n\n<!-- doc-block: slow -->\n\n```bash\nx\n```\n")
    with pytest.raises(ValueError, match="needs a reason"):
        extract(page)
    page.write_text("# t\n\n<!-- doc-block: later -->\n\n```bash\nx\n```\n")
    with pytest.raises(ValueError, match="unknown doc-block marker 'later'"):
        extract(page)


@pytest.mark.parametrize("block", blocks_of("run", "python") + blocks_of("validate", "python"))
def test_every_python_block_parses(block: Block) -> None:
    ast.parse(block.text, filename=block.where)


@pytest.mark.parametrize("block", blocks_of("included"), ids=lambda block: block.where)
def test_every_included_file_exists_and_parses(block: Block) -> None:
    ast.parse((ROOT / block.included_file).read_text())


@pytest.mark.parametrize("block", blocks_of("validate"), ids=lambda block: block.where)
def test_a_block_that_cannot_run_here_names_only_files_and_targets_that_exist(
    block: Block,
) -> None:
    validations(block)  # raises on a missing script or make target


def test_console_output_matching() -> None:
    assert output_matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert output_matches(["a", "..."], ["a"])
    assert not output_matches(["a", "d"], ["a", "b", "d"])
    assert not output_matches(["a"], ["a", "b"])
    assert output_matches(["error: ..."], ["error: no such file"])
    assert not output_matches(["error: ..."], ["warning: no such file"])


def fast_command_lines() -> dict[tuple[str, ...], str]:
    """``{argv: where}`` of the fast ``hookbus`` command lines of the blocks that run
    (the first block of each, when several pages show the same command), in the order
    the pages show them; ``hookbus train --show > FILE`` is one (it prints a recipe that a
    later line reads, and trains nothing)."""
    found: dict[tuple[str, ...], str] = {}
    for block in blocks_of("run", "bash"):
        for line in block.text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            # A recipe printed into a file that a later line of the block reads.
            shows = words[1:2] == ["train"] and "--show" in words and ">" in words
            if words[:1] == ["hookbus"] and words[1:2] and (words[1] in FAST_COMMANDS or shows):
                found.setdefault(tuple(words[1:]), block.where)
    return found


def run_in_process(argv: list[str]) -> tuple[int, str]:
    """``hookbus ARGV`` in this process: the status and what it printed (``> FILE``
    written to FILE, as the shell does)."""
    target = None
    if ">" in argv:
        argv, target = argv[: argv.index(">")], argv[argv.index(">") + 1]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if target is not None:
        Path(target).write_text(out.getvalue())
        return status, err.getvalue()
    return status, out.getvalue() + err.getvalue()


@pytest.fixture
def checkout_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory where the docs' relative paths (configs/...) resolve."""
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_fast_hookbus_commands_run_as_written(checkout_dir: Path) -> None:
    commands = fast_command_lines()
    assert len(commands) >= 6
    failed = []
    for argv, where in commands.items():
        status, printed = run_in_process(list(argv))
        if status != 0:
            failed.append(f"{where}: hookbus {shlex.join(argv)}: {printed.strip()[-300:]}")
    assert failed == []


def test_the_user_errors_that_console_blocks_show_are_printed_as_shown(
    checkout_dir: Path,
) -> None:
    shown = [
        (block.where, command, expected)
        for block in blocks_of("run", "console")
        for command, expected in console_session(block)
        if command.startswith("hookbus ") and expected and ": error: " in expected[0]
    ]
    assert len(shown) >= 2
    for where, command, expected in shown:
        status, printed = run_in_process(shlex.split(command)[1:])
        assert status == 2, where
        assert output_matches(expected, printed.splitlines()), f"{where}: {printed}"


def test_the_readme_hook_and_its_unit_test_run(caplog: pytest.LogCaptureFixture) -> None:
    readme = [block for block in blocks_of("run", "python") if block.page == "README.md"]
    hook = next(block for block in readme if "class LogLossEvery" in block.text)
    test = next(block for block in readme if "def test_logs_every_second_iteration" in block.text)
    session: dict[str, Any] = {}
    exec(compile(hook.text, hook.where, "exec"), session)
    exec(compile(test.text, test.where, "exec"), session)
    session["test_logs_every_second_iteration"](caplog)


def _package_files(checkout: Path, out: Path) -> str:
    """The Makefile's list of the package's files in ``checkout`` (written under ``out``)."""
    listing = out / ".package-files"
    subprocess.run(
        ["make", "-s", f"VENV={out}", str(listing)], cwd=checkout, check=True, timeout=60
    )
    return listing.read_text()


def test_a_page_copy_lists_the_package_files_of_the_checkout(tmp_path: Path) -> None:
    # A copy whose list differs makes its make reinstall the shared .venv from the copy,
    # which leaves the venv without hookbus once the page's copy is removed.
    run = PageRun("a page", None, tmp_path / "log.txt")
    try:
        assert (run.copy / "hookbus" / "engine").is_symlink()
        copied = _package_files(run.copy, tmp_path / "copy")
    finally:
        run.close()
    listed = _package_files(ROOT, tmp_path / "root")
    assert copied == listed
    assert "engine/bus/bus_engine.py\n" in listed
    assert "hookbus/engine/" not in listed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "$ hookbus train a.yaml x.y=1 c.d=[1,2]\n$ hookbus train b.yaml\n",
            [["a.yaml", "x.y=1", "c.d=[1,2]"], ["b.yaml"]],
        ),
        (
            "hookbus train a.yaml \\\n    x.y=1  # a comment\nhookbus train b.yaml z=2\n",
            [["a.yaml", "x.y=1"], ["b.yaml", "z=2"]],
        ),
        ("hookbus train a.yaml x=1 && hookbus train b.yaml\n", [["a.yaml", "x=1"], ["b.yaml"]]),
    ],
)
def test_each_train_command_of_a_validated_block_is_validated_alone(
    text: str, expected: list[list[str]]
) -> None:
    language = "console" if text.startswith("$") else "bash"
    block = Block("page.md", 1, language, text, "slow", "a campaign")
    assert validations(block) == [["hookbus", "validate", *argv] for argv in expected]


def test_a_network_block_checks_its_train_commands_hook_plan_without_reading_data() -> None:
    block = Block("page.md", 1, "bash", "hookbus train a.yaml data.x=s3://b/t\n", "network", "S3")
    assert validations(block) == [["hookbus", "hooks", "a.yaml", "data.x=s3://b/t"]]
    guide = next(b for b in BLOCKS if b.kind == "validate" and "s3://photos/train" in b.text)
    assert guide.marker == "network"


def test_the_check_of_a_network_block_reads_no_data_and_refuses_a_bad_override(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = str(ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml")
    s3 = ("data.name=shards", "data.shards.path=s3://no-such-bucket/train")
    assert main(["hooks", recipe, *s3]) == 0
    assert main(["hooks", recipe, *s3, "data.shards.pth=x"]) == 2
    assert "unknown key 'data.shards.pth'" in capsys.readouterr().err
