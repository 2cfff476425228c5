"""Whether a checkpoint's contents fit the run that would resume from it.

The checksum proves a file is the one hookbus wrote; it says nothing of whether what it
holds fits this run (a file written by hand, by another tool, or by a buggy handler with
a valid sidecar). :func:`check_checkpoint_contents` compares every section with what the
run expects, before anything is restored, and raises :class:`CheckpointError` naming the
section: auto-resume then skips the file with a warning and tries the previous one, as
for a failed checksum (:func:`hookbus.engine.checkpoint.checkpoint_io.newest_valid_checkpoint`).

============  =================================================================
section       must be
============  =================================================================
config        a mapping (compared key by key with the run's: refused changes are
              a :class:`ConfigError`, a user error, not a skipped file)
counters      ints within the run's phase plan: ``phase_idx`` a phase of it,
              ``train_phase_idx``, ``iteration``, ``iteration_num``,
              ``phase_batches`` no more than the phases up to it hold
model, loss   the module's keys, each a tensor of its shape and dtype
optimizer     as many non-empty parameter groups as the optimizer's, each with as
              many parameters, its settings of the optimizer's types (numbers stay
              numbers);
              state for those parameters only, tensors scalar or shaped like
              their parameter, no strings
scaler,       shaped as the run's own ``state_dict()``: mappings where it has
hooks,        mappings, tensors of its shapes, numbers where it has numbers (so
meters        ``hooks.timing=5`` is refused)
rng           python's ``(3, 625 ints, gauss)``, numpy's MT19937 state, torch's
              uint8 state of the length this torch uses
stopped_by    None or a string; ``phase_done`` a bool
============  =================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_io import COUNTER_KEYS
from hookbus.engine.config.config_changes import (
    check_epochs,
    check_world_size,
    config_changes,
    elastic_resume,
    saved_world_size,
)
from hookbus.engine.errors import CheckpointError

logger = logging.getLogger("hookbus")

Number = (int, float)
"""Types a number of a state may be saved as (``bool`` is an ``int``)."""

_MT_WORDS = 624
"""Words of the Mersenne Twister state (python's and numpy's)."""


class _Misfit(Exception):
    """One problem in one section: ``section`` and what is wrong with it."""

    def __init__(self, section: str, problem: str) -> None:
        super().__init__(f"{section}: {problem}")
        self.section, self.problem = section, problem


def check_checkpoint_contents(
    state: RunState, checkpoint: dict[str, Any], source: str
) -> list[str]:
    """Check that ``checkpoint`` (as
    :func:`~hookbus.engine.checkpoint.checkpoint_io.load_checkpoint` returned it) fits the run
    of ``state`` (a prepared ``RunState``: model, optimizer, hooks, meters and phase plan
    built); returns its config changes, lines ``key: old -> new``, to log.

    Raises :class:`ConfigError` when the run's config changed in a way a resumed run cannot
    take (or trains fewer epochs, or runs on another number of processes), and
    :class:`CheckpointError` naming ``source`` and the section that does not fit.
    """
    try:
        saved_config = checkpoint.get("config")
        if saved_config is not None and not isinstance(saved_config, Mapping):
            raise _Misfit("config", f"must be a mapping, not {_kind(saved_config)}")
        world_size = checkpoint.get("world_size", 1)
        if type(world_size) is not int or world_size < 1:
            raise _Misfit("world_size", f"must be an int >= 1, not {_kind(world_size)}")
        for key in COUNTER_KEYS:
            if key in checkpoint and type(checkpoint[key]) is not int:
                raise _Misfit(key, f"must be an int, not {_kind(checkpoint[key])}")
        mid_phase = not checkpoint.get("phase_done", True)
        elastic = elastic_resume(checkpoint, state.cfg, state.world_size)
        changes = config_changes(
            dict(saved_config or {}),
            state.cfg,
            mid_phase=mid_phase,
            source=source,
            elastic=elastic and saved_world_size(checkpoint) != state.world_size,
        )
        check_epochs(checkpoint, state.cfg, source)
        resumed_elsewhere = check_world_size(checkpoint, state.cfg, state.world_size, source)
        if resumed_elsewhere is not None:
            logger.warning("%s", resumed_elsewhere)
        _check_counters(state, checkpoint, mid_phase)
        _check_modules(state, checkpoint, mid_phase)
        _check_optimizer(state.optimizer, checkpoint["optimizer"])
        _check_rng(checkpoint.get("rng"))
    except _Misfit as misfit:
        raise CheckpointError(_message(source, misfit)) from None
    return changes


def contents_check(state: RunState) -> Callable[[Path, dict[str, Any]], list[str]]:
    """:func:`check_checkpoint_contents` for the run of ``state``, as
    :func:`~hookbus.engine.checkpoint.checkpoint_io.newest_valid_checkpoint` calls its ``check``."""
    return lambda path, checkpoint: check_checkpoint_contents(state, checkpoint, str(path))


def _message(source: str, misfit: _Misfit) -> str:
    if misfit.section == "model":
        return f"checkpoint {source} does not fit this model: {misfit.problem}"
    return f"checkpoint {source} does not fit this run: {misfit}"


def _check_counters(state: RunState, checkpoint: dict[str, Any], mid_phase: bool) -> None:
    """The counters, within the phase plan. Test phases may have changed length at a
    phase boundary (``data.test_batch_size``), so counts of test steps are bounded only
    inside a phase."""
    for key, kinds in (
        ("phase_done", bool),
        ("phase_kind", str),
        ("stopped_by", (str, type(None))),
    ):
        if key in checkpoint and not isinstance(checkpoint[key], kinds):
            raise _Misfit(key, f"must be a {_names(kinds)}, not {_kind(checkpoint[key])}")
    loss_sum = checkpoint.get("loss_sum")
    if loss_sum is not None and not (isinstance(loss_sum, Tensor) and loss_sum.numel() == 1):
        raise _Misfit("loss_sum", f"must be a one-number tensor or None, not {_kind(loss_sum)}")
    phases = state.phases
    if state.cfg.trainer.test_only:
        return
    phase_idx = checkpoint["phase_idx"]
    if not 0 <= phase_idx < len(phases):
        raise _Misfit("phase_idx", f"{phase_idx} is not a phase of this run's {len(phases)}")
    done = phases[: phase_idx + 1]
    bounds = {
        "train_phase_idx": (-1, sum(phase.train for phase in done) - 1),
        "iteration": (0, sum(phase.length for phase in done if phase.train)),
        "iteration_num": (0, None),
        "phase_batches": (0, phases[phase_idx].length if mid_phase else None),
        "updates": (0, None),
    }
    for key, (low, high) in bounds.items():
        value = checkpoint.get(key, low)
        if value < low or (high is not None and value > high):
            within = f"{low}..{high}" if high is not None else f">= {low}"
            raise _Misfit(key, f"{value} is outside {within}, what phase {phase_idx} allows")


def _check_modules(state: RunState, checkpoint: dict[str, Any], mid_phase: bool) -> None:
    """The model's and the loss's weights; the scaler's, hooks' and meters' states."""
    _check_weights("model", checkpoint["model"], state.base_model.state_dict())
    if state.loss_fn is not None:
        _check_weights("loss", checkpoint.get("loss", {}), state.loss_fn.state_dict())
    if state.scaler is not None and checkpoint.get("scaler") is not None:
        _check_like("scaler", checkpoint["scaler"], state.scaler.state_dict())
    saved_hooks = checkpoint["hooks"]
    for hook in state.hooks:
        if hook.has_state() and hook.name in saved_hooks:
            _check_like(f"hooks.{hook.name}", saved_hooks[hook.name], hook.state_dict())
    if mid_phase:
        saved_meters = checkpoint.get("meters", {})
        if not isinstance(saved_meters, Mapping):
            raise _Misfit("meters", f"must be a mapping, not {_kind(saved_meters)}")
        for meter in state.meters:
            if meter.name in saved_meters:
                _check_like(f"meters.{meter.name}", saved_meters[meter.name], meter.state_dict())


