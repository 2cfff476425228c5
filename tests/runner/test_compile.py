"""model.compile: the step calls the compiled forward; checkpoints, exports and hooks
hold the plain module, and resume is exact.

The runs compile with torch's ``eager`` backend: dynamo captures the forward and
``torch.compile``'s wrapper stands where inductor's would, so the wrapper stripping and
resume are the same code, at a cost of seconds. Inductor itself compiles the C++
kernels of a graph with the system compiler, which took 35 s and more on the 2 loaded
cores this suite runs on, even for a one-Linear model (more than the ~20 s a test file
may take); ``benchmarks/bench_compile.py`` trains with it, and its machinery is run on
the eager backend by tests/integration/test_benchmarks.py.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from hookbus import RunState, SSLTrainer, default_hooks
from hookbus.engine.errors import PreemptedError
from hookbus.export import export_backbone
from hookbus.parts.models import SmallCNN
from tests.bad_inputs import BadInput, run_case
from tests.conftest import tiny_config
from tests.integration.test_preemption import SignalAt

QUIET_HOOKS = {name: {"enabled": False} for name in ("progress_bar", "summary_plot", "tensorboard")}


def config(
    run_dir: Path,
    compiled: bool,
    model: dict | None = None,
    backend: str = "eager",
    **sections: dict,
) -> Any:
    """The tiny test config (1 epoch: 3 train steps, then a test phase), compiled with
    ``backend`` or not; on one thread and without the plot and TensorBoard hooks,
    which cost most of such a run's time on a loaded machine."""
    model = {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}, **(model or {})}
    if compiled:
        model["compile"] = {"enabled": True, "backend": backend}
    sections.setdefault("optimizer", {"num_epochs": 1, "warmup_epochs": 0})
    sections.setdefault("machine", {"num_threads": 1})
    sections.setdefault("hooks", QUIET_HOOKS)
    return tiny_config(run_dir, model=model, **sections)


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in module.state_dict().items()}


def last_checkpoint(run_dir: Path) -> dict[str, Any]:
    return torch.load(run_dir / "checkpoint.torch", weights_only=True)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, RunState]:
    """The states of an uninterrupted plain run and compiled run."""
    runs = {}
    for compiled in (False, True):
        run_dir = tmp_path_factory.mktemp("straight") / ("compiled" if compiled else "plain")
        runs[compiled] = SSLTrainer(config(run_dir, compiled)).train()
        assert runs[compiled].iteration == 3
    return runs


@pytest.fixture(scope="module")
def preempted(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """Run directories of a plain and a compiled run stopped after train iteration 2,
    inside phase 0, as a preemption stops them."""
    runs = {}
    for compiled in (False, True):
        run_dir = tmp_path_factory.mktemp("preempted") / ("compiled" if compiled else "plain")
        cfg = config(run_dir, compiled)
        with pytest.raises(PreemptedError, match=r"in phase 1/\d+ after step 2 "):
            SSLTrainer(cfg, hooks=[*default_hooks(cfg), SignalAt(2)]).train()
        runs[compiled] = run_dir
    return runs


def test_the_step_calls_the_compiled_forward_and_hooks_see_the_plain_module(
    straight: dict[bool, RunState],
) -> None:
    state = straight[True]
    assert type(state.model).__name__ == "OptimizedModule"
    assert state.model._orig_mod is state.base_model
    assert not hasattr(state.base_model, "_orig_mod")
    parameters = {id(p) for p in state.base_model.parameters()}
    optimized = {id(p) for group in state.optimizer.param_groups for p in group["params"]}
    assert optimized == parameters
    assert not state.base_model.training  # the last phase was a test phase, in eval mode
    assert type(straight[False].model).__name__ == "SSLModel"


def test_a_compiled_run_checkpoints_the_keys_of_a_plain_run(
    straight: dict[bool, RunState],
) -> None:
    plain, compiled = (last_checkpoint(straight[c].run_dir) for c in (False, True))
    assert list(compiled["model"]) == list(plain["model"])
    assert not [key for key in compiled["model"] if "_orig_mod" in key]
    assert compiled["config"]["model"]["compile"]["enabled"] is True
    model = copy.deepcopy(straight[False].base_model)
    model.load_state_dict(compiled["model"], strict=True)


def test_a_compiled_run_exports_what_a_plain_one_does(
    straight: dict[bool, RunState], tmp_path: Path
) -> None:
    exported = {
        compiled: export_backbone(
            straight[compiled].run_dir / "checkpoint.torch", tmp_path / f"{compiled}.pth"
        )
        for compiled in (False, True)
    }
    assert list(exported[True]) == list(exported[False])
    backbone = SmallCNN(width=4)
    backbone.load_state_dict(torch.load(tmp_path / "True.pth", weights_only=True), strict=True)


def test_the_compiled_forward_trains_as_the_plain_one(straight: dict[bool, RunState]) -> None:
    plain, compiled = (weights(straight[c].base_model) for c in (False, True))
    for key, value in plain.items():
        torch.testing.assert_close(compiled[key], value, rtol=1e-4, atol=1e-6, msg=key)


def resume(preempted: Path, run_dir: Path, compiled: bool) -> RunState:
    """Resume a copy of the ``preempted`` run directory, compiled or not."""
    shutil.copytree(preempted, run_dir)
    state = SSLTrainer(config(run_dir, compiled)).train()
    assert state.iteration == 3 and state.resumed_from is not None
    return state


def test_a_compiled_run_preempted_mid_phase_resumes_bit_exactly(
    straight: dict[bool, RunState], preempted: dict[bool, Path], tmp_path: Path
) -> None:
    resumed = resume(preempted[True], tmp_path / "run", compiled=True)
    expected = weights(straight[True].base_model)
    assert all(torch.equal(expected[k], v) for k, v in weights(resumed.base_model).items())


def test_aot_autograd_resumes_bit_exactly(straight: dict[bool, RunState], tmp_path: Path) -> None:
    """The aot_eager backend traces the backward too (AOT autograd, as inductor does
    before it generates code): compiled against compiled, the resumed run is exact."""
    whole = SSLTrainer(config(tmp_path / "whole", True, backend="aot_eager")).train()
    cfg = config(tmp_path / "run", True, backend="aot_eager")
    with pytest.raises(PreemptedError, match=r"in phase 1/\d+ after step 2 "):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), SignalAt(2)]).train()
    resumed = SSLTrainer(cfg).train()
    expected = weights(whole.base_model)
    assert all(torch.equal(expected[k], v) for k, v in weights(resumed.base_model).items())
    plain = weights(straight[False].base_model)
    for key, value in expected.items():
        torch.testing.assert_close(value, plain[key], rtol=1e-4, atol=1e-6, msg=key)


