"""A checkpoint whose checksum is right but whose contents do not fit the run is skipped.

Each case tampers with one section of the newest checkpoint of a finished run and writes
it back with a valid sidecar (:func:`save_atomic` computes the checksum of what it
writes), as a file written by hand or by another tool would be. The resume skips it with
a warning naming the file and the section, and goes on from the previous checkpoint,
as for a failed checksum; when no checkpoint fits, the run is refused in one line.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from hookbus import CheckpointError, SSLTrainer
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import (
    POINTER_NAME,
    list_checkpoints,
    load_checkpoint,
    save_atomic,
)
from hookbus.engine.config.config_io import config_to_yaml
from hookbus.export import export_backbone
from tests.conftest import tiny_config

Tamper = Callable[[dict[str, Any]], None]


def first_weight(checkpoint: dict[str, Any]) -> str:
    return next(key for key in checkpoint["model"] if key.endswith("weight"))


def first_state(checkpoint: dict[str, Any]) -> dict[str, Any]:
    return next(iter(checkpoint["optimizer"]["state"].values()))


def put(section: str, key: str, value: object) -> Tamper:
    return lambda checkpoint: checkpoint[section].__setitem__(key, value)


def model_entry(make: Callable[[torch.Tensor], object]) -> Tamper:
    def tamper(checkpoint: dict[str, Any]) -> None:
        key = first_weight(checkpoint)
        checkpoint["model"][key] = make(checkpoint["model"][key])

    return tamper


def optimizer_state(name: str, make: Callable[[torch.Tensor], object]) -> Tamper:
    def tamper(checkpoint: dict[str, Any]) -> None:
        state = first_state(checkpoint)
        state[name] = make(state[name])

    return tamper


def python_rng(make: Callable[[list], object]) -> Tamper:
    def tamper(checkpoint: dict[str, Any]) -> None:
        checkpoint["rng"]["python"] = make(checkpoint["rng"]["python"])

    return tamper


def drop_a_parameter(checkpoint: dict[str, Any]) -> None:
    checkpoint["optimizer"]["param_groups"][0]["params"].pop()


def state_for_no_parameter(checkpoint: dict[str, Any]) -> None:
    checkpoint["optimizer"]["state"][10_000] = dict(first_state(checkpoint))


def inside_the_phase(**values: object) -> Tamper:
    return lambda checkpoint: checkpoint.update(phase_done=False, **values)


CASES: dict[str, tuple[Tamper, str]] = {
    "a model weight that is a string": (model_entry(lambda _: "weights"), "not a tensor"),
    "int64 weights where float32": (model_entry(lambda w: w.long()), "torch.int64"),
    "a weight of another shape": (model_entry(lambda w: w[:1]), "shape mismatch"),
    "a missing weight": (lambda c: c["model"].pop(first_weight(c)), "missing keys"),
    "an extra weight": (put("model", "extra.weight", torch.zeros(2)), "unexpected keys"),
    "model not a mapping": (lambda c: c.update(model=[1, 2]), "must be a mapping"),
    "optimizer state of another shape": (
        optimizer_state("exp_avg", lambda t: torch.zeros(t.numel() + 1)),
        "optimizer.state[0].exp_avg: is",
    ),
    "optimizer state that is a string": (
        optimizer_state("exp_avg_sq", lambda _: "zeros"),
        "must be a tensor or a number",
    ),
    "integer optimizer state": (
        optimizer_state("exp_avg", lambda t: t.long()),
        "not floating point",
    ),
    "empty param_groups": (
        put("optimizer", "param_groups", []),
        "optimizer.param_groups: 0 groups",
    ),
    "a parameter group missing a parameter": (drop_a_parameter, "parameters, the optimizer"),
    "a learning rate that is a string": (
        lambda c: c["optimizer"]["param_groups"][0].__setitem__("lr", "fast"),
        "param_groups[0].lr: must be a number",
    ),
    "state for no parameter": (state_for_no_parameter, "is for no parameter"),
    "python rng of the wrong length": (
        python_rng(lambda s: [s[0], s[1][:10], s[2]]),
        "rng.python",
    ),
    "python rng not a triple": (python_rng(lambda s: s[:2]), "rng.python"),
    "python rng word out of range": (
        python_rng(lambda s: [s[0], [2**40, *s[1][1:]], s[2]]),
        "rng.python",
    ),
    "float torch rng": (put("rng", "torch", torch.zeros(5056)), "rng.torch: must be uint8"),
    "short torch rng": (
        lambda c: c["rng"].__setitem__("torch", c["rng"]["torch"][:100]),
        "rng.torch",
    ),
    "numpy rng keys of another shape": (
        lambda c: c["rng"].__setitem__("numpy", [*c["rng"]["numpy"][:1], torch.zeros(3)]),
        "rng.numpy",
    ),
    "rng not a mapping": (lambda c: c.update(rng=[1]), "rng: must be a mapping"),
    "a hook state that is a number": (put("hooks", "timing", 5), "hooks.timing: must be"),
    "a hook state of the wrong structure": (
        put("hooks", "timing", {"seconds": "slow", "steps": {}}),
        "hooks.timing.seconds: must be a mapping",
    ),
    "config that is a number": (lambda c: c.update(config=5), "config: must be a mapping"),
    "phase_idx far beyond the plan": (
        lambda c: c.update(phase_idx=10**9),
        "phase_idx: 1000000000 is not a phase",
    ),
    "iteration beyond the plan": (lambda c: c.update(iteration=10**6), "iteration: 1000000"),
    "train_phase_idx beyond the plan": (
        lambda c: c.update(phase_idx=0, train_phase_idx=1),
        "train_phase_idx: 1 is outside -1..0",
    ),
    "a counter that is a float": (lambda c: c.update(updates=2.5), "updates must be a counter"),
    "phase_batches beyond its phase": (
        inside_the_phase(phase_batches=10**6),
        "phase_batches: 1000000",
    ),
    "stopped_by a mapping": (
        lambda c: c.update(stopped_by={"by": "x"}),
        "stopped_by: must be a str or None",
    ),
    "phase_done a string": (lambda c: c.update(phase_done="yes"), "phase_done: must be a bool"),
    "world_size a string": (lambda c: c.update(world_size="2"), "world_size: must be an int"),
    "loss_sum a string": (inside_the_phase(loss_sum="high"), "loss_sum: must be"),
    "meters not a mapping": (inside_the_phase(meters=5), "meters: must be a mapping"),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-epoch run with the default hooks: checkpoints after phase 0 (train),
    phase 2 (train) and phase 3 (the last, a test phase)."""
    run = tmp_path_factory.mktemp("trained") / "run"
    SSLTrainer(run_config(run)).train()
    assert len(list_checkpoints(run)) == 3
    return run


