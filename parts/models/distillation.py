"""The model of distillation: the student backbone with projections onto a frozen teacher's
features, and the teacher itself, held apart from the student's weights.

The teacher (:class:`FrozenTeacher`) is built and loaded with the model, so a teacher
whose weights do not fit is refused before the run writes anything; it is no submodule:
its weights are not in the model's ``state_dict`` (not in any checkpoint), not handed to
the optimizer, not wrapped by DDP or sharded by FSDP, and a copy of the model shares it.
The ``distillation_teacher`` hook runs it on each batch.
"""

from __future__ import annotations

import math
from itertools import groupby
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.errors import CheckpointError
from hookbus.parts.config import Config
from hookbus.parts.models.ssl_model import ModelOutput
from hookbus.parts.models.vit import ViTBackbone


def pooled_and_spatial(backbone: nn.Module, images: Tensor) -> tuple[Tensor, Tensor]:
    """The pooled features ``[B, D]`` of ``images`` (the backbone's output) and the
    features ``[B, C, H, W]`` before the backbone pools them: a ViT's patch tokens on
    their grid, a CNN's last feature map. Supported: hookbus's ViTs, small CNN and
    ResNets, torchvision's ResNets and every timm model; ValueError for others.

    Each goes through a method that FSDP gathers a sharded unit's parameters for (the
    forward, a ViT's ``tokens``, timm's ``forward_features``), never through a part of
    the backbone called alone: a CNN's map is caught by a forward hook."""
    if isinstance(backbone, ViTBackbone):
        cls, patches = backbone.tokens(images)
        return cls, _grid(patches, images, backbone.patch_size)
    if type(backbone).__module__.startswith("timm."):
        net: Any = backbone
        features = net.forward_features(images)
        if features.dim() == 3:  # tokens: the prefix (class, registers) first
            patches = features[:, getattr(net, "num_prefix_tokens", 0) :]
            side = math.isqrt(patches.shape[1])
            features = patches.transpose(1, 2).reshape(len(images), -1, side, side)
        return cast(Tensor, backbone(images)), features
    last = _last_map(backbone)
    caught: list[Tensor] = []
    handle = last.register_forward_hook(lambda module, args, out: caught.append(out))
    try:
        pooled = backbone(images)
    finally:
        handle.remove()
    return pooled, caught[0]


def _last_map(backbone: nn.Module) -> nn.Module:
    """The module whose output is the CNN's last feature map, before its pooling."""
    layers = getattr(backbone, "layers", None)
    if isinstance(layers, nn.Sequential) and isinstance(layers[-1], nn.Flatten):
        return layers[-3]  # the small CNN: its last ReLU, before pool and flatten
    if all(hasattr(backbone, name) for name in ("conv1", "layer4", "avgpool")):
        return cast(nn.Module, backbone.layer4)
    raise ValueError(
        f"{type(backbone).__name__} gives no patch or spatial features that hookbus can "
        "read (hookbus's ViTs, small CNN and ResNets, torchvision's ResNets and timm's "
        "models do): use loss.distillation.mode=global"
    )


def spatial_features(backbone: nn.Module, images: Tensor) -> Tensor:
    """The features ``[B, C, H, W]`` of ``images`` before the backbone pools them (see
    :func:`pooled_and_spatial`)."""
    return pooled_and_spatial(backbone, images)[1]


def _grid(patches: Tensor, images: Tensor, patch_size: int) -> Tensor:
    rows, cols = images.shape[-2] // patch_size, images.shape[-1] // patch_size
    return patches.transpose(1, 2).reshape(len(images), -1, rows, cols)


class FrozenTeacher:
    """A backbone that is never trained: eval mode, no gradients; ``mean``/``std`` (or
    None) its own normalisation, ``image_size`` (or None) the side it reads,
    ``in_channels`` the channels it reads. A deep copy of a model holding it shares it."""

    def __init__(
        self,
        backbone: nn.Module,
        *,
        image_size: int | None = None,
        in_channels: int = 3,
        mean: tuple[float, ...] | None = None,
        std: tuple[float, ...] | None = None,
    ) -> None:
        self.backbone = backbone.eval().requires_grad_(False)
        self.image_size = image_size
        self.in_channels = in_channels
        self.mean = mean
        self.std = std

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenTeacher:
        return self

    @property
    def out_dim(self) -> int:
        return int(cast(Any, self.backbone).out_dim)

    def to(self, device: torch.device | str) -> FrozenTeacher:
        self.backbone.to(device)
        return self