@pytest.mark.parametrize("compiled_first", [True, False])
def test_a_checkpoint_resumes_with_compiling_switched(
    straight: dict[bool, RunState],
    preempted: dict[bool, Path],
    tmp_path: Path,
    compiled_first: bool,
) -> None:
    resumed = resume(preempted[compiled_first], tmp_path / "run", not compiled_first)
    assert (type(resumed.model).__name__ == "OptimizedModule") is not compiled_first
    expected = weights(straight[not compiled_first].base_model)
    for key, value in weights(resumed.base_model).items():
        torch.testing.assert_close(value, expected[key], rtol=1e-4, atol=1e-6, msg=key)


def test_the_momentum_teacher_is_a_copy_of_the_plain_module(tmp_path: Path) -> None:
    cfg = config(
        tmp_path / "run",
        True,
        model={"predictor": {"dims": [8, 16, 8]}},
        loss={"name": "byol"},
        trainer={"test_model": False},
    )
    trainer = SSLTrainer(cfg)
    state = trainer.train()
    hook = next(hook for hook in trainer.hooks if hook.name == "momentum_teacher")
    teacher = hook.teacher
    assert isinstance(teacher, type(state.base_model)) and teacher is not state.base_model
    saved = last_checkpoint(tmp_path / "run")["hooks"]["momentum_teacher"]
    assert not [key for key in _keys(saved) if "_orig_mod" in key]
    assert any(key.startswith("backbone.") for key in _keys(saved))


def _keys(tree: Any) -> list[str]:
    """Every key of the nested dicts in ``tree``."""
    if not isinstance(tree, dict):
        return []
    return [k for key, value in tree.items() for k in (str(key), *_keys(value))]


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (("model.compile.backend=no_such_backend",), "model.compile.backend"),
        (
            ("model.compile.backend=eager", "model.compile.mode=max-autotune"),
            "mode max-autotune is an inductor setting",
        ),
        (("model.compile.mode=reduce-overhead", "machine.device=cpu"), "model.compile"),
        (("model.compile.backend=cudagraphs", "machine.device=cpu"), "model.compile"),
        (("model.compile.mode=fast",), "model.compile.mode"),
        (("model.compile.dynamic=sometimes",), "model.compile.dynamic"),
        (("model.compile.backend=../x",), "model.compile.backend"),
    ],
)
def test_validate_refuses_what_compiling_cannot_honour(
    tmp_path: Path, overrides: tuple[str, ...], names: str
) -> None:
    case = BadInput("compile", ("model.compile.enabled=true", *overrides), names)
    outcome = run_case(case, tmp_path)
    assert outcome.refused_cleanly(case), outcome
