"""The ``data`` section: the data set, its views and their augmentations, the loaders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from hookbus.engine.section import MAX_PIXELS, Positive, Section


class AugmentConfig(Section):
    """Per-view augmentations, applied to a whole batch at once."""

    crop_area: tuple[float, float] = Field(
        (0.5, 1.0), description="random resized crop: area range"
    )
    crop_aspect: tuple[float, float] = Field(
        (0.75, 1.3333), description="random resized crop: aspect ratio range"
    )
    shift: float = Field(0.1, ge=0, le=1, description="random translation, fraction of size")
    rotation: float = Field(15.0, ge=0, le=180, description="random rotation, +- degrees")
    contrast: tuple[float, float] = Field((0.7, 1.3), description="contrast factor range")
    brightness: float = Field(0.1, ge=0, le=10, description="brightness shift, +- this value")
    noise_std: float = Field(0.1, ge=0, le=10, description="Gaussian noise standard deviation")
    erase_prob: float = Field(0.5, ge=0, le=1, description="probability of random erasing")
    erase_area: tuple[float, float] = Field((0.05, 0.2), description="random erasing: area range")

    @model_validator(mode="after")
    def _ordered_ranges(self) -> AugmentConfig:
        for key in ("crop_area", "crop_aspect", "contrast", "erase_area"):
            low, high = getattr(self, key)
            if not 0 < low <= high:
                raise ValueError(f"{key} must be (low, high) with 0 < low <= high")
        return self


class SmallViewsConfig(Section):
    """Multi-crop: small views made beside the ``data.num_views`` large ones."""

    count: int = Field(0, ge=0, le=64, description="small views per image (0: no multi-crop)")
    size: int = Field(12, ge=4, le=MAX_PIXELS, description="side of the small views, in pixels")
    crop_area: tuple[float, float] = Field(
        (0.25, 0.6), description="random resized crop of the small views: area range"
    )

    @model_validator(mode="after")
    def _ordered_area(self) -> SmallViewsConfig:
        low, high = self.crop_area
        if not 0 < low <= high <= 1:
            raise ValueError("crop_area must be (low, high) with 0 < low <= high <= 1")
        return self


class ViewAugmentConfig(Section):
    """The probabilities of one large view where they differ from the shared ones of
    ``data.torchvision`` (e.g. blur 1.0 and 0.1, solarization 0.0 and 0.2 on two views);
    a key left unset (null) keeps the shared value."""

    flip_prob: float | None = Field(
        None, ge=0, le=1, description="horizontal flip probability; null: the shared one"
    )
    color_jitter_prob: float | None = Field(
        None, ge=0, le=1, description="color jitter probability; null: the shared one"
    )
    grayscale_prob: float | None = Field(
        None, ge=0, le=1, description="random grayscale probability; null: the shared one"
    )
    blur_prob: float | None = Field(
        None, ge=0, le=1, description="Gaussian blur probability; null: the shared one"
    )
    solarize_prob: float | None = Field(
        None, ge=0, le=1, description="solarization probability; null: the shared one"
    )


class TorchvisionAugmentConfig(Section):
    """The crop, flip, colour, blur and solarize augmentations of the image pipelines
    (``data.pipeline`` ``torchvision`` and ``crop_first``): one set of distributions for
    every view, and per-view probabilities in ``per_view``."""

    crop_scale: tuple[float, float] = Field(
        (0.14, 1.0), description="random resized crop of the large views: area range"
    )
    flip_prob: float = Field(0.5, ge=0, le=1, description="horizontal flip probability")
    color_jitter: tuple[float, float, float, float] = Field(
        (0.4, 0.4, 0.2, 0.1),
        description="brightness, contrast, saturation, hue jitter: factors drawn from "
        "[1 - x, 1 + x] (hue: a shift in [-x, x] turns, x at most 0.5)",
    )
    color_jitter_prob: float = Field(0.8, ge=0, le=1, description="color jitter probability")
    grayscale_prob: float = Field(0.2, ge=0, le=1, description="random grayscale probability")
    blur_prob: float = Field(0.5, ge=0, le=1, description="Gaussian blur probability")
    blur_sigma: tuple[float, float] = Field(
        (0.1, 2.0), description="Gaussian blur: standard deviation range, in pixels"
    )
    solarize_prob: float = Field(0.0, ge=0, le=1, description="solarization probability")
    per_view: list[ViewAugmentConfig] = Field(
        default_factory=list,
        max_length=64,
        description="probabilities of large views 1, 2, ... that differ from the shared "
        "ones (at most data.num_views entries; small views take the shared ones)",
    )
    mean: tuple[float, float, float] = Field(
        (0.485, 0.456, 0.406), description="per-channel mean used to normalise"
    )
    std: tuple[Positive, Positive, Positive] = Field(
        (0.229, 0.224, 0.225), description="per-channel standard deviation used to normalise"
    )

    @model_validator(mode="after")
    def _ranges(self) -> TorchvisionAugmentConfig:
        low, high = self.crop_scale
        if not 0 < low <= high <= 1:
            raise ValueError("crop_scale must be (low, high) with 0 < low <= high <= 1")
        low, high = self.blur_sigma
        if not 0 < low <= high:
            raise ValueError("blur_sigma must be (low, high) with 0 < low <= high")
        if any(value < 0 for value in self.color_jitter) or self.color_jitter[3] > 0.5:
            raise ValueError(
                "color_jitter must be 4 values >= 0 (brightness, contrast, saturation, hue), "
                "hue at most 0.5"
            )
        return self

    def for_view(self, index: int) -> TorchvisionAugmentConfig:
        """The settings of large view ``index`` (from 0): ``per_view[index]``'s
        probabilities over the shared ones."""
        if index >= len(self.per_view):
            return self
        changes = self.per_view[index].model_dump(exclude_none=True)
        return self.model_copy(update=changes)


class ImageFolderConfig(Section):
    """Where the ``image_folder`` data set reads its images."""

    train_dir: Path | None = Field(
        None,
        description="train images: every image under it, at any depth (or its class "
        "folders: labels)",
    )
    test_dir: Path | None = Field(
        None,
        description="test images, read as train_dir is (class folders named as there); "
        "None: train_dir",
    )
    labels: Literal["none", "class_folders"] = Field(
        "none",
        description="none: the images are unlabelled, read recursively, loose or in "
        "folders; class_folders: the folders directly in train_dir and test_dir are the "
        "classes (for kNN meters, linear evaluation, fine-tuning)",
    )
    skip_unreadable: bool = Field(
        False,
        description="false: an image that cannot be decoded (truncated, garbled) stops the "
        "run with one line naming it; true: it is skipped (another image of its batch "
        "takes its place), listed in unreadable_images.txt in the run directory and "
        "counted at the end, up to the max_unreadable bounds",
    )
    max_unreadable_count: int | None = Field(
        None,
        ge=0,
        le=10**9,
        description="with skip_unreadable: the run stops once more images than this were "
        "skipped; null: no bound by count",
    )
    max_unreadable_fraction: float = Field(
        0.01,
        ge=0,
        le=1,
        description="with skip_unreadable: the run stops once more than this fraction of "
        "the train images were skipped",
    )


class ShardsConfig(Section):
    """Where the ``shards`` data set reads its MDS shards (written by ``hookbus shard``)."""

    path: str | None = Field(
        None, description="train shards: a folder written by hookbus shard, or its s3:// URL"
    )
    test_path: str | None = Field(None, description="test shards, the same classes; None: path")
    cache_dir: Path | None = Field(
        None,
        description="where shards read from an s3:// URL are kept, a folder for each URL "
        "(needed for one)",
    )
    canonical_nodes: int = Field(
        1,
        ge=1,
        le=4096,
        description="the groups of shards the shuffle keeps together; the train order is a "
        "function of it and trainer.seed, not of the number of ranks: keep it for a run",
    )


class SyntheticDataConfig(Section):
    """The generated ``synthetic`` data set: one oriented stripe pattern per class."""

    num_classes: int = Field(4, ge=2, le=100_000, description="classes")
    train_size: int = Field(256, ge=1, le=10**7, description="train images")
    test_size: int = Field(64, ge=1, le=10**7, description="test images")
    channels: int = Field(3, ge=1, le=64, description="image channels")


class DataConfig(Section):
    name: str = Field("digits", description="data set, by its registered name")
    image_size: int = Field(
        16, ge=4, le=MAX_PIXELS, description="side of the square images, in pixels"
    )
    num_views: int = Field(
        2, ge=1, le=64, description="large augmented views per image (the small ones: small_views)"
    )
    small_views: SmallViewsConfig = Field(default_factory=SmallViewsConfig)
    pipeline: Literal["batch", "torchvision", "crop_first"] = Field(
        "batch",
        description="batch: batched augmentations of in-memory image tensors (data.augment); "
        "for images of any size (image_folder) with the distributions of data.torchvision: "
        "torchvision (per-image transforms.v2) or crop_first (each view cut first, from a "
        "JPEG decoded at reduced size when its crops allow, then the color augmentations "
        "on the uint8 crops, in the loader or on the training device: augment_device)",
    )
    augment_device: Literal["cpu", "model", "cuda"] = Field(
        "cpu",
        description="crop_first: where the color augmentations (jitter, grayscale, blur, "
        "solarization, normalisation) run; cpu: in the loader (its workers); model: on the "
        "training device, after the batch reaches it; cuda: the same, refused without CUDA",
    )
    batch_size: int = Field(256, ge=1, le=65_536, description="train batch size per process")
    test_batch_size: int = Field(256, ge=1, le=65_536, description="test and memory batch size")
    drop_last: bool = Field(True, description="drop the last partial train batch")
    num_workers: Annotated[int, Field(ge=0, le=256)] | Literal["auto"] = Field(
        "auto",
        description="DataLoader worker processes; auto: none for data.pipeline batch "
        "(in-memory tensors), else one per core of the process but one, at most 8",
    )
    pin_memory: bool | Literal["auto"] = Field(
        "auto", description="pin the batches' host memory; auto: when training on a GPU"
    )
    prefetch_factor: int = Field(
        2, ge=1, le=1024, description="batches each worker prepares ahead (with num_workers > 0)"
    )
    test_size: int = Field(500, ge=1, le=10**7, description="held-out images (digits)")
    augment: AugmentConfig = Field(default_factory=AugmentConfig)
    torchvision: TorchvisionAugmentConfig = Field(default_factory=TorchvisionAugmentConfig)
    folder: ImageFolderConfig = Field(default_factory=ImageFolderConfig)
    shards: ShardsConfig = Field(default_factory=ShardsConfig)
    synthetic: SyntheticDataConfig = Field(default_factory=SyntheticDataConfig)

    @model_validator(mode="after")
    def _folder_needs_an_image_pipeline(self) -> DataConfig:
        if self.name == "image_folder" and self.pipeline == "batch":
            raise ValueError(
                "data.name image_folder needs data.pipeline: crop_first or torchvision (its "
                "images differ in size, so each is cropped on its own)"
            )
        if self.folder.skip_unreadable and self.name != "image_folder":
            raise ValueError(
                f"data.folder.skip_unreadable is for data.name image_folder, not {self.name}"
            )
        if self.augment_device != "cpu" and self.pipeline != "crop_first":
            raise ValueError(
                f"data.augment_device {self.augment_device} needs data.pipeline: crop_first "
                f"(the {self.pipeline} pipeline augments in the loader only)"
            )
        if len(self.torchvision.per_view) > self.num_views:
            raise ValueError(
                f"data.torchvision.per_view has {len(self.torchvision.per_view)} entries but "
                f"data.num_views is {self.num_views}: give one entry per large view at most"
            )
        return self
