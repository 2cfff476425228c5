"""The shipped recipes: each validates, composes its method's hooks and fits its model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ignite.engine import Engine
from PIL import Image

from hookbus import Hook, SSLTrainer, default_hooks, load_config
from hookbus.parts.models import build_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
METHOD_HOOKS = {
    "simclr": set(),
    "moco": {"momentum_teacher", "key_queue"},
    "moco_v3": {"momentum_teacher"},
    "byol": {"momentum_teacher"},
    "swav": {"prototype_normalization", "freeze_prototypes"},
    "dino": {"momentum_teacher", "dino_centering", "freeze_prototypes"},
    "barlow_twins": set(),
    "vicreg": set(),
    "simsiam": set(),
    "nnclr": {"nnclr_support"},
}


class ViewSizes(Hook):
    """Records the side of every view of every step."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[list[int]] = []

    def on_forward(self, engine: Engine) -> None:
        self.sizes.append([view.shape[-1] for view in engine.state.last_batch["views"]])


@pytest.mark.parametrize("method", sorted(METHOD_HOOKS))
def test_digits_recipe_builds_with_its_method_hooks(method: str) -> None:
    cfg = load_config(CONFIGS / f"{method}_digits.yaml")
    names = {hook.name for hook in default_hooks(cfg)}
    assert METHOD_HOOKS[method] <= names
    assert cfg.meters.knn.enabled and cfg.hooks.evaluation_report.enabled
    build_model(cfg)


@pytest.mark.parametrize("method", sorted(METHOD_HOOKS))
def test_image_folder_recipe_is_a_resnet50_with_its_method_hooks(method: str) -> None:
    cfg = load_config(CONFIGS / f"{method}_imagefolder_resnet50.yaml")
    assert METHOD_HOOKS[method] <= {hook.name for hook in default_hooks(cfg)}
    assert (cfg.data.name, cfg.data.pipeline) == ("image_folder", "crop_first")
    assert cfg.model.backbone.name == "resnet50"
    assert cfg.model.head.dims[0] == "backbone"  # ResNet-50's 2048 features


def test_linear_eval_recipe_starts_from_the_simclr_checkpoint() -> None:
    cfg = load_config(CONFIGS / "linear_eval_digits.yaml")
    assert cfg.model.linear_eval.enabled
    assert cfg.model.linear_eval.checkpoint == Path("runs/simclr_digits/checkpoint.torch")
    assert cfg.meters.accuracy.topk == [1, 5]


def small_folder(root: Path, per_class: int) -> Path:
    """``root/images``: two class folders of ``per_class`` plain-colour PNGs of
    slightly different sizes."""
    for label, color in (("red", (200, 20, 20)), ("blue", (20, 20, 200))):
        (root / "images" / label).mkdir(parents=True)
        for index in range(per_class):
            Image.new("RGB", (40 + index, 36), color).save(root / "images" / label / f"{index}.png")
    return root / "images"


