"""The features ``hookbus eval`` scores: the encoder's features of each image of a split
(and, for a ViT, the concatenated class tokens of its last blocks), computed on every
rank's share of the split and gathered in the split's order."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.utils.data import Dataset, Subset
from tqdm import tqdm

from hookbus.engine.errors import ConfigError, DataError
from hookbus.engine.process import distributed
from hookbus.parts.data.loader import SSLDataLoader
from hookbus.parts.models.ijepa import JepaModel
from hookbus.parts.models.timm_any import is_timm_vit
from hookbus.parts.models.vit import ViTBackbone

BACKBONE = "backbone"
"""The features the model's ``encode`` gives (those of the kNN meter and the evaluation
report)."""


def last_blocks_name(blocks: int) -> str:
    """The name of the features of the last ``blocks`` blocks' class tokens."""
    return f"last{blocks}"


@dataclass(frozen=True)
class SplitFeatures:
    """The features of a split, ``{name: [N, D]}`` (float32, on the CPU), and the labels
    ``[N]``, row ``i`` being the split's image ``i``."""

    features: dict[str, Tensor]
    labels: Tensor


@dataclass(frozen=True)
class ViTParts:
    """What the last-blocks features read from a ViT: its blocks, the final norm, the
    tokens before the patches (class token, registers), and whether the encoder's
    features are the class token or the mean of the patch tokens (I-JEPA)."""

    blocks: Sequence[nn.Module]
    norm: nn.Module
    prefix: int
    pooling: str

    def pool(self, tokens: Tensor) -> Tensor:
        """The pooled features ``[B, D]`` of a block's output ``[B, T, D]`` after the norm."""
        normed = self.norm(tokens)
        return normed[:, 0] if self.pooling == "class" else normed[:, self.prefix :].mean(dim=1)


def vit_parts(model: nn.Module) -> ViTParts | None:
    """The :class:`ViTParts` of ``model``'s backbone: hookbus's ViT or timm's; None for
    other backbones."""
    backbone = cast(nn.Module, model.backbone)
    pooling = "patch mean" if isinstance(model, JepaModel) else "class"
    if isinstance(backbone, ViTBackbone):
        layers = list(backbone.encoder.layers)
        return ViTParts(layers, backbone.encoder.ln, 1 + backbone.registers, pooling)
    if is_timm_vit(backbone):
        timm_vit = cast(Any, backbone)
        return ViTParts(list(timm_vit.blocks), timm_vit.norm, timm_vit.num_prefix_tokens, pooling)
    return None


def check_last_blocks(model: nn.Module, blocks: int) -> ViTParts | None:
    """The model's :class:`ViTParts` when the last ``blocks`` blocks can be read (None
    when ``blocks`` is 0 or the backbone is not a ViT); a ConfigError when the ViT has
    fewer blocks."""
    parts = vit_parts(model) if blocks else None
    if parts is not None and blocks > len(parts.blocks):
        raise ConfigError(
            f"--last-blocks {blocks}: the ViT has {len(parts.blocks)} blocks; give at most "
            f"{len(parts.blocks)} (0: off)"
        )
    return parts


@contextmanager
def block_outputs(blocks: Sequence[nn.Module]) -> Iterator[list[Tensor]]:
    """A list that receives the output of each of ``blocks`` at each forward, in order."""
    outputs: list[Tensor] = []

    def keep(module: nn.Module, inputs: Any, output: Tensor) -> None:
        outputs.append(output)

    handles = [block.register_forward_hook(keep) for block in blocks]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


Encode = Callable[[Tensor], Tensor]


def encode_batch(
    model: nn.Module, images: Tensor, parts: ViTParts | None, blocks: int
) -> dict[str, Tensor]:
    """``{"backbone": model.encode(images)}`` and, with ``parts``, ``"last<blocks>"``: the
    pooled tokens of each of the last ``blocks`` blocks after the final norm,
    concatenated (DINO's linear evaluation of ViTs), from the same forward pass."""
    encode = cast(Encode, model.encode)
    if parts is None:
        return {BACKBONE: encode(images)}
    with block_outputs(parts.blocks[-blocks:]) as outputs:
        features = encode(images)
    pooled = torch.cat([parts.pool(output) for output in outputs], dim=1)
    return {BACKBONE: features, last_blocks_name(blocks): pooled}


@dataclass(frozen=True)
class Extraction:
    """How a split is encoded: batches, loader workers, the device, the ViT blocks read,
    and the progress bar (on rank 0)."""

    batch_size: int
    num_workers: int
    device: torch.device
    blocks: int
    parts: ViTParts | None
    progress: bool


def extract_split(
    model: nn.Module,
    dataset: Dataset,
    collate: Callable[[Sequence[Any]], dict],
    how: Extraction,
    what: str,
) -> SplitFeatures:
    """The features of every image of ``dataset`` (``model`` in eval mode, without
    gradients): each rank encodes images ``rank, rank + W, ...`` (W ranks; padded to as
    many as the others), then every rank gathers the whole split in its order. A batch
    without labels, or with a negative one, is a DataError naming ``what``."""
    size = len(cast(Any, dataset))
    rank, world = distributed.rank(), distributed.world_size()
    mine = list(range(rank, size, world))
    share = -(-size // world)
    padding = share - len(mine)
    loader = SSLDataLoader(
        Subset(dataset, mine + [mine[0] if mine else 0] * padding),
        batch_size=how.batch_size,
        shuffle=False,
        num_workers=how.num_workers,
        collate_fn=collate,
        pin_memory=how.device.type == "cuda",
    )
    rows: dict[str, list[Tensor]] = {}
    labels: list[Tensor] = []
    bar = tqdm(
        total=share,
        unit="img",
        desc=f"encode {what}",
        file=sys.stderr,
        disable=not how.progress or rank != 0,
    )
    with torch.inference_mode(), bar:
        for batch in loader:
            images = batch["image"].to(how.device, non_blocking=True)
            for name, value in encode_batch(model, images, how.parts, how.blocks).items():
                rows.setdefault(name, []).append(value.flatten(1).float().cpu())
            labels.append(batch["label"].long().cpu())
            bar.update(len(images))
    keep = torch.tensor([True] * len(mine) + [False] * padding)
    order = torch.tensor(mine + [0] * padding)
    gathered_keep, gathered_order = _gather(keep), _gather(order)
    positions = gathered_order[gathered_keep].argsort()
    label_rows = _gather(torch.cat(labels))[gathered_keep][positions]
    if len(label_rows) and int(label_rows.min()) < 0:
        raise DataError(
            f"the {what} images have no labels (a flat folder?): evaluation needs one folder "
            "per class"
        )
    features = {
        name: _gather(torch.cat(parts))[gathered_keep][positions] for name, parts in rows.items()
    }
    return SplitFeatures(features, label_rows)


def _gather(tensor: Tensor) -> Tensor:
    """Every rank's ``tensor`` concatenated in rank order (on the CPU); on the device the
    process group's backend needs."""
    if not distributed.is_distributed():
        return tensor
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
        return distributed.all_gather_cat(tensor.to(device)).cpu()
    return distributed.all_gather_cat(tensor)
