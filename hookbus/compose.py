"""Method x model x data: a whole config composed from three choices.

``hookbus train --method dino --model vit_tiny --data photos/ --out runs/x`` (or
:func:`hookbus.train`, or a short YAML with the keys ``method``, ``model``, ``data`` and
``out``) composes the effective config here:

1. the data: ``digits`` (scikit-learn's, in memory) or a folder of images, read as
   unlabelled images (a flat or nested folder, class folders or not), counted;
2. the backbone: its kind (hookbus's ViT, a timm ViT, a CNN), its feature size where
   known, its patch side at this image size;
3. the machine: a laptop (no CUDA) gets smaller images, batches and heads;
4. the method's entry composes its part from the
   :class:`~hookbus.engine.methods.composition.Setting` of 1-3 (``MethodSpec.compose``):
   heads, prototypes, views, temperatures, momentum;
5. the length follows from the batch: about 400 steps on a laptop, 3000 with CUDA, 10 to
   300 epochs; the warm-up a twentieth of them;
6. the user's ``KEY=VALUE`` overrides go on top, and the whole is validated.

A folder's images carry no labels here, so the meters that need labels (kNN) and the
end-of-run evaluation are off, and a line says so (:attr:`Composed.notes`): evaluate the
encoder with ``hookbus eval RUN LABELLED_FOLDER``. The recipes in ``configs/`` keep the
papers' settings; a composed config is a recipe too (``--show`` prints it).

The command line imports this module only when a command composes or reads a config
(it loads torch and the backbone registry), never for ``--help``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from hookbus.config import Config, load_config, validate_config
from hookbus.engine.config.config_io import apply_override, read_yaml
from hookbus.engine.config.model_names import canonical_backbone_name
from hookbus.engine.errors import ConfigError, DataError
from hookbus.engine.folder_walk import walk_folder
from hookbus.engine.methods.composition import Setting, clamp, merge, power_of_two_below
from hookbus.engine.methods.entries import MethodSpec
from hookbus.engine.registry import UnknownNameError
from hookbus.methods import METHOD_ENTRIES
from hookbus.parts.data.image_folder import IMAGE_EXTENSIONS
from hookbus.parts.models import BACKBONES
from hookbus.parts.models.presets import TIMM_PREFIX, TV_PREFIX, VIT_PRESETS

SHORT_KEYS = ("method", "model", "data", "out", "overrides")
"""The keys of a short YAML (``method: dino``, ...): the choices and the overrides."""

TENSOR_DATA = {"digits": (16, 1, 1297)}
"""In-memory data sets by name: (image side, channels, train images)."""

DEFAULT_MODEL = "resnet18"
"""The backbone of a composed run that names none (``small_cnn`` for the digits)."""

LAPTOP_STEPS = 400
"""About the train steps of a composed run on a machine without CUDA."""

CUDA_STEPS = 3000
"""About the train steps of a composed run on a machine with CUDA."""

CNN_WIDTHS = {"resnet18": 512, "resnet50": 2048}
"""Feature sizes of hookbus's CNNs (``small_cnn``: 4 x its width)."""


@dataclass(frozen=True)
class Composed:
    """A composed config and what was decided for it: ``notes`` are the lines a run
    says before it trains (a meter switched off, the length chosen), ``setting`` what
    the method's settings followed from."""

    config: Config
    setting: Setting | None = None
    notes: tuple[str, ...] = ()
    command: str = ""

    def yaml(self) -> str:
        """The config as a recipe: the choices and notes as comments, then the keys the
        composition (or the recipe) and the overrides set, as validated; every other key
        keeps its default (``hookbus schema`` and docs/configuration.md list them)."""
        lines = [f"# {line}" for line in (self.command, *self.notes) if line]
        written = self.config.model_dump(mode="json", exclude_unset=True)
        dumped = yaml.safe_dump(written, sort_keys=False)
        return "".join(f"{line}\n" for line in lines) + dumped


