"""hookbus's PIL-to-tensor conversion gives torchvision's tensors, mode by mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms.v2.functional import pil_to_tensor as torchvision_pil_to_tensor

from hookbus.parts.data.pil_image import pil_to_tensor


@pytest.mark.parametrize("mode", ["L", "P", "RGB", "RGBA", "I", "F"])
def test_each_mode_gives_torchvisions_tensor(mode: str) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    image = Image.fromarray(pixels, "RGB").convert(mode)
    got = pil_to_tensor(image)
    want = torchvision_pil_to_tensor(image)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)
    assert got.shape[1:] == (5, 7)