def check_weights(
    section: str, saved: Any, expected: Mapping[str, Any] | None, source: str
) -> None:
    """Raise :class:`CheckpointError` unless ``saved`` has exactly the keys of the state
    dict ``expected``, each a tensor of its shape and dtype; with ``expected`` None (a
    module hookbus cannot build: one given from Python), unless every entry is a tensor.
    ``hookbus export`` checks the weights it writes with it."""
    try:
        if expected is None:
            _check_tensors(section, saved)
        else:
            _check_weights(section, saved, expected)
    except _Misfit as misfit:
        raise CheckpointError(_message(source, misfit)) from None


def _check_tensors(section: str, saved: Any) -> None:
    if not isinstance(saved, Mapping):
        raise _Misfit(section, f"must be a mapping of tensors, not {_kind(saved)}")
    for key, value in saved.items():
        if not isinstance(value, Tensor):
            raise _Misfit(section, f"{key} is {_kind(value)}, not a tensor")


def _check_weights(section: str, saved: Any, expected: Mapping[str, Any]) -> None:
    if not isinstance(saved, Mapping):
        raise _Misfit(section, f"must be a mapping of tensors, not {_kind(saved)}")
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(str(key) for key in set(saved) - set(expected))
    problems = []
    if missing:
        problems.append(f"missing keys {missing[:8]}")
    if unexpected:
        problems.append(f"unexpected keys {unexpected[:8]}")
    shapes = []
    for key in sorted(set(expected) & set(saved)):
        own, value = expected[key], saved[key]
        if not isinstance(own, Tensor):
            continue
        if not isinstance(value, Tensor):
            problems.append(f"{key} is {_kind(value)}, not a tensor")
        elif value.shape != own.shape:
            shapes.append(f"{key}: {tuple(value.shape)} vs {tuple(own.shape)}")
        elif value.dtype != own.dtype:
            problems.append(f"{key} is {value.dtype}, the model's {own.dtype}")
    if shapes:
        problems.append(f"shape mismatch {shapes[:8]}")
    if problems:
        raise _Misfit(section, "; ".join(problems[:8]))