def method_spec(name: str) -> MethodSpec[Any]:
    """The method called ``name`` (its ``loss.name``, an alias such as ``simclr``, or its
    title in any case, ``MoCo v2``); ConfigError listing the names otherwise, or for a
    method that cannot be composed."""
    wanted = _plain(name)
    for spec in METHOD_ENTRIES:
        names = {spec.name, *spec.aliases, spec.title}
        if wanted in {_plain(known) for known in names}:
            if spec.compose is None:
                raise ConfigError(
                    f"--method {name}: {spec.title} has no composed defaults; train it from "
                    "a recipe (hookbus recipes lists them)"
                )
            return spec
    raise ConfigError(f"--method {name!r} is not a method; known: {', '.join(method_names())}")


def method_names() -> list[str]:
    """The names ``--method`` takes, one per composable method."""
    return [
        (spec.aliases or (spec.name,))[0] for spec in METHOD_ENTRIES if spec.compose is not None
    ]


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def compose(
    method: str,
    model: str | None = None,
    data: str | Path = "digits",
    out: str | Path | None = None,
    overrides: Sequence[str] = (),
    *,
    laptop: bool | None = None,
) -> Composed:
    """The config of ``method`` on ``model`` over ``data`` into the run directory ``out``
    (default ``runs/<method>_<model>_<data>``), with ``overrides`` (``key=value``) on top.

    ``laptop`` None asks torch whether CUDA is there (``machine.device=cpu`` in the
    overrides: a laptop). Raises ConfigError (or DataError for a folder without images)
    in one line naming the choice that cannot be composed.
    """
    spec = method_spec(method)
    data = str(data)
    tensors = data in TENSOR_DATA
    model = canonical_backbone_name(model or ("small_cnn" if tensors else DEFAULT_MODEL))
    asked = _asked(overrides)
    if laptop is None:
        laptop = asked.get("machine.device") == "cpu" or not _has_cuda()
    if tensors:
        size, channels, images = TENSOR_DATA[data]
    else:
        size, channels, images = 64 if laptop else 128, 3, count_images(Path(data))
    size = int(asked.get("data.image_size", size))
    patch = _patch_size(model, size)
    batch = _proposed_batch(images, laptop=laptop, vit=patch is not None)
    per_epoch = _steps_per_epoch(images, int(asked.get("data.batch_size", batch)))
    setting = Setting(
        backbone=model,
        patch_tokens=model in VIT_PRESETS,
        timm_vit=model.startswith(TIMM_PREFIX) and patch is not None,
        width=_width(model),
        patch_size=patch,
        image_size=size,
        channels=channels,
        images=images,
        batch_size=batch,
        laptop=laptop,
        tensors=tensors,
        steps=per_epoch * _epochs(per_epoch, laptop=laptop, asked=asked),
    )
    check_backbone_name(model)
    try:
        part = spec.compose(setting) if spec.compose else {}
    except ValueError as exc:
        raise ConfigError(f"--method {method} --model {model}: {exc}") from None
    raw = merge(_base(setting, data, model), part)
    raw = merge(raw, {"loss": {"name": spec.name}})
    raw["checkpoint"]["dir"] = str(out) if out else _default_out(spec, model, data)
    notes = _length(raw, setting, asked)
    if not tensors:
        notes.append(
            f"meters.knn and hooks.evaluation_report: off, the images of {data} are read "
            "without labels; evaluate the encoder with hookbus eval RUN LABELLED_FOLDER"
        )
    for override in overrides:
        apply_override(raw, override)
    command = f"composed by hookbus: --method {method} --model {model} --data {data}"
    config = validate_config(raw, f"--method {method} --model {model} --data {data}")
    return Composed(config, setting, tuple(notes), command)


def _asked(overrides: Sequence[str]) -> dict[str, Any]:
    """The overrides that the composition follows (image side, batch, epochs, device),
    read as the config will read them."""
    raw: dict[str, Any] = {}
    for override in overrides:
        apply_override(raw, override)
    asked = {}
    for key in ("data.image_size", "data.batch_size", "optimizer.num_epochs", "machine.device"):
        node: Any = raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            asked[key] = node
    return asked


