"""Parts of a run given as Python objects: a backbone module, data sets, an optimizer
factory, a loss module, in place of the names in the config.

:class:`PythonParts` holds them for :class:`hookbus.SSLTrainer`; the trainer records their
classes in the config's ``from_python`` section, so the effective config says which
parts came from Python and a resumed run can check it got the same kinds of objects.
The config still governs everything else (head sizes are checked against the
backbone's feature size, the schedule drives the optimizer's learning rate, the method's
hooks follow ``loss.name``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch
from PIL import Image
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from hookbus.engine.errors import ConfigError
from hookbus.parts.config import Config
from hookbus.parts.data.pil_image import pil_to_tensor

OptimizerFactory = Callable[[nn.Module], torch.optim.Optimizer]
"""Called once with the model to train (backbone, head and the method's parts: the
trainable parameters are ``model.parameters()``); returns its optimizer."""


def describe(obj: object) -> str:
    """``module.Class`` of an object (of a function: its qualified name)."""
    kind = obj if callable(obj) and not isinstance(obj, nn.Module) else type(obj)
    module = getattr(kind, "__module__", None) or "?"
    name = getattr(kind, "__qualname__", None) or type(obj).__qualname__
    return f"{module}.{name}"


@dataclass
class PythonParts:
    """The objects a run takes from Python; each None part is built from the config.

    ``backbone``: maps images ``[B, C, H, W]`` to features ``[B, D]`` (a torchvision
    classifier with its last layer replaced by ``nn.Identity()`` does); ``D`` is read
    from an ``out_dim`` attribute or from one forward pass. ``train_data`` and
    ``test_data``: map-style data sets whose items are ``(image, label)``, the image a
    tensor ``[C, H, W]`` or a PIL image; the train data serves as test data when only it
    is given. ``optimizer``: an :data:`OptimizerFactory`. ``loss``: a module called as
    the method's loss is (the model's output dict and the batch dict, to a scalar).
    """

    backbone: nn.Module | None = None
    train_data: Dataset | None = None
    test_data: Dataset | None = None
    optimizer: OptimizerFactory | None = None
    loss: nn.Module | None = None

    def __post_init__(self) -> None:
        expected = {
            "backbone": (nn.Module, "a torch.nn.Module"),
            "loss": (nn.Module, "a torch.nn.Module"),
        }
        for name, (kind, words) in expected.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"{name} must be {words}, got {type(value).__name__}")
        for name in ("train_data", "test_data"):
            value = getattr(self, name)
            if value is not None and not (
                hasattr(value, "__getitem__") and hasattr(value, "__len__")
            ):
                raise TypeError(
                    f"{name} must be a map-style data set (with __getitem__ and __len__), "
                    f"got {type(value).__name__}"
                )
        if self.test_data is not None and self.train_data is None:
            raise TypeError("test_data needs train_data: pass both, or only train_data")
        if self.optimizer is not None and not callable(self.optimizer):
            raise TypeError(
                "optimizer must be a factory: a callable taking the model and returning "
                f"a torch.optim.Optimizer, got {type(self.optimizer).__name__}"
            )

    def described(self) -> dict[str, str | None]:
        """The ``from_python`` section these parts make: part name to class, or None."""
        described: dict[str, str | None] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            described[field.name] = None if value is None else describe(value)
        if self.train_data is not None and self.test_data is None:
            described["test_data"] = described["train_data"]
        return described

    def apply_to(self, cfg: Config) -> Config:
        """``cfg`` with its ``from_python`` section describing these parts.

        A config whose ``from_python`` already names parts (the ``config.yaml`` of a run
        trained with Python objects) must be given the same kinds of objects: a part
        named there but not passed, or passed but of another class, is a ConfigError.
        """
        described = self.described()
        recorded = cfg.from_python.model_dump()
        if any(recorded.values()):
            for part, was in recorded.items():
                now = described[part]
                if was is not None and now is None:
                    raise ConfigError(
                        f"from_python.{part}: this config's {part} came from Python ({was}); "
                        f"pass {part}= to SSLTrainer to go on with it"
                    )
                if was is not None and now != was:
                    raise ConfigError(
                        f"from_python.{part}: this config's {part} was a {was}, but a {now} "
                        "was given"
                    )
        section = cfg.from_python.model_copy(update=described)
        return cfg.model_copy(update={"from_python": section})

    def datasets(self, cfg: Config) -> tuple[Dataset, Dataset] | None:
        """The train and test data sets as the loaders take them, or None when the
        config names the data."""
        if self.train_data is None:
            return None
        test = self.test_data if self.test_data is not None else self.train_data
        pipeline = cfg.data.pipeline
        return IndexedDataset(self.train_data, "train_data", pipeline), IndexedDataset(
            test, "test_data" if self.test_data is not None else "train_data", pipeline
        )


class IndexedDataset(Dataset):
    """A user's data set as hookbus's loaders take it: item ``i`` is ``(image, label,
    i)``, the index seeding the item's augmentations.

    Images become tensors ``[C, H, W]``: PIL images are converted; for
    ``data.pipeline: torchvision`` and ``crop_first`` they must be uint8 (the
    augmentations scale them), for ``batch`` they become float32 (uint8 divided by 255).
    The first item is checked when the data set is wrapped, so a data set of another
    shape is named at once.
    """

    def __init__(self, dataset: Any, name: str, pipeline: str) -> None:
        self.dataset = dataset
        self.name = name
        self.pipeline = pipeline
        if len(dataset) == 0:
            raise ConfigError(f"{name} is empty")
        self[0]

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def labels(self) -> Tensor | None:
        """The data set's ``labels`` or ``targets`` attribute when it has one (used to
        check ``model.linear_eval.num_classes`` and ``model.fine_tune.num_classes``)."""
        for attribute in ("labels", "targets"):
            labels = getattr(self.dataset, attribute, None)
            if labels is not None:
                return torch.as_tensor(labels)
        return None

    def __getitem__(self, index: int) -> tuple[Tensor, int, int]:
        item = self.dataset[index]
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise ConfigError(
                f"{self.name}[{index}] is a {type(item).__name__}; hookbus takes items "
                "(image, label)"
            )
        image, label = item[0], item[1]
        return self._tensor(image, index), int(label), index

    def _tensor(self, image: Any, index: int) -> Tensor:
        where = f"{self.name}[{index}]"
        if isinstance(image, Image.Image):
            image = pil_to_tensor(image)
        if not isinstance(image, Tensor):
            raise ConfigError(
                f"{where}: the image is a {type(image).__name__}; give a tensor [C, H, W] "
                "or a PIL image"
            )
        if image.dim() == 2:
            image = image.unsqueeze(0)
        if image.dim() != 3:
            raise ConfigError(f"{where}: the image has shape {list(image.shape)}; give [C, H, W]")
        if self.pipeline in ("torchvision", "crop_first"):
            if image.dtype != torch.uint8:
                raise ConfigError(
                    f"{where}: data.pipeline {self.pipeline} takes uint8 images (or PIL), got "
                    f"{image.dtype}; return uint8, or use data.pipeline=batch for float images"
                )
            return image
        if image.dtype == torch.uint8:
            return image.float().div_(255)
        if not image.is_floating_point():
            raise ConfigError(f"{where}: images must be uint8 or floating point, got {image.dtype}")
        return image.float()


def feature_size(backbone: nn.Module, loader: DataLoader, device: torch.device | str) -> int:
    """The size ``D`` of ``backbone``'s features: its ``out_dim`` when it has one, else
    read from one forward pass of a clean image (eval mode, no_grad); set as
    ``backbone.out_dim``. ConfigError when the output is not ``[B, D]``."""
    out_dim = getattr(backbone, "out_dim", None)
    if isinstance(out_dim, int) and out_dim > 0:
        return out_dim
    image = loader.collate_fn([loader.dataset[0]])["image"].to(device)
    was_training = backbone.training
    backbone.to(device).eval()
    try:
        with torch.no_grad():
            features = backbone(image)
    except (RuntimeError, ValueError) as exc:
        shape = "x".join(str(n) for n in image.shape[1:])
        raise ConfigError(
            f"backbone ({describe(backbone)}) cannot encode the images ({shape}): "
            f"{str(exc).splitlines()[0]}"
        ) from None
    finally:
        backbone.train(was_training)
    if not isinstance(features, Tensor) or features.dim() != 2:
        got = list(features.shape) if isinstance(features, Tensor) else type(features).__name__
        raise ConfigError(
            f"backbone ({describe(backbone)}) must return features [batch, D]; it returned "
            f"{got} (flatten or pool its output, or replace its classifier with nn.Identity())"
        )
    out_dim = int(features.shape[1])
    backbone.out_dim = out_dim  # type: ignore[assignment]  # an int attribute, not a submodule
    return out_dim


def initial_copy(backbone: nn.Module) -> nn.Module:
    """A copy of ``backbone`` as given, before training and restoring change it."""
    return copy.deepcopy(backbone)