def _check_like(where: str, saved: Any, own: Any) -> None:
    """``saved`` has the structure of ``own`` (the live object's state): a mapping where it
    has one (keys it lacks are left to its ``load_state_dict``), a tensor (of the same
    shape and dtype, unless the live one is empty: a queue not filled yet), a number, a
    string, a sequence. None on either side passes."""
    if own is None or saved is None:
        return
    if isinstance(own, Mapping):
        if not isinstance(saved, Mapping):
            raise _Misfit(where, f"must be a mapping, not {_kind(saved)}")
        for key in own:
            if key in saved:
                _check_like(f"{where}.{key}", saved[key], own[key])
    elif isinstance(own, Tensor):
        if not isinstance(saved, Tensor):
            raise _Misfit(where, f"must be a tensor, not {_kind(saved)}")
        if own.numel() and (saved.shape != own.shape or saved.dtype != own.dtype):
            raise _Misfit(
                where,
                f"is {saved.dtype} {tuple(saved.shape)}, the run's {own.dtype} {tuple(own.shape)}",
            )
    elif isinstance(own, Number):
        if not isinstance(saved, Number):
            raise _Misfit(where, f"must be a number, not {_kind(saved)}")
    elif isinstance(own, str):
        if not isinstance(saved, str):
            raise _Misfit(where, f"must be a string, not {_kind(saved)}")
    elif isinstance(own, Sequence) and (
        isinstance(saved, str) or not isinstance(saved, Sequence | Tensor)
    ):
        raise _Misfit(where, f"must be a sequence, not {_kind(saved)}")


