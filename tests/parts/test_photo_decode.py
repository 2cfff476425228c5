"""Photographs decoded as they show: upright by their EXIF orientation, 16-bit and other
modes scaled to 8-bit RGB (not clipped), transparency on white, and libjpeg's warnings kept
off the terminal. Every image here is a real photograph (scikit-learn's china.jpg and
flower.jpg), turned, re-encoded or damaged by the test.

Each decode path is checked: :func:`read_image` (the ``torchvision`` pipeline, evaluation
and embed), :class:`SourceImage` at full size (torchvision's libjpeg-turbo for JPEG files)
and at a reduced size (Pillow's draft mode, the ``crop_first`` pipeline).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hookbus import DataError
from hookbus.parts.data import image_decode
from hookbus.parts.data.decoder_output import decoder_output
from hookbus.parts.data.image_decode import SourceImage, jpeg_orientation, read_image
from tests.photos import photograph

UNDO = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}
"""How a camera stores an upright photo whose EXIF orientation is the key (the inverse
of what a viewer does to show it)."""


def upright_photo() -> Image.Image:
    """china.jpg at 96 x 64: wider than tall, and no two of its turns alike."""
    return photograph("china").resize((96, 64), Image.Resampling.BILINEAR)


def as_array(pixels: torch.Tensor) -> np.ndarray:
    """A decoded ``[3, H, W]`` (or ``[1, 3, H, W]``) uint8 tensor as ``[H, W, 3]``."""
    return pixels.reshape(-1, *pixels.shape[-2:]).permute(1, 2, 0).numpy()


def difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute difference of two uint8 images of one shape."""
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def stored(orientation: int) -> Image.Image:
    """The upright photo as a camera stores it with EXIF ``orientation``."""
    photo = upright_photo()
    return photo if orientation == 1 else photo.transpose(UNDO[orientation])


def save(image: Image.Image, path: Path, orientation: int | None = None, **options: object) -> Path:
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    image.save(path, exif=exif, **options)
    return path


@pytest.mark.parametrize("orientation", range(1, 9))
def test_a_jpeg_photo_comes_out_upright_in_every_decode_path(
    tmp_path: Path, orientation: int
) -> None:
    path = save(stored(orientation), tmp_path / "photo.jpg", orientation, quality=95)
    assert jpeg_orientation(path.read_bytes()) == orientation
    upright = np.array(upright_photo())
    source = SourceImage(path, str(path))
    assert (source.height, source.width) == (64, 96)
    for pixels in (read_image(path), source.pixels(1)):
        assert difference(as_array(pixels), upright) < 4
    halved = as_array(SourceImage(path, str(path)).pixels(2))
    assert halved.shape == (32, 48, 3)
    expected = np.array(upright_photo().resize((48, 32), Image.Resampling.BOX))
    assert difference(halved, expected) < 6
    if orientation != 1:  # the stored pixels, not turned, are far from the photo
        unturned = np.array(stored(orientation).resize((96, 64)))
        assert difference(unturned, upright) > 20


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_png_photo_with_exif_comes_out_upright(tmp_path: Path, orientation: int) -> None:
    path = save(stored(orientation), tmp_path / "photo.png", orientation)
    assert np.array_equal(as_array(read_image(path)), np.array(upright_photo()))
    source = SourceImage(path, str(path))
    assert (source.height, source.width) == (64, 96)


def test_a_garbled_exif_block_counts_as_upright(tmp_path: Path) -> None:
    path = save(upright_photo(), tmp_path / "photo.jpg", 6, quality=95)
    data = bytearray(path.read_bytes())
    tiff = data.index(b"Exif\x00\x00") + 6
    data[tiff : tiff + 8] = b"\x00" * 8  # its byte order and first directory gone
    path.write_bytes(bytes(data))
    assert jpeg_orientation(bytes(data)) == 1
    assert as_array(read_image(path)).shape == (64, 96, 3)


def gray_photo() -> np.ndarray:
    """flower.jpg in 8-bit gray, 48 x 32."""
    return np.array(photograph("flower").convert("L").resize((48, 32)))


def test_a_16_bit_png_is_scaled_to_8_bits_not_saturated(tmp_path: Path) -> None:
    gray = gray_photo()
    deep = gray.astype(np.uint16) * 257 + 100  # off the multiples of 257, within rounding
    Image.fromarray(deep).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode == "I;16"
    pixels = as_array(read_image(tmp_path / "deep.png"))
    assert np.array_equal(pixels, np.repeat(gray[:, :, None], 3, axis=2))
    assert 60 < pixels.mean() < 200  # Pillow's own conversion gives about 255 everywhere
    crop_first = as_array(SourceImage(tmp_path / "deep.png", "deep.png").pixels())
    assert np.array_equal(crop_first, pixels)


def test_16_bit_and_32_bit_tiffs_are_scaled(tmp_path: Path) -> None:
    gray = gray_photo()
    Image.fromarray(gray.astype(np.uint16) * 257).save(tmp_path / "deep16.tif")
    Image.fromarray(gray.astype(np.int32) * 257, mode="I").save(tmp_path / "deep32.tif")
    for name in ("deep16.tif", "deep32.tif"):
        assert np.array_equal(as_array(read_image(tmp_path / name))[:, :, 0], gray), name