class DistillationModel(nn.Module):
    """The student ``backbone``, ``projection`` (its pooled features onto the teacher's
    width) and ``patch_projection`` (its spatial features onto the teacher's width, for
    the dense loss; None without one), and the ``teacher`` beside them.

    With ``batch["views"]``: per view ``"view_features"`` (the student's pooled
    features), ``"embeddings"`` (projected) and, with a patch projection,
    ``"patch_embeddings"`` ``[B, H, W, D]`` (the student's grid, projected). With
    ``batch["image"]``: ``"features"``, the student's pooled features of clean images.
    """

    def __init__(
        self,
        backbone: nn.Module,
        projection: nn.Module,
        patch_projection: nn.Module | None,
        teacher: FrozenTeacher,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.projection = projection
        self.patch_projection = patch_projection
        self.__dict__["teacher"] = teacher  # no submodule: see the module's docstring

    @property
    def teacher(self) -> FrozenTeacher:
        return cast(FrozenTeacher, self.__dict__["teacher"])

    def forward(self, batch: dict) -> ModelOutput:
        if "views" not in batch and "image" not in batch:
            raise KeyError("DistillationModel needs a batch with 'views' and/or 'image'")
        output: ModelOutput = {}
        if "views" in batch:
            views = list(batch["views"])
            sizes = [len(view) for view in views]
            features: list[Tensor] = []
            patches: list[Tensor] = []
            for _, group in groupby(views, key=lambda view: view.shape[-2:]):
                images = torch.cat(list(group))
                if self.patch_projection is None:
                    features.append(self.backbone(images))
                    continue
                pooled, grid = pooled_and_spatial(self.backbone, images)
                features.append(pooled)
                patches.append(self.patch_projection(grid.permute(0, 2, 3, 1)))
            pooled = torch.cat(features)
            output["view_features"] = list(pooled.split(sizes))
            output["embeddings"] = list(self.projection(pooled).split(sizes))
            if patches:
                output["patch_embeddings"] = [p for group in patches for p in group.split(sizes[0])]
        if "image" in batch:
            output["features"] = self.backbone(batch["image"])
        return output

    def encode(self, images: Tensor) -> Tensor:
        """The student's pooled features ``[B, D]`` of ``images``."""
        return cast(Tensor, self.backbone(images))


def teacher_of(model: nn.Module) -> FrozenTeacher:
    """The teacher of a :class:`DistillationModel`; TypeError naming what ``model`` is
    for any other model (the ``distillation_teacher`` hook in a run of another method)."""
    if not isinstance(model, DistillationModel):
        raise TypeError(
            f"distillation_teacher: the model is a {type(model).__name__}, not distillation's "
            "(loss.name distillation builds it)"
        )
    return model.teacher


def _linear(in_features: int, out_features: int) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.trunc_normal_(layer.weight, std=0.02)
    nn.init.zeros_(layer.bias)
    return layer


def build_teacher(cfg: Config) -> FrozenTeacher:
    """The teacher of ``loss.distillation.teacher``, its weights loaded (a mismatch is a
    one-line CheckpointError), in eval mode without gradients."""
    from hookbus.parts.models.build import BACKBONES
    from hookbus.parts.models.pretrained import load_backbone_weights

    section = cfg.loss.distillation.teacher
    backbone_cfg = section.backbone(cfg.data.image_size)
    try:
        backbone = BACKBONES.get(section.name)(backbone_cfg)
    except ValueError as exc:
        raise ValueError(f"loss.distillation.teacher.name: {exc}") from None
    if section.weights is not None:
        try:
            load_backbone_weights(backbone, section.weights, name=f"teacher {section.name}")
        except CheckpointError as exc:
            raise CheckpointError(f"loss.distillation.teacher.weights: {exc}") from None
    return FrozenTeacher(
        backbone,
        image_size=section.image_size,
        in_channels=section.in_channels,
        mean=section.mean,
        std=section.std,
    )


def build_distillation_model(cfg: Config, backbone: nn.Module, name: str | None) -> nn.Module:
    """``MethodSpec.model`` of distillation: the student ``backbone`` with a linear
    projection onto the teacher's width (truncated normal, std 0.02) and, for the dense
    loss, one on its spatial features; the teacher from ``loss.distillation.teacher``.
    Raises ValueError when the dense loss is asked of a backbone without spatial
    features."""
    teacher = build_teacher(cfg)
    width = teacher.out_dim
    projection = _linear(int(cast(Any, backbone).out_dim), width)
    patch_projection = None
    if cfg.loss.distillation.mode != "global":
        side = cfg.data.image_size
        probe = torch.zeros(1, cfg.model.backbone.in_channels, side, side)
        was_training = backbone.training
        backbone.eval()
        with torch.no_grad():
            try:
                channels = spatial_features(backbone, probe).shape[1]
                spatial_features(teacher.backbone, _teacher_probe(teacher, cfg))
            except ValueError as exc:
                mode = cfg.loss.distillation.mode
                raise ValueError(f"loss.distillation.mode {mode}: {exc}") from None
        backbone.train(was_training)
        patch_projection = _linear(channels, width)
    return DistillationModel(backbone, projection, patch_projection, teacher)


def _teacher_probe(teacher: FrozenTeacher, cfg: Config) -> Tensor:
    side = teacher.image_size or cfg.data.image_size
    return torch.zeros(1, cfg.loss.distillation.teacher.in_channels, side, side)


def teacher_images(teacher: FrozenTeacher, views: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """``views`` (normalised with the data's ``mean`` and ``std``, ``[C]`` each:
    ``data.torchvision.mean`` and ``std``) as the teacher reads them: resized to its
    image size (bilinear, antialiased), grey views repeated on the teacher's
    ``in_channels`` when it reads more, and normalised with its own mean and std, when it
    has them."""
    images = views
    if teacher.image_size is not None and views.shape[-1] != teacher.image_size:
        size = (teacher.image_size, teacher.image_size)
        images = F.interpolate(images, size=size, mode="bilinear", antialias=True)
    if teacher.mean is not None and teacher.std is not None:
        images = images * std.view(1, -1, 1, 1) + mean.view(1, -1, 1, 1)
    if images.shape[1] == 1 and teacher.in_channels > 1:
        images = images.expand(-1, teacher.in_channels, -1, -1)
    if teacher.mean is not None and teacher.std is not None:
        own_mean = images.new_tensor(teacher.mean).view(1, -1, 1, 1)
        own_std = images.new_tensor(teacher.std).view(1, -1, 1, 1)
        images = (images - own_mean) / own_std
    return images
