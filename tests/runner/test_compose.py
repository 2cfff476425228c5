"""Method x model x data composed: every method's settings follow from the backbone, the
images and the machine; the command line, the short YAML and load_config agree."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

import hookbus
from hookbus.cli import main
from hookbus.compose import compose, compose_short_yaml, method_names
from hookbus.config import load_config, validate_config
from hookbus.engine.errors import ConfigError, DataError
from hookbus.train_call import override_lines
from tests.photos import make_photo_folder

MASKED = ("mae", "ibot", "dinov2", "dinov3", "ijepa")
"""The methods that mask a ViT's patch tokens."""


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A labelled folder of real photographs: train/ and test/, 2 classes of 12 crops."""
    return make_photo_folder(tmp_path_factory.mktemp("photos"), per_class=12, size=24)


def test_the_methods_that_compose_are_every_ssl_method() -> None:
    assert method_names() == [
        "simclr",
        "moco",
        "moco_v3",
        "byol",
        "swav",
        "dino",
        "dinov2",
        "dinov3",
        "ibot",
        "barlow_twins",
        "vicreg",
        "simsiam",
        "nnclr",
        "mae",
        "ijepa",
        "lejepa",
        "distillation",
    ]


TEACHER = (
    "loss.distillation.teacher.name=small_cnn",
    "loss.distillation.teacher.weights=teacher.pth",
)
"""The overrides that name distillation's teacher (the user's to choose)."""


@pytest.mark.parametrize("method", method_names())
def test_every_method_composes_a_valid_config_for_the_tiny_vit(method: str) -> None:
    overrides = TEACHER if method == "distillation" else ()
    composed = compose(method, "vit_tiny", "digits", "runs/x", overrides, laptop=True)
    config = composed.config
    assert config.model.backbone.name == "vit_tiny"
    assert config.data.name == "digits"
    assert str(config.checkpoint.dir) == "runs/x"
    assert validate_config(config.model_dump(mode="json")) == config


@pytest.mark.parametrize("method", MASKED)
def test_a_masking_method_refuses_a_cnn_in_one_line(method: str) -> None:
    with pytest.raises(ConfigError) as error:
        compose(method, "resnet18", "digits", laptop=True)
    message = str(error.value)
    assert message.startswith(f"--method {method} --model resnet18: method {method} masks")
    assert "pick --model vit_tiny" in message
    assert "\n" not in message


def test_ijepa_and_mae_take_a_timm_vit() -> None:
    timm = "timm:vit_tiny_patch16_224"
    spelled = compose("ijepa", "timm/vit_tiny_patch16_224", overrides=["data.image_size=64"])
    assert spelled.config.model.backbone.name == timm
    assert spelled.config.loss.ijepa.target_blocks == 2  # 4 x 4 patches
    with pytest.raises(ConfigError, match=r"16 pixels make 1 patches .*data.image_size=64\)$"):
        compose("ijepa", timm, "digits", laptop=True)
    mae = compose("mae", timm, overrides=["data.image_size=64"]).config
    assert (mae.model.backbone.name, mae.data.num_views) == (timm, 1)


def test_dinov3_places_gram_anchoring_in_the_composed_run() -> None:
    composed = compose("dinov3", "vit_tiny", "digits", laptop=True)
    config = composed.config
    assert composed.setting is not None and composed.setting.steps == 400  # 20 steps x 20
    assert (config.data.batch_size, config.optimizer.num_epochs) == (64, 20)
    gram = config.loss.dinov3
    assert (gram.gram_weight, gram.gram_start, gram.gram_first_update) == (1.0, 133, 200)
    assert (gram.gram_update_every, gram.gram_max_updates) == (66, 3)
    assert config.model.backbone.vit.position_embedding == "rope"
    assert config.loss.dinov2.centering == "sinkhorn_knopp"  # DINOv2's composition under it
    longer = compose(
        "dinov3", "vit_tiny", "digits", overrides=["optimizer.num_epochs=60"], laptop=True
    )
    assert longer.config.loss.dinov3.gram_start == 400  # a third of 1,200 steps
    smaller = compose("dinov3", "vit_tiny", "digits", overrides=["data.batch_size=16"], laptop=True)
    assert smaller.config.loss.dinov3.gram_start == 270  # 81 steps x 10 epochs (the fewest)
    timm = compose("dinov3", "timm/vit_tiny_patch16_224", overrides=["data.image_size=64"])
    assert timm.config.model.backbone.vit.position_embedding == "learned"  # timm's own


def test_lejepa_composes_a_projector_for_any_backbone() -> None:
    for model, dims in (("resnet18", 512), ("vit_tiny", 256), ("small_cnn", 512)):
        config = compose("lejepa", model, "digits", laptop=True).config
        assert config.model.head.dims == ["backbone", dims, dims, 16]
        assert config.model.head.batch_norm
        assert (config.data.num_views, config.data.small_views.count) == (2, 2)
        assert (config.loss.lejepa.sigreg_weight, config.loss.lejepa.global_views) == (0.05, 2)
        assert config.optimizer.weight_decay == 0.05
    cuda = compose("lejepa", "resnet18", "digits", laptop=False).config
    assert cuda.data.small_views.count == 6


def test_distillation_composes_around_the_teacher_the_user_names(photos: Path) -> None:
    with pytest.raises(ConfigError) as error:
        compose("distillation", "resnet18", photos / "train", laptop=True)
    assert "loss.distillation.teacher.name: name the teacher's backbone" in str(error.value)
    assert "\n" not in str(error.value)
    config = compose("distillation", "resnet18", photos / "train", overrides=TEACHER).config
    distillation = config.loss.distillation
    assert (distillation.mode, distillation.temperature, distillation.queue_size) == (
        "global",
        0.07,
        64,  # 24 images: the fewest
    )
    assert distillation.teacher.in_channels == 3  # the photos' channels
    assert distillation.teacher.name == "small_cnn"
    digits = compose("distillation", None, "digits", overrides=TEACHER, laptop=True).config
    assert digits.loss.distillation.queue_size == 512  # 1297 images
    assert digits.loss.distillation.teacher.in_channels == 1


def test_a_method_without_composed_defaults_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import hookbus.compose as composing

    plain = dataclasses.replace(composing.METHOD_ENTRIES[0], compose=None)
    monkeypatch.setattr(composing, "METHOD_ENTRIES", (plain,))
    with pytest.raises(ConfigError) as error:
        compose("simclr", "resnet18", "digits", laptop=True)
    assert str(error.value) == (
        "--method simclr: SimCLR has no composed defaults; train it from a recipe "
        "(hookbus recipes lists them)"
    )


def test_prototypes_and_queues_follow_the_number_of_images(photos: Path) -> None:
    digits = {m: compose(m, "resnet18", "digits", laptop=True).config for m in ("dino", "swav")}
    assert digits["dino"].model.prototypes.count == 1024  # 1297 images: as the digits recipe
    assert digits["swav"].model.prototypes.count == 32  # the digits recipe's 30, rounded
    assert compose("moco", None, "digits", laptop=True).config.loss.moco.queue_size == 512
    folder = photos / "train"  # 24 images
    assert compose("dino", "resnet18", folder, laptop=True).config.model.prototypes.count == 256
    assert compose("swav", "resnet18", folder, laptop=True).config.model.prototypes.count == 10
    assert compose("nnclr", "resnet18", folder, laptop=True).config.loss.nnclr.queue_size == 64


def test_the_length_follows_the_batch_and_the_overrides_win() -> None:
    config = compose("simclr", "resnet18", "digits", laptop=True).config
    assert (config.data.batch_size, config.optimizer.num_epochs) == (128, 40)  # 10 steps
    assert config.optimizer.warmup_epochs == 2
    smaller = compose("simclr", "resnet18", "digits", overrides=["data.batch_size=64"], laptop=True)
    assert (smaller.config.data.batch_size, smaller.config.optimizer.num_epochs) == (64, 20)
    assert smaller.notes[0] == "1297 train images, batches of 64: 20 steps per epoch, 20 epochs"
    fixed = compose("simclr", "resnet18", "digits", overrides=["optimizer.num_epochs=3"])
    assert fixed.config.optimizer.num_epochs == 3


def test_the_sizes_follow_the_machine_and_the_backbone() -> None:
    laptop = compose("dino", "vit_tiny", "digits", laptop=True).config
    cuda = compose("dino", "vit_tiny", "digits", laptop=False).config
    assert (laptop.data.batch_size, cuda.data.batch_size) == (64, 128)  # a ViT on a laptop
    assert (laptop.data.small_views.count, cuda.data.small_views.count) == (2, 4)
    assert laptop.data.small_views.size == 12  # the digits recipe's
    assert laptop.model.head.dims == ["backbone", 256, 256, 64]  # 64 features: narrower
    assert compose("dino", "resnet18", "digits", laptop=True).config.model.head.dims[1] == 512
    assert compose("simclr", "resnet18", "digits", laptop=True).config.model.backbone.small_stem


def test_a_folder_is_read_without_labels_and_knn_is_off_with_a_note(photos: Path) -> None:
    composed = compose("byol", "resnet18", photos / "train", laptop=True)
    config = composed.config
    assert config.data.name == "image_folder"
    assert config.data.folder.train_dir == photos / "train"
    assert config.data.image_size == 64
    assert config.model.backbone.in_channels == 3
    assert not config.meters.knn.enabled
    assert not config.hooks.evaluation_report.enabled
    assert config.meters.collapse.enabled
    assert any("hookbus eval RUN LABELLED_FOLDER" in note for note in composed.notes)


def test_a_missing_or_empty_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="^--data .*nowhere: no such folder"):
        compose("simclr", None, tmp_path / "nowhere")
    (tmp_path / "a.jpg").write_bytes(b"")
    with pytest.raises(DataError, match="^--data .*a.jpg: is not a folder"):
        compose("simclr", None, tmp_path / "a.jpg")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="^--data .*empty: no images in it"):
        compose("simclr", None, tmp_path / "empty")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("method: [dino]\n", "method must be a name or a path, not ['dino']"),
        ("method: dino\nepochs: 3\n", "takes the keys method, model, data, out, overrides"),
        ("method: dino\noverrides: 3\n", "overrides must be a mapping of dotted keys"),
        ("method: ''\n", "method is empty; known: simclr"),
    ],
)
def test_a_wrong_short_yaml_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    short = tmp_path / "short.yaml"
    short.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        compose_short_yaml(short)


def test_an_unknown_model_is_one_line_naming_the_backbones() -> None:
    with pytest.raises(ConfigError, match="^--model nope: unknown backbone 'nope'; registered"):
        compose("simclr", "nope")


def test_the_run_directory_is_named_after_the_choices(photos: Path) -> None:
    assert str(compose("dino", "vit_tiny", laptop=True).config.checkpoint.dir) == (
        "runs/dino_vit_tiny_digits"
    )
    folder = compose("simclr", "timm/resnet18", photos / "train", laptop=True).config
    assert str(folder.checkpoint.dir) == f"runs/simclr_timm_resnet18_{photos.name}_train"


def test_an_unknown_method_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="'dinosaur' is not a method; known: simclr, moco,"):
        compose("dinosaur")


def test_a_method_is_named_by_its_loss_its_alias_or_its_title() -> None:
    names = ("nt_xent", "simclr", "SimCLR", "MoCo v2", "moco", "barlow-twins")
    losses = [compose(name, laptop=True).config.loss.name for name in names]
    assert losses == ["nt_xent", "nt_xent", "nt_xent", "moco", "moco", "barlow_twins"]


def test_a_short_yaml_composes_as_the_flags_do(
    tmp_path: Path, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    short = tmp_path / "short.yaml"
    short.write_text(
        f"method: dino\nmodel: vit_tiny\ndata: {photos / 'train'}\nout: {tmp_path / 'run'}\n"
        "overrides:\n  optimizer.num_epochs: 3\n"
    )
    flags = ["--method", "dino", "--model", "vit_tiny", "--data", str(photos / "train")]
    flags += ["--out", str(tmp_path / "run"), "optimizer.num_epochs=3"]
    assert main(["train", str(short), "machine.device=cpu", "--show"]) == 0
    from_yaml = capsys.readouterr().out
    assert main(["train", *flags, "machine.device=cpu", "--show"]) == 0
    assert capsys.readouterr().out == from_yaml
    assert yaml.safe_load(from_yaml)["optimizer"]["num_epochs"] == 3


def test_show_prints_a_recipe_that_trains_the_same_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--method", "swav", "--data", "digits", "--out", str(tmp_path / "r")]
    assert main(["train", *args, "machine.device=cpu", "--show"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# composed by hookbus: --method swav --model small_cnn --data digits")
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(text)
    cpu = ["machine.device=cpu"]
    assert load_config(recipe) == compose("swav", None, "digits", tmp_path / "r", cpu).config
    assert not (tmp_path / "r").exists()  # --show trains nothing


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simclr_digits", "--method", "dino"], "give a RECIPE (simclr_digits) or --method dino"),
        (["--data", "digits"], "--model and --data compose a run with --method"),
        ([], "name a RECIPE"),
        (["--method", "mae", "--model", "resnet18"], "masks the patch tokens"),
    ],
)
def test_a_wrong_composition_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", *argv, "--show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hookbus train: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_load_config_takes_a_shipped_recipe_name() -> None:
    assert load_config("simclr_digits") == load_config(
        Path(__file__).parents[2] / "configs" / "simclr_digits.yaml"
    )
    with pytest.raises(ConfigError, match="did you mean simclr_digits"):
        load_config("simclr_digit")


def test_the_keywords_of_hookbus_train_are_config_keys() -> None:
    assert override_lines("optimizer__lr", 0.3) == ["optimizer.lr=0.3"]
    assert override_lines("optimizer", {"lr": 0.3, "betas": [0.9, 0.95]}) == [
        "optimizer.lr=0.3",
        "optimizer.betas=[0.9, 0.95]",
    ]
    assert override_lines("epochs", 5) == ["optimizer.num_epochs=5"]
    teacher = {"teacher": {"name": "small_cnn", "width": 8}}
    assert override_lines("loss__distillation", teacher) == [  # on top, key by key
        'loss.distillation.teacher.name="small_cnn"',
        "loss.distillation.teacher.width=8",
    ]
    assert override_lines("loss", {"distillation": teacher}) == override_lines(
        "loss__distillation", teacher
    )
    assert override_lines("data__folder__train_dir", Path("a b")) == ['data.folder.train_dir="a b"']
    with pytest.raises(ConfigError, match="^hookbus.train: learning_rate=0.1 is not a config key"):
        override_lines("learning_rate", 0.1)


@pytest.mark.slow
def test_one_call_trains_returns_the_run_and_keeps_it_finished(tmp_path: Path) -> None:
    short = {"epochs": 1, "device": "cpu", "hooks__evaluation_report__enabled": False}
    run = hookbus.train(out=tmp_path / "run", data="digits", method="simclr", **short)
    assert run.dir == tmp_path / "run"
    assert run.config.optimizer.num_epochs == 1
    assert run.checkpoint is not None and run.checkpoint.parent == run.dir
    assert [row["phase"] for row in run.history] == ["train", "test"]
    assert (run.dir / "config.yaml").is_file()
    again = hookbus.train(out=tmp_path / "run", data="digits", method="simclr", **short)
    assert again.checkpoint == run.checkpoint and again.history == []
    with pytest.raises(ConfigError, match="optimizer.num_epochs: 1 -> 2"):
        hookbus.train(
            out=tmp_path / "run", data="digits", method="simclr", **{**short, "epochs": 2}
        )