def run_config(run: Path) -> Any:
    return tiny_config(run, checkpoint={"keep_last": 4}, hooks={"tensorboard": {"enabled": False}})


def copy_with_newest_tampered(trained: Path, to: Path, tamper: Tamper) -> tuple[Path, Path]:
    """A copy of the run whose newest checkpoint is tampered with (its sidecar valid);
    the newest and the previous checkpoint."""
    shutil.copytree(trained, to, symlinks=True)
    *_, previous, newest = list_checkpoints(to)
    checkpoint = load_checkpoint(newest)
    tamper(checkpoint)
    save_atomic(checkpoint, newest)
    return newest, previous


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_newest_checkpoint_that_does_not_fit_is_skipped_for_the_previous_one(
    trained: Path, tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    tamper, problem = CASES[case]
    newest, previous = copy_with_newest_tampered(trained, tmp_path / "run", tamper)
    trainer = SSLTrainer(run_config(tmp_path / "run"))
    state = trainer.setup()
    assert state.resumed_from == str(previous)
    warnings = [line for line in caplog.text.splitlines() if "skipping checkpoint" in line]
    assert len(warnings) == 1
    assert f"skipping checkpoint {newest}: checkpoint {newest}" in warnings[0]
    assert problem in warnings[0]


@pytest.mark.slow
def test_the_run_goes_on_from_the_previous_checkpoint_to_the_end(
    trained: Path, tmp_path: Path
) -> None:
    copy_with_newest_tampered(trained, tmp_path / "run", put("hooks", "timing", 5))
    state = SSLTrainer(run_config(tmp_path / "run")).train()
    assert state.phase_idx == 3
    assert state.iteration == 6


@pytest.mark.slow
def test_a_run_whose_checkpoints_all_misfit_is_one_line_exit_2(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run, symlinks=True)
    for path in list_checkpoints(run):
        checkpoint = load_checkpoint(path)
        checkpoint["optimizer"]["param_groups"] = []
        save_atomic(checkpoint, path)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(config_to_yaml(run_config(run)))
    assert main(["train", str(recipe), "trainer.imports=[tests.tiny_data]", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"hookbus train: error: no valid checkpoint in {run}: ")
    assert err.count("optimizer.param_groups: 0 groups") == 3


def test_a_config_change_is_still_refused_as_one_before_the_contents(
    trained: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run, symlinks=True)
    wider = tiny_config(run, model={"backbone": {"width": 8}, "head": {"dims": [32, 16, 8]}})
    with pytest.raises(Exception, match="cannot change in a resumed run"):
        SSLTrainer(wider).setup()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (model_entry(lambda _: "weights"), "is str 'weights', not a tensor"),
        (model_entry(lambda w: w[:1]), "shape mismatch"),
        (model_entry(lambda w: w.long()), "torch.int64"),
        (lambda c: c["model"].pop(first_weight(c)), "missing keys"),
    ],
)
def test_export_refuses_weights_that_do_not_fit_the_backbone(
    trained: Path, tmp_path: Path, tamper: Tamper, problem: str
) -> None:
    newest, _ = copy_with_newest_tampered(trained, tmp_path / "run", tamper)
    with pytest.raises(CheckpointError, match=f"^checkpoint {newest} does not fit this model: "):
        export_backbone(newest, tmp_path / "out.pth")
    with pytest.raises(CheckpointError, match=problem):
        export_backbone(newest, tmp_path / "out.pth")
    assert not (tmp_path / "out.pth").exists()


@pytest.mark.slow
def test_export_of_a_misfit_checkpoint_is_one_line_exit_2(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newest, _ = copy_with_newest_tampered(trained, tmp_path / "run", model_entry(lambda _: 7))
    assert main(["export", str(newest), str(tmp_path / "out.pth")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hookbus export: error: checkpoint {newest} does not fit this model")
    assert len(err.splitlines()) == 1


@pytest.mark.slow
def test_an_untampered_run_exports_and_resumes_from_its_newest(
    trained: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run, symlinks=True)
    assert export_backbone(run / POINTER_NAME, tmp_path / "out.pth")
    state = SSLTrainer(run_config(run)).setup()
    assert state.resumed_from == str(list_checkpoints(run)[-1])