def check_backbone_name(model: str) -> None:
    """ConfigError naming close names when no backbone is called ``model`` (hookbus's,
    ``tv:NAME``, ``timm:NAME``; ``hookbus models`` lists them)."""
    try:
        BACKBONES.get(model)
    except UnknownNameError as exc:
        raise ConfigError(f"--model {model}: {exc}") from None


def _has_cuda() -> bool:
    return bool(torch.cuda.is_available())


def count_images(folder: Path) -> int:
    """The image files under ``folder`` (recursively, as the image folder data set reads
    them); DataError naming a folder that is missing or holds none."""
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "no such folder"
        raise DataError(f"--data {folder}: {what} (give a folder of images, or digits)")
    walk = walk_folder(folder, suffixes=IMAGE_EXTENSIONS, what="image")
    if not walk.files:
        raise DataError(
            f"--data {folder}: no images in it (extensions: {', '.join(IMAGE_EXTENSIONS)})"
        )
    return len(walk.files)


def _patch_size(model: str, image_size: int) -> int | None:
    """A ViT's patch side at ``image_size`` (None for a CNN): hookbus's ViTs cut an 8 x 8
    grid (16-pixel patches from 128 pixels on, 4 at least); timm's and torchvision's keep
    the patch of their name."""
    if model in VIT_PRESETS:
        return 16 if image_size >= 128 else max(4, image_size // 8)
    name = model.removeprefix(TIMM_PREFIX).removeprefix(TV_PREFIX).partition(".")[0]
    if model.startswith((TIMM_PREFIX, TV_PREFIX)) and re.search(r"vit|deit", name):
        found = re.search(r"(?:patch|_)(\d+)(?:_|$)", name)
        return int(found.group(1)) if found else 16
    return None


def _width(model: str) -> int | None:
    if model in VIT_PRESETS:
        return VIT_PRESETS[model].width
    return CNN_WIDTHS.get(model, 128 if model == "small_cnn" else None)


def _proposed_batch(images: int, *, laptop: bool, vit: bool) -> int:
    """About a tenth of the images, a power of two: 16 to 256 (512 with CUDA; 64 for a ViT
    on a laptop), never more than the images (the last partial batch is dropped)."""
    if images < 2:
        raise DataError(f"a composed run needs 2 train images at least, not {images}")
    most = 64 if laptop and vit else 256 if laptop else 512
    return min(clamp(power_of_two_below(images / 10), 16, most), power_of_two_below(images))


def _base(setting: Setting, data: str, model: str) -> dict[str, Any]:
    """The keys around the method's: the data, the backbone, AdamW, the meters, the run
    directory."""
    backbone: dict[str, Any] = {"name": model, "in_channels": setting.channels}
    if model in CNN_WIDTHS and setting.image_size <= 32:
        backbone["small_stem"] = True
    if setting.patch_tokens:
        backbone["vit"] = {"patch_size": setting.patch_size}
    if setting.tensors:
        source: dict[str, Any] = {"name": data, "test_batch_size": 500}
    else:
        source = {
            "name": "image_folder",
            "pipeline": "crop_first",
            "folder": {"train_dir": data},
            "test_batch_size": 128,
            "torchvision": {
                "crop_scale": [0.2, 1.0],
                "color_jitter": [0.4, 0.4, 0.4, 0.1],
                "color_jitter_prob": 0.8,
                "grayscale_prob": 0.2,
                "blur_prob": 0.0 if setting.image_size <= 96 else 0.5,
                "solarize_prob": 0.0,
            },
        }
    labelled = setting.tensors
    return {
        "trainer": {"seed": 0},
        "data": {
            **source,
            "image_size": setting.image_size,
            "num_views": 2,
            "batch_size": setting.batch_size,
        },
        "model": {"backbone": backbone},
        "optimizer": {"name": "adamw", "lr": 0.001, "weight_decay": 0.00001},
        "meters": {"knn": {"enabled": labelled, "k": 20}, "collapse": {"enabled": True}},
        "checkpoint": {"phase_frequency": 1, "keep_last": 2},
        "hooks": {"evaluation_report": {"enabled": labelled}},
    }


def _length(raw: dict[str, Any], setting: Setting, asked: Mapping[str, Any]) -> list[str]:
    """Set the epochs, warm-up, test and log frequencies from the steps an epoch takes at
    the composed batch (the overrides' batch and epochs win); returns the note on them."""
    batch = int(asked.get("data.batch_size", raw["data"]["batch_size"]))
    steps = _steps_per_epoch(setting.images, batch)
    epochs = _epochs(steps, laptop=setting.laptop, asked=asked)
    raw["optimizer"].update(
        num_epochs=epochs,
        warmup_epochs=max(1, round(epochs / 20)),
        schedule="cosine",
    )
    raw["trainer"].update(
        test_every_num_epochs=max(1, epochs // 4), log_frequency=clamp(steps, 1, 25)
    )
    return [
        f"{setting.images} train images, batches of {batch}: {steps} steps per epoch, "
        f"{epochs} epochs"
    ]


def _steps_per_epoch(images: int, batch: int) -> int:
    """Train steps of an epoch (the last partial batch is dropped), one at least."""
    return max(1, images // batch)


def _epochs(steps: int, *, laptop: bool, asked: Mapping[str, Any]) -> int:
    """The epochs of a run of ``steps`` steps an epoch: about :data:`LAPTOP_STEPS` (or
    :data:`CUDA_STEPS`) steps in all, 10 to 300 epochs; the user's
    ``optimizer.num_epochs`` wins."""
    target = LAPTOP_STEPS if laptop else CUDA_STEPS
    return int(asked.get("optimizer.num_epochs", clamp(math.ceil(target / steps), 10, 300)))


def _default_out(spec: MethodSpec, model: str, data: str) -> str:
    name = (spec.aliases or (spec.name,))[0]
    where = data if data in TENSOR_DATA else "_".join(Path(data).resolve().parts[-2:])
    return f"runs/{name}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', f'{model}_{where}')}"


def is_short_yaml(raw: Mapping[str, Any]) -> bool:
    """Whether a YAML mapping is the short form (``method: dino`` and its choices), not
    a recipe."""
    return "method" in raw


def compose_short_yaml(path: Path, overrides: Sequence[str] = ()) -> Composed:
    """The config of the short YAML at ``path`` (``method``, ``model``, ``data``, ``out``
    and ``overrides``, a mapping of dotted keys or a list of ``key=value``), with
    ``overrides`` after its own."""
    raw = read_yaml(path)
    unknown = sorted(set(raw) - set(SHORT_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: a short config (method: ...) takes the keys {', '.join(SHORT_KEYS)}; "
            f"unknown: {', '.join(map(str, unknown))}"
        )
    own = raw.get("overrides") or []
    if isinstance(own, dict):
        own = [f"{key}={json.dumps(value)}" for key, value in own.items()]  # JSON is YAML
    if not isinstance(own, list) or not all(isinstance(item, str) for item in own):
        raise ConfigError(f"{path}: overrides must be a mapping of dotted keys or key=value lines")
    choices = {key: raw.get(key) for key in ("method", "model", "data", "out")}
    for key, value in choices.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a name or a path, not {value!r}")
    if not choices["method"]:
        raise ConfigError(f"{path}: method is empty; known: {', '.join(method_names())}")
    return compose(
        str(choices["method"]),
        choices["model"],
        choices["data"] or "digits",
        choices["out"],
        [*own, *overrides],
    )


def run_config(args: argparse.Namespace) -> Composed:
    """The config of a composing command (``train``, ``validate``, ``hooks``): composed
    from ``--method`` (``--model``, ``--data``, ``--out``), or from a short YAML, or the
    RECIPE's as it is, each with the command's overrides."""
    if args.method is not None:
        return compose(args.method, args.model, args.data or "digits", args.out, args.overrides)
    path = Path(args.config)
    if path.is_file() and is_short_yaml(read_yaml(path)):
        return compose_short_yaml(path, args.overrides)
    return Composed(load_config(args.config, args.overrides))
