"""The CUDA-cache hook: hands cached, unused GPU memory back to the driver periodically."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.run_stats import is_cuda
from hookbus.engine.config import CudaCacheConfig

if TYPE_CHECKING:
    from typing_extensions import Self


@register_hook("cuda_cache")
class CudaCacheHook(Hook):
    """Calls ``torch.cuda.empty_cache()`` every ``clear_freq`` train iterations.

    ===========  =====================================  ===================================
    event        reads                                  does
    ===========  =====================================  ===================================
    ``on_step``  ``train``, ``iteration``, ``device``   empties the CUDA caching allocator
                                                        when ``iteration % clear_freq == 0``
                                                        in a train phase on a CUDA device
    ===========  =====================================  ===================================

    Writes nothing to the run state. Useful when other processes share the GPU or memory
    fragments; it costs a little speed, as freed blocks must be allocated again. The
    trainer attaches it when ``cfg.model.cuda_cache.clear_cuda_cache`` is set.
    Priority 90: late in the step, after the hooks that report it.

    Example::

        CudaCacheHook(clear_freq=100).attach(trainer.engine)
    """

    priority = Priority.LOW

    def __init__(self, clear_freq: int) -> None:
        if clear_freq < 1:
            raise ValueError(f"clear_freq must be >= 1, got {clear_freq}")
        super().__init__()
        self.clear_freq = clear_freq

    @classmethod
    def from_section(cls, section: CudaCacheConfig) -> Self:
        """From its own section, ``model.cuda_cache``: clearing every ``clear_freq`` steps."""
        return cls(clear_freq=section.clear_freq)

    def on_step(self, engine: RunEngine) -> None:
        if self.every_n_train_iterations(engine, self.clear_freq) and is_cuda(engine.state.device):
            torch.cuda.empty_cache()
