"""Property-based: random and mutated configs and overrides get a clear error, exit 2.

Each input that ``hookbus validate`` refuses must be refused with one line naming the
problem and exit status 2, no traceback; ``hookbus train`` must refuse it the same way
and write nothing into the run directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hookbus.cli import main
from hookbus.reference import config_rows

KEYS = [key for key, _, _, _ in config_rows()]
SECTIONS = sorted({key.split(".")[0] for key in KEYS})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
override_keys = st.one_of(
    st.sampled_from(KEYS),
    st.builds(lambda k, s: f"{k}{s}", st.sampled_from(KEYS), st.text(min_size=1, max_size=5)),
    st.text(max_size=15).filter(lambda text: not text.startswith("-")),
)
# An argument starting with "-" is an option to argparse, not an override.
not_an_option = st.text(max_size=20).filter(lambda text: not text.startswith("-"))
overrides = st.lists(
    st.builds(
        lambda k, v: f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}",
        override_keys,
        values,
    )
    | not_an_option,
    min_size=1,
    max_size=3,
)
documents = st.dictionaries(
    st.one_of(st.sampled_from(SECTIONS), st.text(max_size=8)),
    st.one_of(values, st.dictionaries(st.text(max_size=10), values, max_size=3)),
    max_size=4,
)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _refused_cleanly(argv: list[str], capsys: pytest.CaptureFixture[str]) -> bool:
    """Run the CLI; True when it refused the input as a user error, in one clear line."""
    code = main(argv)
    err = capsys.readouterr().err
    if code == 0:
        return False
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hookbus {argv[0]}: error: "), err
    return True


def _check_train_refuses(config: Path, extra: list[str], tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "keep.txt").write_text("x")
    assert _refused_cleanly(["train", str(config), *extra, f"checkpoint.dir={run}"], capsys)
    assert sorted(os.listdir(run)) == ["keep.txt"]


@pytest.mark.slow
@SETTINGS
@given(document=documents)
def test_random_config_files_are_refused_cleanly(
    document: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "random.yaml"
    config.write_text(yaml.safe_dump(document))
    assume(_refused_cleanly(["validate", str(config)], capsys))
    _check_train_refuses(config, [], tmp_path, capsys)


@pytest.mark.slow
@SETTINGS
@given(extra=overrides)
def test_mutated_overrides_are_refused_cleanly(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = Path(__file__).resolve().parents[2] / "configs" / "simclr_digits.yaml"
    assume(all("checkpoint.dir" not in item for item in extra))
    assume(_refused_cleanly(["validate", str(recipe), *extra], capsys))
    _check_train_refuses(recipe, extra, tmp_path, capsys)


@pytest.mark.slow
@SETTINGS
@given(text=st.text(max_size=60))
def test_arbitrary_text_files_are_refused_cleanly(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "text.yaml"
    config.write_text(text)
    assume(_refused_cleanly(["validate", str(config)], capsys))
    _check_train_refuses(config, [], tmp_path, capsys)