def _check_optimizer(optimizer: torch.optim.Optimizer, saved: Any) -> None:
    """The optimizer's state against its parameters (see the module's table)."""
    if not isinstance(saved, Mapping) or not isinstance(saved.get("state"), Mapping):
        raise _Misfit("optimizer", "must be a mapping with 'state' and 'param_groups'")
    groups = saved.get("param_groups")
    own_groups = optimizer.state_dict()["param_groups"]
    if not isinstance(groups, Sequence) or len(groups) != len(own_groups):
        count = len(groups) if isinstance(groups, Sequence) else _kind(groups)
        raise _Misfit(
            "optimizer.param_groups", f"{count} groups, the optimizer has {len(own_groups)}"
        )
    params: dict[Any, Tensor] = {}
    for index, (group, own, live) in enumerate(
        zip(groups, own_groups, optimizer.param_groups, strict=True)
    ):
        where = f"optimizer.param_groups[{index}]"
        ids = group.get("params") if isinstance(group, Mapping) else None
        if (
            not isinstance(ids, Sequence)
            or len(ids) != len(own["params"])
            or not all(type(param_id) is int for param_id in ids)
        ):
            got = len(ids) if isinstance(ids, Sequence) else _kind(ids)
            raise _Misfit(where, f"{got} parameters, the optimizer has {len(own['params'])}")
        for key, value in own.items():
            if key != "params" and key in group:  # a setting added since: as torch loads it
                _check_like(f"{where}.{key}", group[key], value)
        params.update(zip(ids, live["params"], strict=True))
    for param_id, values in saved["state"].items():
        where = f"optimizer.state[{param_id!r}]"
        if param_id not in params:
            raise _Misfit(where, "is for no parameter of the optimizer's groups")
        if not isinstance(values, Mapping):
            raise _Misfit(where, f"must be a mapping, not {_kind(values)}")
        param = params[param_id]
        for name, value in values.items():
            if isinstance(value, Tensor):
                if value.dim() and value.shape != param.shape:
                    raise _Misfit(
                        f"{where}.{name}",
                        f"is {tuple(value.shape)}, its parameter {tuple(param.shape)}",
                    )
                if value.dim() and not value.is_floating_point():
                    raise _Misfit(f"{where}.{name}", f"is {value.dtype}, not floating point")
            elif value is not None and not isinstance(value, Number):
                raise _Misfit(
                    f"{where}.{name}", f"must be a tensor or a number, not {_kind(value)}"
                )


def _check_rng(states: Any) -> None:
    """The random generators' states, as ``random.setstate``, ``np.random.set_state`` and
    ``torch.set_rng_state`` take them (None or absent: an old checkpoint, left as is)."""
    if not states:
        return
    if not isinstance(states, Mapping):
        raise _Misfit("rng", f"must be a mapping, not {_kind(states)}")
    python = states.get("python")
    if not (
        isinstance(python, Sequence)
        and len(python) == 3
        and type(python[0]) is int
        and _words(python[1], _MT_WORDS + 1)
        and python[1][-1] <= _MT_WORDS
        and (python[2] is None or isinstance(python[2], float))
    ):
        raise _Misfit("rng.python", "must be (version, 625 ints, gauss) as random.getstate()")
    numpy = states.get("numpy")
    if not (
        isinstance(numpy, Sequence)
        and len(numpy) == 5
        and numpy[0] == "MT19937"
        and isinstance(numpy[1], Tensor)
        and numpy[1].dtype == torch.int64
        and tuple(numpy[1].shape) == (_MT_WORDS,)
        and bool(((numpy[1] >= 0) & (numpy[1] < 2**32)).all())
        and type(numpy[2]) is int
        and 0 <= numpy[2] <= _MT_WORDS
        and type(numpy[3]) is int
        and isinstance(numpy[4], Number)
    ):
        raise _Misfit("rng.numpy", "must be numpy's MT19937 state (624 words, position)")
    expected = torch.get_rng_state()
    saved = states.get("torch")
    if not (
        isinstance(saved, Tensor) and saved.dtype == torch.uint8 and saved.shape == expected.shape
    ):
        got = f"{saved.dtype} {tuple(saved.shape)}" if isinstance(saved, Tensor) else _kind(saved)
        raise _Misfit("rng.torch", f"must be uint8 {tuple(expected.shape)}, not {got}")
    cuda = states.get("cuda")
    if cuda is not None and not (
        isinstance(cuda, Sequence)
        and all(isinstance(s, Tensor) and s.dtype == torch.uint8 for s in cuda)
    ):
        raise _Misfit("rng.cuda", "must be a list of uint8 tensors")


def _words(values: Any, count: int) -> bool:
    """Whether ``values`` is a sequence of ``count`` ints, each a 32-bit word."""
    return (
        isinstance(values, Sequence)
        and len(values) == count
        and all(type(v) is int and 0 <= v < 2**32 for v in values)
    )


def _kind(value: Any) -> str:
    """``value``'s type and a short excerpt, for a message."""
    return f"{type(value).__name__} {str(value)[:40]!r}"


def _names(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join("None" if kind is type(None) else kind.__name__ for kind in kinds)
