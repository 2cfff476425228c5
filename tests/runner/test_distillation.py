"""``loss.name: distillation``: a frozen teacher of another architecture, its own image
size and normalisation; the teacher never trains and is never written into a
checkpoint; a resume is bit-exact (queue included) and refuses another teacher file; a
run started from weights resumes bit-exactly too; the student exports alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from hookbus import Hook, SSLTrainer
from hookbus.cli import main
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import CheckpointError, ConfigError
from hookbus.export import export_backbone
from hookbus.hook_set import method_hooks
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import BACKBONES
from hookbus.parts.models.distillation import FrozenTeacher, spatial_features, teacher_images
from tests.conftest import tiny_config

TIMM_TEACHER = "timm:vit_tiny_patch16_224"


@pytest.fixture(scope="module")
def teacher_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small CNN of width 8 (32 features) as the teacher's weights."""
    path = tmp_path_factory.mktemp("teacher") / "teacher.pth"
    torch.manual_seed(1)
    net = BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=8))
    torch.save(net.state_dict(), path)
    return path


def distill_config(run_dir: Path, teacher: dict[str, Any], **loss: Any) -> Any:
    return tiny_config(
        run_dir,
        loss={
            "name": "distillation",
            "distillation": {"queue_size": 20, "teacher": teacher, **loss},
        },
        model={"backbone": {"width": 4}, "head": {"dims": ["backbone", 128, 64]}},
        optimizer={"num_epochs": 2, "warmup_epochs": 0},
    )


class Stop(Exception):
    """The simulated crash."""


class StopAfterPhase(Hook):
    """Raises at the end of phase ``phase_idx``, after its checkpoint is written."""

    priority = 200

    def __init__(self, phase_idx: int) -> None:
        super().__init__()
        self.phase_idx = phase_idx

    def on_phase_end(self, engine: Any) -> None:
        if engine.state.phase_idx == self.phase_idx:
            raise Stop


def train(cfg: Any, *extra: Hook) -> Any:
    hooks = [*method_hooks(cfg), CheckpointHook(cfg.checkpoint.dir), *extra]
    return SSLTrainer(cfg, hooks=hooks).train()


def cnn_teacher(path: Path) -> dict[str, Any]:
    return {"name": "small_cnn", "width": 8, "weights": str(path)}


@pytest.mark.parametrize("mode", ["global", "dense", "both"])
def test_the_teacher_stays_as_loaded_and_out_of_the_checkpoint(
    tmp_path: Path, teacher_file: Path, mode: str
) -> None:
    state = train(distill_config(tmp_path / "run", cnn_teacher(teacher_file), mode=mode))
    teacher = state.base_model.teacher.backbone
    assert not teacher.training
    assert not any(parameter.requires_grad for parameter in teacher.parameters())
    saved = torch.load(teacher_file, weights_only=True)
    assert all(torch.equal(teacher.state_dict()[k], v) for k, v in saved.items())
    checkpoint = torch.load(tmp_path / "run" / "checkpoint.torch", weights_only=True)
    assert {key.split(".")[0] for key in checkpoint["model"]} == (
        {"backbone", "projection"} | ({"patch_projection"} if mode != "global" else set())
    )
    hook = checkpoint["hooks"]["distillation_teacher"]
    assert hook["queue"].shape == (20, 32)
    assert hook["filled"] == 20  # 2 views x 24 images a train phase, twice
    assert len(hook["teacher"]) == 64  # the file's SHA-256


def test_a_timm_teacher_at_its_own_size_and_normalisation_teaches_a_cnn(
    tmp_path: Path,
) -> None:
    import timm

    net = timm.create_model("vit_tiny_patch16_224", num_classes=0, in_chans=1, img_size=32)
    torch.save(net.state_dict(), tmp_path / "vit.pth")
    teacher = {
        "name": TIMM_TEACHER,
        "in_channels": 1,
        "image_size": 32,
        "weights": str(tmp_path / "vit.pth"),
        "mean": [0.5],
        "std": [0.25],
    }
    cfg = distill_config(tmp_path / "run", teacher, mode="both")
    state = train(cfg)
    assert state.base_model.projection.out_features == 192
    # The 2x2 grid of 16 px patches on 32 px images; the student's 8 px views give 2x2.
    grid = spatial_features(state.base_model.teacher.backbone, torch.zeros(1, 1, 32, 32))
    assert grid.shape == (1, 192, 2, 2)
    assert torch.isfinite(torch.tensor(state.metrics.get("knn_top1", 0.0)))


