"""PIL images as tensors, without torchvision."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from torch import Tensor


def pil_to_tensor(image: Image.Image) -> Tensor:
    """The pixels of ``image`` as a tensor ``[C, H, W]`` in the dtype of its mode (uint8
    for ``L``, ``P``, ``RGB``, ``RGBA``; int32 for ``I``, float32 for ``F``), one channel
    per band, as torchvision's ``pil_to_tensor`` gives them; nothing is converted."""
    pixels = torch.from_numpy(np.array(image))
    if pixels.dim() == 2:
        return pixels.unsqueeze(0)
    return pixels.permute(2, 0, 1).contiguous()