def test_dino_image_folder_recipe_trains_a_step_on_a_small_folder(tmp_path: Path) -> None:
    images = small_folder(tmp_path, per_class=4)
    cfg = load_config(
        CONFIGS / "dino_imagefolder_resnet50.yaml",
        [
            f"data.folder.train_dir={images}",
            "data.folder.test_dir=null",
            "data.image_size=32",
            "data.small_views.size=16",
            "data.batch_size=4",
            "data.num_workers=0",
            "data.pin_memory=false",
            # ResNet-18 and a narrow head for speed; data, heads and hooks as shipped.
            "model.backbone.name=resnet18",
            "model.head.dims=[512,128,128,64]",
            "model.prototypes.count=64",
            "model.amp.enabled=false",
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    hooks = [hook for hook in default_hooks(cfg) if hook.name in METHOD_HOOKS["dino"]]
    recorder = ViewSizes()
    state = SSLTrainer(cfg, hooks=[*hooks, recorder]).train()
    assert state.iteration == 2
    assert recorder.sizes == [[32] * 2 + [16] * 6] * 2
    assert len(state.last_output["teacher_scores"]) == 2


@pytest.mark.parametrize("method", sorted(set(METHOD_HOOKS) - {"dino"}))
def test_image_folder_recipe_as_shipped_trains_a_step_on_a_small_folder(
    tmp_path: Path, method: str
) -> None:
    overrides = [
        f"data.folder.train_dir={small_folder(tmp_path, per_class=2)}",
        "data.folder.test_dir=null",
        "data.image_size=32",
        "data.batch_size=4",
        "data.num_workers=0",
        "data.pin_memory=false",
        "model.amp.enabled=false",
        "optimizer.num_epochs=1",
        "trainer.test_model=false",
        f"checkpoint.dir={tmp_path / 'run'}",
    ]
    if method == "swav":
        overrides.append("data.small_views.size=16")
    cfg = load_config(CONFIGS / f"{method}_imagefolder_resnet50.yaml", overrides)
    hooks = [hook for hook in default_hooks(cfg) if hook.name in METHOD_HOOKS[method]]
    state = SSLTrainer(cfg, hooks=hooks).train()
    assert state.iteration == 1
    assert state.loss is not None and bool(state.loss.isfinite())


def test_the_mae_digits_recipe_builds_a_masked_autoencoder_on_vit_tiny() -> None:
    from hookbus.parts.models import MaskedAutoencoder

    cfg = load_config(CONFIGS / "mae_digits_vit_tiny.yaml")
    assert (cfg.loss.name, cfg.data.num_views, cfg.model.backbone.name) == ("mae", 1, "vit_tiny")
    assert cfg.meters.knn.enabled and cfg.hooks.evaluation_report.enabled
    model = build_model(cfg)
    assert isinstance(model, MaskedAutoencoder)
    assert model.encode(torch.zeros(2, 1, 16, 16)).shape == (2, 64)


def test_the_mae_vit_b16_recipe_trains_a_step_on_generated_224_px_images(tmp_path: Path) -> None:
    cfg = load_config(
        CONFIGS / "mae_imagefolder_vit_b16.yaml",
        [
            f"data.folder.train_dir={small_folder(tmp_path, per_class=1)}",
            "data.folder.test_dir=null",
            "data.batch_size=2",
            "data.num_workers=0",
            "data.pin_memory=false",
            "model.amp.enabled=false",  # bf16 on CPU is slow; tests/runner/test_loss_mae.py runs it
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    # The paper's settings, as shipped: the backbone, decoder and view are not shrunk.
    assert (cfg.model.backbone.name, cfg.data.image_size) == ("vit_b16", 224)
    decoder = cfg.model.mae_decoder
    assert (decoder.width, decoder.depth, decoder.heads) == (512, 8, 16)
    assert (cfg.loss.mae.mask_ratio, cfg.loss.mae.norm_pix_loss) == (0.75, True)
    assert cfg.optimizer.lr == pytest.approx(1.5e-4 * 4096 / 256)
    assert (cfg.optimizer.weight_decay, cfg.optimizer.warmup_epochs) == (0.05, 40)
    assert load_config(CONFIGS / "mae_imagefolder_vit_b16.yaml").optimizer.num_epochs == 800
    assert cfg.data.torchvision.crop_scale == (0.2, 1.0)
    recorder = ViewSizes()
    state = SSLTrainer(cfg, hooks=[recorder]).train()
    assert state.iteration == 1
    assert recorder.sizes == [[224]]
    assert state.last_output["mask"].sum(dim=1).tolist() == [147.0, 147.0]  # 196 - 49
    assert bool(state.loss.isfinite())


@pytest.mark.parametrize(
    "recipe",
    [
        "linear_eval_imagefolder_resnet50",
        "linear_eval_imagefolder_resnet18_small",
        "fine_tune_imagefolder_resnet50",
    ],
)
def test_image_folder_evaluation_recipes_follow_the_papers_protocol(recipe: str) -> None:
    cfg = load_config(CONFIGS / f"{recipe}.yaml")
    data, optimizer = cfg.data, cfg.optimizer
    assert (optimizer.name, optimizer.momentum, optimizer.weight_decay) == ("sgd", 0.9, 0.0)
    assert optimizer.warmup_epochs == 0
    assert (data.num_views, data.small_views.count) == (1, 0)
    assert data.torchvision.crop_scale == (0.08, 1.0)
    assert data.torchvision.flip_prob == 0.5
    augment = data.torchvision
    assert augment.color_jitter_prob == augment.grayscale_prob == augment.blur_prob == 0.0
    frozen = recipe.startswith("linear_eval")
    assert cfg.model.linear_eval.enabled == frozen != cfg.model.fine_tune.enabled


@pytest.mark.parametrize("recipe", sorted(path.stem for path in CONFIGS.glob("*imagefolder*.yaml")))
def test_image_folder_recipes_leave_workers_and_pinning_to_the_machine(recipe: str) -> None:
    cfg = load_config(CONFIGS / f"{recipe}.yaml")
    assert (cfg.data.num_workers, cfg.data.pin_memory) == ("auto", "auto")


def test_the_small_image_folder_recipe_is_a_resnet18_whose_head_fits_it() -> None:
    cfg = load_config(CONFIGS / "simclr_imagefolder_resnet18_small.yaml")
    model = build_model(cfg)
    assert cfg.model.head.dims[0] == "backbone"
    assert model.backbone.out_dim == 512
    assert model.head(torch.zeros(2, 512)).shape == (2, 128)  # the head takes its 512
    assert (cfg.data.image_size, cfg.data.batch_size) == (96, 64)