def test_float_images_in_0_to_1_are_scaled_and_others_stretched(tmp_path: Path) -> None:
    gray = gray_photo()
    Image.fromarray(gray.astype(np.float32) / 255).save(tmp_path / "unit.tif")
    assert np.array_equal(as_array(read_image(tmp_path / "unit.tif"))[:, :, 0], gray)
    wide = gray.astype(np.float32) * 4 - 300  # a range of its own: stretched to 0..255
    Image.fromarray(wide).save(tmp_path / "wide.tif")
    stretched = as_array(read_image(tmp_path / "wide.tif"))[:, :, 0].astype(np.float64)
    low, high = float(gray.min()), float(gray.max())
    expected = (gray.astype(np.float64) - low) * 255 / (high - low)
    assert np.abs(stretched - expected).max() <= 1
    assert (stretched.min(), stretched.max()) == (0, 255)


def test_a_cmyk_photo_keeps_its_colours(tmp_path: Path) -> None:
    photo = upright_photo()
    photo.convert("CMYK").save(tmp_path / "print.tif")
    assert np.array_equal(as_array(read_image(tmp_path / "print.tif")), np.array(photo))
    photo.convert("CMYK").save(tmp_path / "print.jpg", quality=95)
    assert difference(as_array(read_image(tmp_path / "print.jpg")), np.array(photo)) < 3


def test_a_palette_photo_with_a_transparent_colour_shows_white_there(tmp_path: Path) -> None:
    palette = upright_photo().quantize(16)
    indices = np.array(palette)
    hidden = int(np.bincount(indices.ravel()).argmax())
    palette.save(tmp_path / "palette.png", transparency=hidden)
    pixels = as_array(read_image(tmp_path / "palette.png"))
    colours = np.array(palette.convert("RGB"))
    assert (pixels[indices == hidden] == 255).all()
    assert np.array_equal(pixels[indices != hidden], colours[indices != hidden])


@pytest.mark.parametrize("mode", ["LA", "RGBA"])
def test_transparency_is_composited_on_white(tmp_path: Path, mode: str) -> None:
    photo = upright_photo().convert(mode[:-1])
    alpha = np.tile(np.linspace(0, 255, 96).round().astype(np.uint8), (64, 1))
    image = photo.copy()
    image.putalpha(Image.fromarray(alpha))
    image.save(tmp_path / "faded.png")
    pixels = as_array(read_image(tmp_path / "faded.png")).astype(np.float64)
    colour = np.array(photo.convert("RGB"), dtype=np.float64)
    weight = alpha[:, :, None] / 255
    expected = colour * weight + 255 * (1 - weight)
    assert np.abs(pixels - expected).max() <= 1
    assert (pixels[:, 0] == 255).all()  # fully transparent: white, not the hidden colour


def corrupt_jpeg() -> bytes:
    """flower.jpg with 2,000 bytes in the middle of its compressed data replaced by noise:
    libjpeg-turbo warns about it ("Corrupt JPEG data: premature end of data segment") and
    fails, and so does Pillow."""
    encoded = io.BytesIO()
    photograph("flower").save(encoded, "JPEG", quality=90)
    data = bytearray(encoded.getvalue())
    middle = len(data) // 2
    data[middle : middle + 2000] = np.random.default_rng(0).bytes(2000)
    return bytes(data)


def test_a_corrupt_jpeg_is_one_error_with_libjpegs_warning_in_it_and_nothing_printed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "corrupt.jpg"
    path.write_bytes(corrupt_jpeg())
    with pytest.raises(DataError) as full_size:
        read_image(path)
    with pytest.raises(DataError) as reduced:  # Pillow's draft mode: libjpeg-turbo not asked
        SourceImage(path, str(path)).pixels(2)
    failed = f"cannot read image {path}: broken data stream when reading image file"
    assert str(full_size.value) == f"{failed} (Corrupt JPEG data: premature end of data segment)"
    assert str(reduced.value) == failed
    assert capfd.readouterr() == ("", "")


def test_text_written_to_the_terminal_during_a_decode_is_kept(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only libjpeg's lines are held back: another thread's line written to the terminal
    while an image decodes reaches it when the decode ends."""

    def decoder(data: torch.Tensor, mode: int, orientation: bool) -> torch.Tensor:
        os.write(2, b"Corrupt JPEG data: bad Huffman code\nanother thread's line\n")
        raise RuntimeError("refused")  # then Pillow decodes it

    monkeypatch.setattr(image_decode, "_libjpeg_decoder", lambda: (decoder, 0))
    path = save(upright_photo(), tmp_path / "photo.jpg", quality=95)
    assert difference(as_array(read_image(path)), np.array(upright_photo())) < 4
    assert capfd.readouterr() == ("", "another thread's line\n")
    with decoder_output() as printed, decoder_output() as inner:
        os.write(2, b"Premature end of JPEG file\n")
    assert (printed.lines, inner.lines) == (("Premature end of JPEG file",), ())


def test_a_jpeg_libjpeg_recovers_from_decodes_without_a_word(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    encoded = io.BytesIO()
    upright_photo().save(encoded, "JPEG", quality=95)
    data = encoded.getvalue()
    tables = data.index(b"\xff\xdb")
    path = tmp_path / "extra.jpg"
    path.write_bytes(data[:tables] + b"\x00\x01" + data[tables:])  # 2 stray bytes
    assert difference(as_array(read_image(path)), np.array(upright_photo())) < 4
    assert capfd.readouterr() == ("", "")
