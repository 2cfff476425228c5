"""UnreadableImagesHook: the images a run skipped, counted, listed and bounded."""

from __future__ import annotations

import logging
from collections.abc import Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.checkpoint.checkpoint_io import write_text_atomic
from hookbus.engine.errors import RESUME_HINT, DataError, writing
from hookbus.parts.config import Config
from hookbus.parts.data.unreadable import UNREADABLE_KEY

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("hookbus")

UNREADABLE_FILE = "unreadable_images.txt"
"""The list of skipped images in the run directory: one line each, why it was skipped."""


@register_hook("unreadable_images")
class UnreadableImagesHook(Hook):
    """Counts the images skipped with ``data.folder.skip_unreadable``, lists them in
    ``run_dir/unreadable_images.txt``, stops the run past a bound and says how many at
    the end.

    ===============  ===========================================  ========================
    event            reads                                        writes
    ===============  ===========================================  ========================
    ``on_step``      ``last_batch["unreadable"]`` (the lines of   ``unreadable_images.txt``
                     the images its batch skipped), ``rank``,     (rank 0, rewritten
                     ``run_dir``, the train loader's data set     atomically when a new
                     size                                         image is skipped)
    ``on_end``       ``run_dir``                                  ``summary["unreadable
                                                                  images"]``, a warning line
    ===============  ===========================================  ========================

    An image is counted once however often it is met (every epoch, train and test). The
    first is logged as it is skipped; past ``max_count`` images, or past ``max_fraction``
    of the train images, the run stops with one line
    (:class:`~hookbus.engine.errors.DataError`, exit status 2) naming the bound, the
    list and the last image, its last checkpoint intact. The list is carried in
    checkpoints, so a resumed run goes on counting. In a run of several processes each
    counts the images of its own batches against the bounds, and rank 0 lists its own.

    Example::

        UnreadableImagesHook(max_count=10, max_fraction=0.001).attach(trainer.engine)
    """

    priority = Priority.REPORT

    def __init__(
        self,
        max_count: int | None = None,
        max_fraction: float = 0.01,
        *,
        name: str | None = None,
        priority: int | None = None,
    ) -> None:
        if max_count is not None and max_count < 0:
            raise ValueError(f"max_count must be None or >= 0, got {max_count}")
        if not 0 <= max_fraction <= 1:
            raise ValueError(f"max_fraction must be in [0, 1], got {max_fraction}")
        super().__init__(name=name, priority=priority)
        self.max_count = max_count
        self.max_fraction = max_fraction
        self.skipped: list[str] = []
        self._seen: set[str] = set()

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The hook with ``data.folder.max_unreadable_count`` and ``_fraction``."""
        folder = cfg.data.folder
        return cls(folder.max_unreadable_count, folder.max_unreadable_fraction)

    def on_step(self, engine: RunEngine) -> None:
        state = engine.state
        batch = state.last_batch
        lines = batch.get(UNREADABLE_KEY) if isinstance(batch, dict) else None
        new = [line for line in lines or () if line not in self._seen]
        if not new:
            return
        if not self.skipped:
            logger.warning(
                "skipping an image that cannot be read (data.folder.skip_unreadable): %s", new[0]
            )
        self.skipped += new
        self._seen.update(new)
        path = Path(state.run_dir) / UNREADABLE_FILE
        if self.is_rank_zero(engine):
            with writing(path, RESUME_HINT):
                write_text_atomic(path, "".join(line + "\n" for line in self.skipped))
        images = len(cast(Sized, state.data_loaders["train"].dataset))
        self._check_bounds(images, path)

    def _check_bounds(self, images: int, path: Path) -> None:
        """DataError when the skipped images are over a bound."""
        count = len(self.skipped)
        if self.max_count is not None and count > self.max_count:
            bound = f"data.folder.max_unreadable_count {self.max_count}"
        elif count > self.max_fraction * images:
            bound = f"data.folder.max_unreadable_fraction {self.max_fraction:g} of {images}"
        else:
            return
        raise DataError(
            f"{count} image{'s' * (count > 1)} could not be read, over {bound} (listed in "
            f"{path}); the last: {self.skipped[-1]}"
        )

    def on_end(self, engine: RunEngine) -> None:
        if not self.skipped:
            return
        state = engine.state
        state.summary["unreadable_images"] = len(self.skipped)
        logger.warning(
            "%d image%s could not be read and %s skipped (data.folder.skip_unreadable): "
            "listed in %s",
            len(self.skipped),
            "s" * (len(self.skipped) > 1),
            "were" if len(self.skipped) > 1 else "was",
            Path(state.run_dir) / UNREADABLE_FILE,
        )

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": list(self.skipped)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.skipped = [str(line) for line in state.get("skipped", [])]
        self._seen = set(self.skipped)