def test_a_resume_is_bit_exact_queue_included(tmp_path: Path, teacher_file: Path) -> None:
    teacher = cnn_teacher(teacher_file)
    straight = train(distill_config(tmp_path / "straight", teacher, mode="both"))
    with pytest.raises(Stop):
        train(distill_config(tmp_path / "resumed", teacher, mode="both"), StopAfterPhase(1))
    resumed = train(distill_config(tmp_path / "resumed", teacher, mode="both"))
    assert resumed.resumed_from is not None
    for key, value in straight.base_model.state_dict().items():
        assert torch.equal(value, resumed.base_model.state_dict()[key]), key
    hooks = {hook.name: hook for hook in straight.hooks}
    again = {hook.name: hook for hook in resumed.hooks}
    first = hooks["distillation_teacher"].state_dict()
    second = again["distillation_teacher"].state_dict()
    assert torch.equal(first["queue"], second["queue"])
    assert (first["position"], first["filled"], first["teacher"]) == (
        second["position"],
        second["filled"],
        second["teacher"],
    )


def test_a_resume_whose_teacher_file_changed_is_refused(tmp_path: Path, teacher_file: Path) -> None:
    own = tmp_path / "teacher.pth"
    own.write_bytes(teacher_file.read_bytes())
    with pytest.raises(Stop):
        train(distill_config(tmp_path / "run", cnn_teacher(own)), StopAfterPhase(1))
    weights = torch.load(own, weights_only=True)
    torch.save({k: v + 1 if v.is_floating_point() else v for k, v in weights.items()}, own)
    with pytest.raises(CheckpointError, match="the run was trained with another teacher"):
        train(distill_config(tmp_path / "run", cnn_teacher(own)))


def test_a_teacher_that_does_not_fit_its_weights_is_refused_before_the_run_dir(
    tmp_path: Path, teacher_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = distill_config(tmp_path / "run", {"name": "small_cnn", "weights": str(teacher_file)})
    with pytest.raises(CheckpointError, match="do not fit the backbone teacher small_cnn"):
        SSLTrainer(cfg).train()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("teacher", "expected"),
    [
        ({}, "loss.distillation.teacher.name: name the teacher's backbone"),
        ({"name": "small_cnn"}, "loss.distillation.teacher.weights: a teacher needs its weights"),
        (
            {"name": "small_cnn", "weights": "t.pth", "mean": [0.5]},
            "mean and loss.distillation.teacher.std go together",
        ),
    ],
)
def test_a_teacher_without_name_or_weights_is_a_config_error(
    tmp_path: Path, teacher: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        distill_config(tmp_path / "run", teacher)


def test_the_student_exports_alone(tmp_path: Path, teacher_file: Path) -> None:
    state = train(distill_config(tmp_path / "run", cnn_teacher(teacher_file)))
    export_backbone(tmp_path / "run" / "checkpoint.torch", tmp_path / "student.pth")
    exported = torch.load(tmp_path / "student.pth", weights_only=True)
    assert exported.keys() == state.base_model.backbone.state_dict().keys()


def test_a_run_from_weights_resumes_bit_exactly(tmp_path: Path) -> None:
    torch.manual_seed(3)
    start = BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=4))
    torch.save(start.state_dict(), tmp_path / "start.pth")

    def cfg(run: str) -> Any:
        return tiny_config(
            tmp_path / run,
            model={
                "backbone": {"width": 4, "weights": str(tmp_path / "start.pth")},
                "head": {"dims": [16, 16, 8]},
            },
            optimizer={"num_epochs": 2, "warmup_epochs": 0},
        )

    straight = train(cfg("straight"))
    with pytest.raises(Stop):
        train(cfg("resumed"), StopAfterPhase(1))
    resumed = train(cfg("resumed"))
    for key, value in straight.base_model.state_dict().items():
        assert torch.equal(value, resumed.base_model.state_dict()[key]), key


def test_validate_names_the_teacher_weights_that_do_not_fit(
    tmp_path: Path, teacher_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = Path(__file__).resolve().parents[2] / "configs" / "simclr_digits.yaml"
    status = main(
        [
            "validate",
            str(recipe),
            "loss.name=distillation",
            "model.head.dims=[backbone,128,64]",
            "loss.distillation.teacher.name=small_cnn",
            f"loss.distillation.teacher.weights={teacher_file}",
            f"checkpoint.dir={tmp_path / 'run'}",
        ]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert "do not fit the backbone teacher small_cnn" in err


def test_the_teachers_images_are_resized_repeated_and_renormalised() -> None:
    teacher = FrozenTeacher(
        nn.Identity(), image_size=4, in_channels=3, mean=(0.5, 0.5, 0.5), std=(0.25, 0.5, 1.0)
    )
    views = torch.full((2, 1, 2, 2), 2.0)  # pixels 0.1 + 2 * 0.2 = 0.5 under the data's
    images = teacher_images(teacher, views, torch.tensor([0.1]), torch.tensor([0.2]))
    assert images.shape == (2, 3, 4, 4)
    torch.testing.assert_close(images, torch.zeros(2, 3, 4, 4))
    pixels = teacher_images(
        FrozenTeacher(nn.Identity(), in_channels=3), views, torch.tensor([0.1]), torch.tensor([0.2])
    )
    assert pixels.shape == (2, 3, 2, 2) and bool((pixels == 2.0).all())  # as the student's
