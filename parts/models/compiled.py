"""``model.compile``: the forward of a run's model through ``torch.compile``.

Only the module the step calls (``state.model``) is compiled; ``torch.compile`` returns
a wrapper around it and leaves the module itself as it was. The module that owns the
parameters (``state.base_model``) is what checkpoints, exports, the optimizer and every
hook see, so no ``_orig_mod.`` prefix reaches a file, and a copy of it (a momentum
teacher) is a plain module.
"""

from __future__ import annotations

import importlib.util
from typing import cast

import torch
from torch import nn

from hookbus.engine.config import CompileConfig
from hookbus.engine.errors import ConfigError
from hookbus.parts.config import Config

NEEDS_CUDA = {"cudagraphs": "backend cudagraphs", "reduce-overhead": "mode reduce-overhead"}
"""Settings that record CUDA graphs, by backend or mode name: they need a CUDA device."""

NEEDS_PACKAGE = {"tvm": "tvm", "openxla": "torch_xla", "openxla_eval": "torch_xla"}
"""In-tree backends that import another package when they compile, by backend name."""


def trains_on_cuda(cfg: Config) -> bool:
    """Whether the run's ``machine.device`` resolves to a CUDA device."""
    device = cfg.machine.device
    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


def check_compile(cfg: Config) -> None:
    """Raise a ConfigError when ``model.compile`` is enabled with a setting this
    process cannot honour: a backend torch does not know (the modules of
    ``trainer.imports`` are imported before, so a backend they register counts), one
    whose package is not installed, or CUDA graphs without a CUDA device.

    Nothing is checked when compiling is off: listing torch's backends imports
    ``torch._dynamo``, which takes seconds.
    """
    settings = cfg.model.compile
    if not settings.enabled:
        return
    # Imported here, not at the top: seconds of import that a run without
    # model.compile should not pay.
    from torch._dynamo import list_backends

    known = list_backends(exclude_tags=())
    if settings.backend not in known:
        raise ConfigError(
            f"model.compile.backend: torch.compile has no backend {settings.backend!r}; "
            f"known: {', '.join(known)} (a module in trainer.imports may register more "
            "with torch._dynamo.register_backend)"
        )
    package = NEEDS_PACKAGE.get(settings.backend)
    if package is not None and importlib.util.find_spec(package) is None:
        raise ConfigError(
            f"model.compile.backend {settings.backend} needs the {package} package, which "
            "is not installed: install it, or use backend inductor"
        )
    for name in (settings.backend, settings.mode):
        if name in NEEDS_CUDA and not trains_on_cuda(cfg):
            raise ConfigError(
                f"model.compile: {NEEDS_CUDA[name]} records CUDA graphs, and this run "
                f"trains on the CPU (machine.device {cfg.machine.device}): use mode "
                "default or max-autotune-no-cudagraphs with backend inductor"
            )


def compile_forward(model: nn.Module, settings: CompileConfig) -> nn.Module:
    """``model`` (the plain module, or its DDP wrapper) behind ``torch.compile`` with
    ``settings``' backend, mode, dynamic and fullgraph; ``model`` itself is not changed.

    Compiling happens at the first call, and again for each new kind of call (eval mode
    in a test phase, another input size while ``dynamic`` is None). A DDP wrapper is
    compiled whole, so that torch splits the graph at DDP's gradient buckets.
    """
    compiled = torch.compile(
        model,
        backend=settings.backend,
        mode=settings.mode,
        dynamic=settings.dynamic,
        fullgraph=settings.fullgraph,
    )
    return cast(nn.Module, compiled)  # a module compiled is a module (OptimizedModule)


def uncompiled(model: nn.Module) -> nn.Module:
    """The module behind a ``torch.compile`` wrapper; ``model`` itself when it has none."""
    return getattr(model, "_orig_mod", model)
