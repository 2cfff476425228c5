"""DINOv3's high-resolution adaptation phase: the train views (and the Gram teacher's)
change size at the phase's epoch, in every data pipeline, and a phase that does not fit
the run is refused when the config is checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine

from hookbus import Hook, SSLTrainer
from hookbus.engine.errors import ConfigError
from hookbus.hook_set import method_hooks
from hookbus.hooks.methods.gram_teacher import GramTeacherHook
from hookbus.parts.data import build_data_loaders
from tests.conftest import tiny_config
from tests.photos import make_photo_folder

TINY_VIT = {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16}
ADAPTATION = {
    "gram_start": 0,
    "gram_image_size": 10,
    "adaptation_epoch": 2,
    "adaptation_image_size": 12,
    "adaptation_small_size": 8,
    "adaptation_gram_image_size": 16,
}


class Sizes(Hook):
    """The epoch and the sides of the views and the Gram teacher's grid of each train step."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, list[int], int]] = []

    def on_loss_and_meter(self, engine: Engine) -> None:
        state = engine.state
        if state.train:
            views = [view.shape[-1] for view in state.last_batch["views"]]
            gram = state.last_output["gram_teacher_patch_tokens"].shape[1]
            self.seen.append((state.train_phase_idx + 1, views, gram))


def config(run_dir: Path, epochs: int = 3, **dinov3: Any) -> Any:
    return tiny_config(
        run_dir,
        loss={"name": "dinov3", "dinov3": {**ADAPTATION, **dinov3}},
        model={
            "backbone": {"name": "vit_tiny", "vit": TINY_VIT},
            "head": {"dims": ["backbone", 16, 8]},
            "prototypes": {"count": 12, "weight_norm": True},
        },
        data={"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
        optimizer={"num_epochs": epochs, "warmup_epochs": 0},
    )


def test_the_views_grow_at_the_adaptation_epoch(tmp_path: Path) -> None:
    cfg = config(tmp_path / "run")
    sizes = Sizes()
    hooks = method_hooks(cfg)
    assert "adaptation_phase" in {hook.name for hook in hooks}
    SSLTrainer(cfg, hooks=[*hooks, sizes]).train()
    # 3 steps an epoch; the student's grid of the global views stays the grid the Gram
    # teacher's tokens are resized to (its own: 5x5 at 10 px, then 8x8 at 16 px)
    first = [(1, [8, 8, 6, 6], 16)] * 3
    later = [(epoch, [12, 12, 8, 8], 36) for epoch in (2, 3) for _ in range(3)]
    assert sizes.seen == first + later
    gram = next(hook for hook in hooks if isinstance(hook, GramTeacherHook))
    assert (gram.side(1), gram.side(2), gram.side(3)) == (10, 16, 16)


def test_the_image_folder_pipelines_cut_the_adaptation_sizes(tmp_path: Path) -> None:
    photos = make_photo_folder(tmp_path / "photos", per_class=2, size=24)
    for pipeline in ("crop_first", "torchvision"):
        cfg = tiny_config(
            tmp_path / pipeline,
            loss={"name": "dinov3", "dinov3": ADAPTATION},
            model={
                "backbone": {"name": "vit_tiny", "in_channels": 3, "vit": TINY_VIT},
                "head": {"dims": ["backbone", 16, 8]},
                "prototypes": {"count": 12, "weight_norm": True},
            },
            data={
                "name": "image_folder",
                "pipeline": pipeline,
                "folder": {"train_dir": str(photos / "train"), "test_dir": None},
                "small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]},
            },
        )
        loader = build_data_loaders(cfg)["train"]
        train, samples = loader.collate_fn, [loader.dataset[0], loader.dataset[1]]
        before = train(samples)["views"]
        train.set_adapted(True)
        after = train(samples)["views"]
        assert [view.shape[-1] for view in before] == [8, 8, 6, 6], pipeline
        assert [view.shape[-1] for view in after] == [12, 12, 8, 8], pipeline
        train.set_adapted(False)
        assert all(torch.equal(a, b) for a, b in zip(train(samples)["views"], before, strict=True))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"adaptation_epoch": None}, "adaptation_image_size is set without"),
        ({"adaptation_epoch": 4}, "after the run's last epoch"),
        (
            {"adaptation_image_size": 13},
            "adaptation_image_size 13 is not a multiple of the ViT's patch size 2",
        ),
        ({"adaptation_small_size": 7}, "adaptation_small_size 7 is not a multiple"),
        ({"adaptation_gram_image_size": 10}, "below its global views' 12"),
        (
            {
                "adaptation_image_size": None,
                "adaptation_small_size": None,
                "adaptation_gram_image_size": None,
            },
            "changes no size",
        ),
    ],
)
def test_an_adaptation_phase_that_does_not_fit_is_refused(
    tmp_path: Path, change: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        config(tmp_path, **change)
