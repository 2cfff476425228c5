"""Sharded models (``distributed.strategy: fsdp``) on PyTorch's FSDP2 (``fully_shard``).

Each rank keeps a slice of every parameter (a ``DTensor`` sharded on its first dimension),
of its gradient and of the optimizer's state; a unit's full parameters exist only during
its forward and backward. The units, sharded on their own, innermost first: every block of
a list of two or more modules of one class (a ViT's encoder blocks, a ResNet stage's
bottlenecks), then every child of the model with parameters (backbone, head, predictor,
prototypes), then the model itself.

Gradients are averaged over ranks as DDP averages them, and the buffers of the model
(BatchNorm statistics) are broadcast from rank 0 before each forward, as DDP
does: two ranks train the same weights as DDP within float tolerance
(tests/integration/test_fsdp.py). ``model.amp`` maps to FSDP's mixed precision: parameters cast to
the autocast dtype for forward and backward (gathered in it: half the traffic), gradients
reduced and kept in float32; a unit holding BatchNorm keeps float32 parameters, its layers
run in the autocast dtype by autocast alone, as under DDP.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import (
    FSDPModule,
    MixedPrecisionPolicy,
    fully_shard,
    register_fsdp_forward_method,
)
from torch.distributed.tensor import DTensor

from hookbus.engine.errors import ConfigError
from hookbus.parts.config import Config

_TEMPLATES: weakref.WeakKeyDictionary[nn.Module, tuple[nn.Module, list[str], Any]] = (
    weakref.WeakKeyDictionary()
)
"""For each sharded model: its structure on the meta device (no memory), the names of its
units, and its mixed-precision policy; :func:`sharded_copy` builds another from them."""


def check_strategy(cfg: Config) -> None:
    """Raise a ConfigError naming an option that ``distributed.strategy: fsdp`` cannot
    honour: asynchronous checkpoint writes (``checkpoint.async_write``; the shards are
    written by every rank, in parallel, at the step), ``model.compile`` (not tested with
    sharded parameters), fp16 autocast (its GradScaler does not unscale sharded
    gradients: use bf16) and ``distributed.sync_batch_norm``."""
    if cfg.distributed.strategy != "fsdp":
        return
    amp = cfg.model.amp
    for key, refused, what in (
        ("checkpoint.async_write", cfg.checkpoint.async_write, "every rank writes its shards"),
        ("model.compile.enabled", cfg.model.compile.enabled, "not tested on sharded parameters"),
        (
            "model.amp.dtype",
            amp.enabled and amp.dtype == "fp16",
            "fp16 needs a GradScaler over sharded gradients; use model.amp.dtype=bf16",
        ),
        (
            "distributed.sync_batch_norm",
            cfg.distributed.sync_batch_norm,
            "buffers are broadcast from rank 0 instead",
        ),
    ):
        if refused:
            raise ConfigError(f"{key}: distributed.strategy fsdp cannot take it ({what})")


def mixed_precision(amp_dtype: torch.dtype | None) -> MixedPrecisionPolicy:
    """FSDP's policy for the run's autocast dtype: parameters in that dtype for forward and
    backward, gradients reduced in float32 (no autocast: all in float32)."""
    if amp_dtype is None:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=amp_dtype, reduce_dtype=torch.float32)


FORWARD_METHODS = ("encode", "tokens", "visible_tokens", "forward_features")
"""Methods that callers use in place of a module's forward (a model's ``encode``, a ViT's
``tokens``, called on the backbone by iBOT's and DINOv2's model and its teacher,
``visible_tokens``, and timm's ``forward_features``, which distillation's dense loss
reads): on a sharded unit that has one, it gathers the unit's parameters as its forward
does."""


def shard_model(model: nn.Module, amp_dtype: torch.dtype | None) -> nn.Module:
    """Shard ``model`` in place over the ranks of the default process group (see the
    module's docstring for the units); returns it. A unit's :data:`FORWARD_METHODS`
    gather its parameters as its forward does."""
    template = _meta_copy(model)
    policy = mixed_precision(amp_dtype)
    units = _unit_names(model)
    _shard(model, units, policy)
    model.register_forward_pre_hook(_broadcast_buffers)
    _TEMPLATES[model] = (template, units, policy)
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` was sharded by :func:`shard_model`."""
    return model in _TEMPLATES


def sharded_copy(model: nn.Module, *, without: Iterable[str] = ()) -> nn.Module:
    """A copy of the sharded ``model``, sharded the same way, its local shards and buffers
    copied from this rank's (no gather); the children named in ``without`` set to None.
    No buffer broadcast: the copy (a momentum teacher) keeps its own statistics."""
    template, units, policy = _TEMPLATES[model]
    twin = copy.deepcopy(template)
    for name in without:
        setattr(twin, name, None)
    device = next(iter(model.parameters())).device
    twin.to_empty(device=device)
    kept = [unit for unit in units if unit.split(".")[0] not in set(without)]
    _shard(twin, kept, policy)
    own = dict(model.named_parameters()) | dict(model.named_buffers())
    with torch.no_grad():
        for name, tensor in [*twin.named_parameters(), *twin.named_buffers()]:
            local(tensor).copy_(local(own[name]))
    return twin


def local(tensor: Tensor) -> Tensor:
    """This rank's shard of a ``DTensor``; any other tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def load_weights(module: nn.Module, weights: Mapping[str, Tensor]) -> None:
    """``module.load_state_dict(weights)``, also when ``module`` is sharded and the weights
    are whole tensors (each rank keeps its slice of them)."""
    sharded = isinstance(module, FSDPModule) or any(
        isinstance(p, DTensor) for p in module.parameters()
    )
    if not sharded or any(isinstance(value, DTensor) for value in weights.values()):
        module.load_state_dict(weights)
        return
    set_model_state_dict(module, dict(weights), options=StateDictOptions(full_state_dict=True))


def _shard(model: nn.Module, units: list[str], policy: MixedPrecisionPolicy) -> None:
    """``fully_shard`` each unit, then ``model``; a unit holding BatchNorm keeps float32
    parameters (its running statistics are float32; autocast still runs its layers in
    the autocast dtype). Each unit's :data:`FORWARD_METHODS` are registered with FSDP."""
    for module in [*(model.get_submodule(name) for name in units), model]:
        norm = any(isinstance(part, nn.modules.batchnorm._BatchNorm) for part in module.modules())
        fully_shard(module, mp_policy=MixedPrecisionPolicy() if norm else policy)
        for method in FORWARD_METHODS:
            if callable(getattr(module, method, None)):
                register_fsdp_forward_method(module, method)


def _unit_names(model: nn.Module) -> list[str]:
    """The names of the units, deepest first (a unit's blocks before the unit)."""
    names: set[str] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Sequential | nn.ModuleList) and len(module) >= 2:
            blocks = dict(module.named_children())
            kinds = {type(block) for block in blocks.values()}
            if len(kinds) == 1 and all(map(_has_parameters, blocks.values())):
                prefix = f"{name}." if name else ""
                names.update(f"{prefix}{block}" for block in blocks)
    names.update(name for name, child in model.named_children() if _has_parameters(child))
    return sorted(names, key=lambda name: (-name.count("."), name))


def _has_parameters(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _meta_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose tensors are on the meta device: no memory, no copying."""
    memo: dict[int, torch.Tensor] = {}
    for tensor in model.parameters():
        memo[id(tensor)] = nn.Parameter(
            torch.empty_like(tensor, device="meta"), requires_grad=tensor.requires_grad
        )
    for buffer in model.buffers():
        memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    return copy.deepcopy(model, memo)


def _broadcast_buffers(module: nn.Module, args: Any) -> None:
    """Before each forward: rank 0's buffers on every rank, as DDP does."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        for buffer in module.buffers():
            dist.broadcast(buffer, 0)
