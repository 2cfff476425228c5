"""``hookbus export``: a checkpoint's backbone as a plain state dict for torchvision or the CNN."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import torch
from torch import Tensor

from hookbus.config import validate_config
from hookbus.engine.checkpoint.checkpoint_contents import check_weights
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint
from hookbus.engine.errors import UserError
from hookbus.output_paths import check_destination, write_output
from hookbus.parts.models import BACKBONES
from hookbus.parts.models.build import backbone_config, zero_classifier_weights
from hookbus.parts.models.presets import RESNET_NAMES
from hookbus.parts.models.pretrained import backbone_state_dict

logger = logging.getLogger(__name__)

DEFAULT_NUM_CLASSES = 1000
"""Rows of the zero classifier added to an exported ResNet (torchvision's default)."""


def export_backbone(
    checkpoint: Path, out: Path, *, num_classes: int = DEFAULT_NUM_CLASSES
) -> dict[str, Tensor]:
    """Write the backbone weights of the hookbus ``checkpoint`` to ``out``; returns them.

    The file is a plain state dict (``torch.save`` of ``{name: tensor}``) keyed as the
    backbone's own module: ``torchvision.models.resnet50().load_state_dict`` (or
    ``resnet18``, or :class:`hookbus.parts.models.SmallCNN` with the recipe's width) loads
    it without edits. A ResNet has no classifier in training, so ``fc.weight``
    (``[num_classes, features]``) and ``fc.bias`` are added as zeros: replace or train that
    layer for a task. A ResNet trained with ``model.backbone.small_stem`` loads into a
    torchvision model whose ``conv1`` is a 3x3 stride-1 convolution and whose ``maxpool`` is
    ``nn.Identity()``. A ViT (``vit_*``) gets a zero ``heads.head`` and loads into
    torchvision's ``VisionTransformer`` built with the run's sizes (see
    :func:`hookbus.parts.models.vit.torchvision_vit`); a ViT with LayerScale
    (``model.backbone.vit.layer_scale``), whose scales torchvision's blocks have no place
    for, has them folded into the linear layer that ends each branch
    (:func:`~hookbus.parts.models.layer_scale.fold_layer_scale`: the same function, up to
    float rounding, with torchvision's keys; logged), so the file loads into a ViT without
    LayerScale, not back into one with it; a ``tv:<name>`` model gets its last
    Linear layer back as zeros and loads into ``torchvision.models.get_model(name,
    num_classes=num_classes)``; both with a matching first convolution when
    ``model.backbone.in_channels`` is not 3. The checkpoint must match its checksum file, as
    on resume (a FIFO or a device is refused before it is opened; a sharded checkpoint, of
    ``distributed.strategy: fsdp``, its shards too, whose tensors are read whole). ``out``
    may not be the checkpoint or any file a run keeps in a run directory, by any path (a
    link, a hard link, ``..``), nor a directory or a device: :class:`UserError`, before
    anything is read. The file is written through a temporary file in its folder, fsynced,
    its size checked, and renamed into place: :class:`OutputWriteError` when that fails (a
    full disk, a read-only folder), with nothing left behind. A backbone given to
    ``SSLTrainer`` from Python is exported keyed as that module, nothing added: its class's
    ``load_state_dict`` takes the file.
    """
    if out.is_dir():
        raise UserError(f"{out} is a directory: give the path of the file to write (.pth)")
    check_destination(out, [checkpoint])
    saved = load_whole_checkpoint(checkpoint)
    cfg = validate_config(saved.get("config", {}), f"the config in {checkpoint}")
    check_weights("model", saved["model"], None, str(checkpoint))
    weights = backbone_state_dict(saved["model"])
    backbone = backbone_config(cfg)
    if cfg.from_python.backbone is None and backbone.vit.registers:
        raise UserError(
            f"{checkpoint}: its ViT has {backbone.vit.registers} register tokens "
            "(model.backbone.vit.registers), which torchvision's VisionTransformer has no "
            "place for; load the checkpoint's model into hookbus's ViT instead"
        )
    if cfg.from_python.backbone is None and not backbone.vit.class_token:
        raise UserError(
            f"{checkpoint}: its ViT has no class token (model.backbone.vit.class_token "
            "false), which torchvision's VisionTransformer needs; load the checkpoint's "
            "model into hookbus's ViT instead"
        )
    if cfg.from_python.backbone is None:
        built = BACKBONES.get(backbone.name)(backbone)
        check_weights("model", weights, built.state_dict(), str(checkpoint))
    if cfg.from_python.backbone is None and backbone.vit.layer_scale is not None:
        from hookbus.parts.models.layer_scale import fold_layer_scale

        folded = fold_layer_scale(weights)
        logger.info(
            "%s: folded the LayerScale of its ViT (model.backbone.vit.layer_scale, %d scales) "
            "into the attention and MLP output layers: the file loads into torchvision's "
            "VisionTransformer, and into hookbus's ViT without layer_scale",
            checkpoint,
            folded,
        )
    if cfg.from_python.backbone is None and backbone.name in RESNET_NAMES:
        features: int = built.out_dim  # type: ignore[assignment]  # set by every backbone
        weights["fc.weight"] = torch.zeros(num_classes, features)
        weights["fc.bias"] = torch.zeros(num_classes)
    elif cfg.from_python.backbone is None:
        # vit_*: heads.head; tv:<name>: the last Linear layer that training removed.
        weights.update(zero_classifier_weights(backbone, weights, num_classes))
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    write_output(out, buffer.getvalue())
    return weights
