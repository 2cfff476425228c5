"""Bad inputs for ``hookbus validate`` and ``hookbus train``, by kind.

:data:`NAMED` holds the cases reported against earlier versions, each a list of
overrides for the digits recipe. :func:`generated` derives more from the config's own
schema: for every key, values that its type can never take (text for a number, a number
for a flag, NaN, infinity, 10**30, lists and mappings for scalars...), plus an unknown
key in every section. :data:`FILES` are recipe files that are not recipes. Every one of
them must be refused with exit status 2 and one line naming the key or the file.
tests/runner/test_bad_input_table.py runs the named cases and a sample of the others;
benchmarks/bad_inputs.py runs them all and prints the table docs/reliability.md shows.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hookbus.cli import main
from hookbus.reference import config_rows

ROOT = Path(__file__).resolve().parents[1]

BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]"
            for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


@dataclass(frozen=True)
class BadInput:
    """One bad input: its kind, the overrides, and what the error line must name."""

    kind: str
    overrides: tuple[str, ...]
    names: str
    recipe: str | bytes | None = None
    """The content of a recipe file to use instead of the digits recipe, or None."""


NAMED: list[BadInput] = [
    BadInput("imports", ('trainer.imports=[""]',), "trainer.imports"),
    BadInput("imports", ("trainer.imports=[.relative]",), "trainer.imports"),
    BadInput("imports", ("trainer.imports=[no_such_module_x]",), "trainer.imports"),
    BadInput("imports", ("trainer.imports=[tests.bad_inputs_reregister]",), "trainer.imports"),
    BadInput(
        "hook params",
        ("hooks.extra=[{name: nan_check, params: {check_frequency: -3}}]",),
        "hooks.extra[0]",
    ),
    BadInput(
        "hook params", ("hooks.extra=[{name: nan_check, params: {priority: abc}}]",), "hooks.extra"
    ),
    BadInput("hook params", ("hooks.extra=[{name: checkpoint, params: {}}]",), "hooks.extra[0]"),
    BadInput("hook params", ("hooks.extra=[{name: no_such_hook}]",), "hooks.extra[0]"),
    BadInput("sizes", ("model.predictor.dims=[64,-1]",), "model.predictor.dims"),
    BadInput("sizes", ("data.test_size=5000",), "data"),
    BadInput("sizes", ("data.image_size=100000",), "data.image_size"),
    BadInput("sizes", ("model.backbone.width=1000000000000000000000000000000",), "width"),
    BadInput("sizes", ("data.batch_size=1000000000000000000000000000000",), "data.batch_size"),
    BadInput("sizes", ("optimizer.num_epochs=1000000000000000000000000000000",), "num_epochs"),
    BadInput("run dir", ("checkpoint.dir=/dev/null",), "checkpoint.dir"),
    BadInput("run dir", ("checkpoint.dir=/etc/passwd/x",), "checkpoint.dir"),
    BadInput("run dir", ("checkpoint.dir=",), "checkpoint.dir"),
    BadInput("run dir", ("checkpoint.dir=" + "a" * 5000,), "checkpoint.dir"),
    BadInput("run dir", ('checkpoint.dir="runs/\\0x"',), "checkpoint.dir"),
    BadInput("machine", ("machine.device=cuda",), "machine.device"),
    BadInput("cross-field", ("data.num_views=1",), "data.num_views"),
    BadInput("cross-field", ("data.batch_size=5000",), "data.batch_size"),
    BadInput(
        "cross-field",
        (
            "loss.name=cross_entropy",
            "model.linear_eval.enabled=true",
            "data.num_views=1",
            "model.linear_eval.num_classes=2",
        ),
        "model.linear_eval.num_classes",
    ),
    BadInput("cross-field", ("loss.name=byol",), "model.predictor.dims"),
    BadInput("unread option", ("model.backbone.small_stem=true",), "model.backbone.small_stem"),
    BadInput(
        "unread option",
        ("model.backbone.zero_init_residual=true",),
        "model.backbone.zero_init_residual",
    ),
    BadInput("unread option", ("model.backbone.image_size=32",), "model.backbone.image_size"),
    BadInput(
        "unread option", ("model.backbone.vit.drop_path=0.1",), "model.backbone.vit.drop_path"
    ),
    BadInput(
        "unread option",
        ("model.backbone.name=resnet18", "model.backbone.width=64"),
        "model.backbone.width",
    ),
    BadInput(
        "unread option",
        ("model.backbone.name=tv:resnet18", "model.backbone.small_stem=true"),
        "model.backbone.small_stem",
    ),
    BadInput("unread option", ("model.predictor.dims=[64,32,64]",), "model.predictor.dims"),
    BadInput("unread option", ("model.prototypes.count=16",), "model.prototypes.count"),
    BadInput(
        "unread option",
        ("model.predictor.output_batch_norm=affine",),
        "model.predictor.output_batch_norm",
    ),
    BadInput(
        "unread option", ("model.prototypes.weight_norm=true",), "model.prototypes.weight_norm"
    ),
    BadInput("unread option", ("model.mae_decoder.depth=2",), "model.mae_decoder.depth"),
    BadInput("non-finite", ("optimizer.warmup_epochs=.inf",), "optimizer.warmup_epochs"),
    BadInput("non-finite", ("optimizer.lr=.nan",), "optimizer.lr"),
    BadInput("non-finite", ("optimizer.lr=1e309",), "optimizer.lr"),
    BadInput("non-finite", ("optimizer.weight_decay=.inf",), "optimizer.weight_decay"),
    BadInput("non-finite", ("optimizer.final_lr=.nan",), "optimizer.final_lr"),
    BadInput("non-finite", ("loss.temperature=.inf",), "loss.temperature"),
    BadInput("non-finite", ("data.augment.noise_std=.inf",), "data.augment.noise_std"),
    BadInput("degenerate", ("loss.temperature=1e-30",), "loss.temperature"),
    BadInput(
        "degenerate",
        ("data.pipeline=torchvision", "data.torchvision.std=[0,0,0]"),
        "data.torchvision.std",
    ),
    BadInput("degenerate", ("meters.accuracy.topk=[-1]",), "meters.accuracy.topk"),
    BadInput("overrides", ("optimizer",), "optimizer"),
    BadInput("overrides", ("optimizer.lr=[1,",), "optimizer.lr"),
    BadInput("overrides", ("optimizer.lr.x=1",), "optimizer.lr"),
    BadInput("overrides", ("=1",), "=1"),
]

FILES: list[BadInput] = [
    BadInput("yaml", (), "recipe.yaml", BOMB),
    BadInput("yaml", (), "recipe.yaml", "a: " + "[" * 1000 + "]" * 1000),
    BadInput("yaml", (), "recipe.yaml", "optimizer:\n  lr: 0.1\noptimizer:\n  lr: 0.2\n"),
    BadInput("yaml", (), "recipe.yaml", "optimizer: {lr: [1, 2}\n"),
    BadInput("yaml", (), "recipe.yaml", "- a\n- b\n"),
    BadInput("yaml", (), "recipe.yaml", "a: !!python/object/apply:os.system ['true']\n"),
    BadInput("yaml", (), "recipe.yaml", "optimizer: 3\n"),
    BadInput("yaml", (), "recipe.yaml", b"optimizer: {lr: \xff\xfe}\n"),
]

_NEVER: dict[str, tuple[str, ...]] = {
    "int": ("abc", "1.5", ".nan", "1000000000000000000000000000000", "[1]", "{a: 1}"),
    "int or None": ("abc", "1.5", ".nan", "-1000000000000000000000000000000", "[1]"),
    "float": ("abc", ".nan", ".inf", "-.inf", "1e309", "[1.0]", "{a: 1}"),
    "bool": ("maybe", "2", "[true]", "{a: 1}"),
    "str": ("[]", "{a: 1}", "123"),
    "tuple": ("abc", "[1]", "[.nan, 1]", "{a: 1}"),
    "list": ("abc", "{a: 1}", "[[1]]"),
    "Literal": ("no_such_choice", "[]", "1"),
}


def _values_for(type_name: str) -> tuple[str, ...]:
    for prefix in ("int or None", "int", "float", "bool", "str", "tuple", "list", "Literal"):
        if type_name.startswith(prefix):
            return _NEVER[prefix]
    return ()


def generated() -> Iterator[BadInput]:
    """For every config key, values its type never takes; an unknown key per section."""
    sections: set[str] = set()
    for key, type_name, _, _ in config_rows():
        sections.add(key.rsplit(".", 1)[0])
        if key == "hooks.extra":
            values: tuple[str, ...] = ("abc", "[abc]", "[{}]", "[{name: log, params: 3}]")
        elif key == "trainer.imports":
            values = ("abc", "[[x]]", "[1]")
        else:
            values = _values_for(type_name)
        for value in values:
            yield BadInput(f"value: {type_name.split('[')[0]}", (f"{key}={value}",), key)
        yield BadInput("unknown key", (f"{key}x=1",), f"{key}x")
    for section in sorted(sections):
        yield BadInput("unknown key", (f"{section}.no_such_key=1",), f"{section}.no_such_key")
    yield BadInput("unknown key", ("no_such_section.key=1",), "no_such_section")


def all_inputs() -> list[BadInput]:
    """Every bad input: the named ones, the recipe files, and the generated ones."""
    return [*NAMED, *FILES, *generated()]


@dataclass(frozen=True)
class Outcome:
    """What one run of ``hookbus COMMAND`` on a bad input did."""

    status: int | str
    """The exit status, or the name of the exception that escaped."""
    error_lines: list[str]
    seconds: float
    wrote: bool
    """Whether anything appeared in the run directory."""

    def refused_cleanly(self, case: BadInput) -> bool:
        """Exit 2, one line on stderr, naming what the case says, nothing written."""
        return (
            self.status == 2
            and len(self.error_lines) == 1
            and case.names[:60] in self.error_lines[0]
            and not self.wrote
        )


def run_case(case: BadInput, workdir: Path, command: str = "validate") -> Outcome:
    """Run ``hookbus COMMAND`` on ``case`` in this process, with a fresh run directory
    under ``workdir`` (unless the case names its own ``checkpoint.dir``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    recipe = ROOT / "configs" / "simclr_digits.yaml"
    if case.recipe is not None:
        recipe = workdir / "recipe.yaml"
        content = case.recipe if isinstance(case.recipe, bytes) else case.recipe.encode()
        recipe.write_bytes(content)
    run_dir = workdir / "run"
    overrides = list(case.overrides)
    if not any(item.startswith("checkpoint.dir=") for item in overrides):
        overrides.append(f"checkpoint.dir={run_dir}")
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status: int | str = main([command, str(recipe), *overrides, "-q"])
        except BaseException as exc:  # the outcome to report, whatever it is
            status = type(exc).__name__
    seconds = time.perf_counter() - started
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    return Outcome(status, lines, seconds, run_dir.exists())
