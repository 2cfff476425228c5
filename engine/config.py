"""The trainer config: pydantic models that reject unknown keys and wrong types."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Size = Annotated[int, Field(ge=1, le=65_536)]
"""A layer width or a count of features: 1 to 65536."""

Positive = Annotated[float, Field(gt=0)]
"""A number above zero (a standard deviation to divide by)."""

Decay = Annotated[float, Field(ge=0, lt=1)]
"""A decay rate of a running average: 0 to just below 1."""

MAX_PIXELS = 4096
"""Largest image side accepted, in pixels (a 4096x4096 RGB float image is 200 MB)."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are checked on set."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    def changed_keys(self) -> list[str]:
        """The keys whose value differs from their default, in field order; a nested
        section's as ``section.key``. A key set to its default value is not changed."""
        changed = []
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            default = field.get_default(call_default_factory=True)
            if isinstance(value, Section) and type(value) is type(default):
                changed += [f"{name}.{key}" for key in value.changed_keys()]
            elif value != default:
                changed.append(name)
        return changed


class TrainerConfig(Section):
    train_step_name: str = Field(
        "standard_train_step", description="train step, by its registered name"
    )
    seed: int = Field(
        0, ge=0, le=2**32 - 1, description="seed of model init, data order and augmentations"
    )
    test_model: bool = Field(True, description="run test phases")
    test_only: bool = Field(False, description="run one test phase and no training")
    test_every_num_epochs: int = Field(
        1, ge=1, le=100_000, description="a test phase after every N train phases"
    )
    log_frequency: int = Field(
        10, ge=1, le=10**9, description="log a line every N train iterations"
    )
    resume_stopped: bool = Field(
        False,
        description="go on with a run that a handler ended early with engine.terminate() "
        "(without it, such a run counts as finished and a rerun trains nothing)",
    )
    imports: list[str] = Field(
        default_factory=list,
        description="modules imported before the run, so that the steps, hooks and "
        "components they register can be chosen by name",
    )
    import_paths: list[str] = Field(
        default_factory=list,
        description="folders put at the front of sys.path before trainer.imports is "
        "imported (relative: to the recipe's folder, or in an override to the current "
        "directory); nothing is imported from the working directory otherwise",
    )


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
    ``data.torchvision`` (BYOL's two views: blur 1.0 and 0.1, solarization 0.0 and 0.2);
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
    """The SimCLR-family augmentations of the image pipelines (``data.pipeline``
    ``torchvision`` and ``crop_first``): one set of distributions for every view, and
    per-view probabilities in ``per_view``."""

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
        None, description="train images: a folder of class folders, or a flat folder"
    )
    test_dir: Path | None = Field(
        None, description="test images, class folders named as in train_dir; None: train_dir"
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
    synthetic: SyntheticDataConfig = Field(default_factory=SyntheticDataConfig)

    @model_validator(mode="after")
    def _folder_needs_an_image_pipeline(self) -> DataConfig:
        if self.name == "image_folder" and self.pipeline == "batch":
            raise ValueError(
                "data.name image_folder needs data.pipeline: crop_first or torchvision (its "
                "images differ in size, so each is cropped on its own)"
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


class CudaCacheConfig(Section):
    clear_cuda_cache: bool = Field(False, description="empty the CUDA cache periodically")
    clear_freq: int = Field(100, ge=1, le=10**9, description="every N train iterations")


class AmpConfig(Section):
    enabled: bool = Field(False, description="forward and loss under autocast")
    dtype: Literal["bf16", "fp16"] = Field("bf16", description="fp16 adds a GradScaler")


class CompileConfig(Section):
    """``torch.compile`` of the model's forward in train and test steps. Checkpoints,
    exports, the optimizer and the hooks keep the plain module (``state.base_model``)."""

    enabled: bool = Field(
        False,
        description="compile the model's forward with torch.compile (after the DDP wrap); "
        "off by default: on the CPU it did not pay for the shipped recipes "
        "(docs/guides/speed.md)",
    )
    backend: str = Field(
        "inductor",
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="torch.compile backend, by name: one of torch._dynamo.list_backends(None) "
        "(inductor, aot_eager, eager, ...) or one registered by a module in trainer.imports; "
        "checked when enabled",
    )
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = (
        Field(
            "default",
            description="inductor's mode; reduce-overhead (CUDA graphs) needs a CUDA device",
        )
    )
    dynamic: bool | None = Field(
        None,
        description="dynamic shapes: None recompiles with dynamic sizes when a size changes "
        "(multi-crop views, a smaller last batch), true from the start, false never",
    )
    fullgraph: bool = Field(
        False, description="one graph for the whole forward: a graph break is an error"
    )

    @model_validator(mode="after")
    def _mode_is_inductors(self) -> CompileConfig:
        if self.mode != "default" and self.backend != "inductor":
            raise ValueError(
                f"mode {self.mode} is an inductor setting; backend {self.backend} has no "
                "modes: set mode=default or backend=inductor"
            )
        return self


class ViTConfig(Section):
    """Sizes of a Vision Transformer backbone (``vit_*``); None keeps the preset's."""

    patch_size: int | None = Field(
        None, ge=1, le=256, description="side of the square patches, in pixels; None: preset's"
    )
    width: int | None = Field(
        None, ge=1, le=8192, description="token width (hidden size, = out_dim); None: preset's"
    )
    depth: int | None = Field(
        None, ge=1, le=64, description="transformer blocks; None: the preset's"
    )
    heads: int | None = Field(
        None, ge=1, le=128, description="attention heads (divide the width); None: preset's"
    )
    mlp_dim: int | None = Field(
        None, ge=1, le=32_768, description="hidden size of each block's MLP; None: preset's"
    )
    freeze_patch_embedding: bool = Field(
        False,
        description="keep the patch embedding (conv_proj) at its random init: no gradient, "
        "no update (MoCo v3's random patch projection, for stability)",
    )
    position_embedding: Literal["learned", "sincos"] = Field(
        "learned",
        description="the encoder's position embedding: learned (torchvision's), or sincos, "
        "the fixed 2-D sine-cosine table of MoCo v3 and MAE (frozen; kept under "
        "torchvision's key; the width a multiple of 4)",
    )
    patch_embedding_init: Literal["torchvision", "xavier_uniform"] = Field(
        "torchvision",
        description="init of the patch embedding (conv_proj): torchvision's truncated normal, "
        "or xavier_uniform over the kernel as a Linear layer, bias zero (MoCo v3, MAE)",
    )
    class_token_init: Literal["zeros", "normal"] = Field(
        "zeros",
        description="init of the class token: zeros (torchvision's), or normal with std 0.02 (MAE)",
    )
    drop_path: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="stochastic depth: in training each block's attention and MLP branches "
        "are dropped per sample at a rate rising linearly to this at the last block "
        "(fine-tuning ViT-B: 0.1); never in a forward without gradients (a momentum teacher)",
    )
    registers: int = Field(
        0,
        ge=0,
        le=64,
        description="register tokens (DINOv2 with registers: 4): learned tokens beside the "
        "class token, dropped from the outputs; a backbone with them does not export to "
        "torchvision's VisionTransformer",
    )

    @model_validator(mode="after")
    def _heads_divide_the_width(self) -> ViTConfig:
        if self.width is not None and self.heads is not None and self.width % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide the width ({self.width})")
        if self.position_embedding == "sincos" and self.width is not None and self.width % 4:
            raise ValueError(
                f"position_embedding sincos needs a width divisible by 4, not {self.width}"
            )
        return self


class BackboneConfig(Section):
    """The backbone, by name, and its options. Each built-in backbone reads some of them
    (its builder says which); one set for a backbone that does not read it is refused
    when the run is validated, naming the key."""

    name: str = Field(
        "small_cnn",
        description="backbone, by its registered name, or tv:NAME for torchvision's "
        "classification model NAME, e.g. tv:resnet34 (random init, last Linear layer removed)",
    )
    width: int = Field(32, ge=1, le=4096, description="channels of the first layer (small_cnn)")
    in_channels: int = Field(1, ge=1, le=64, description="image channels")
    small_stem: bool = Field(
        False,
        description="resnet18, resnet50: a 3x3 stride-1 first convolution and no max-pool, "
        "for small images (an export then needs the same stem in torchvision's model)",
    )
    zero_init_residual: bool = Field(
        False,
        description="resnet18, resnet50: start the last BatchNorm of every residual block at "
        "a zero scale, so each block starts as the identity (MoCo v3, SimSiam)",
    )
    image_size: int | None = Field(
        None,
        ge=1,
        le=MAX_PIXELS,
        description="image side the backbone is built for (vit_*: the grid of its position "
        "embedding; tv:*: the trial forward that checks the feature size; the others do not "
        "read it); None: data.image_size",
    )
    vit: ViTConfig = Field(
        default_factory=ViTConfig, description="vit_*: sizes that override the preset's"
    )


class HeadConfig(Section):
    dims: list[Size | Literal["backbone"]] = Field(
        default_factory=lambda: ["backbone", 128, 64],
        min_length=2,
        description="projection MLP sizes, input first; an input of backbone: the "
        "backbone's feature size (out_dim), which then follows model.backbone",
    )
    batch_norm: bool = Field(True, description="BatchNorm after each hidden layer")
    output_batch_norm: Literal["none", "affine", "no_affine"] = Field(
        "none",
        description="BatchNorm after the last layer (then without bias): affine with a "
        "learned scale and shift (NNCLR), no_affine without (SimSiam, MoCo v3); none: a "
        "plain Linear",
    )
    hidden_bias: bool = Field(
        True,
        description="biases on the hidden layers; false: none (MoCo v3, SimSiam, NNCLR code)",
    )

    @model_validator(mode="after")
    def _backbone_is_the_input(self) -> HeadConfig:
        if not self.hidden_bias and len(self.dims) < 3:
            raise ValueError(f"hidden_bias false needs a hidden layer; dims {self.dims} has none")
        if "backbone" in self.dims[1:]:
            raise ValueError(
                "dims: backbone stands for the backbone's feature size, the head's input: "
                "only the first entry may be backbone"
            )
        return self


class PredictorConfig(Section):
    """The prediction MLP on top of the projection head (BYOL)."""

    dims: list[Size] = Field(
        default_factory=list,
        description="prediction MLP sizes, input first (= model.head.dims[-1]); empty: none",
    )
    batch_norm: bool = Field(True, description="BatchNorm after each hidden layer")
    output_batch_norm: Literal["none", "affine", "no_affine"] = Field(
        "none",
        description="BatchNorm after the last layer (then without bias), as "
        "model.head.output_batch_norm (MoCo v3's ViT predictor: no_affine)",
    )
    hidden_bias: bool = Field(
        True, description="biases on the hidden layers; false: none, as model.head.hidden_bias"
    )

    @model_validator(mode="after")
    def _input_and_output(self) -> PredictorConfig:
        if len(self.dims) == 1:
            raise ValueError("dims needs an input and an output size, or nothing")
        if not self.hidden_bias and len(self.dims) == 2:
            raise ValueError(f"hidden_bias false needs a hidden layer; dims {self.dims} has none")
        unused = [] if self.dims else self.changed_keys()
        if unused:
            raise ValueError(
                f"model.predictor.{unused[0]} shapes the predictor, but model.predictor.dims "
                f"is empty (no predictor is built): set model.predictor.dims, or remove "
                f"model.predictor.{unused[0]}"
            )
        return self


class PrototypesConfig(Section):
    """A linear layer without bias on the L2-normalised embeddings (SwAV, DINO)."""

    count: int = Field(0, ge=0, le=10**6, description="prototypes (output scores); 0: none")
    weight_norm: bool = Field(
        False,
        description="use L2-normalised prototype weights in the forward (DINO's "
        "weight-normalised last layer); SwAV normalises them in a hook instead",
    )

    @model_validator(mode="after")
    def _weight_norm_needs_prototypes(self) -> PrototypesConfig:
        if self.weight_norm and not self.count:
            raise ValueError(
                "model.prototypes.weight_norm normalises the prototypes, but "
                "model.prototypes.count is 0 (no prototypes are built): set "
                "model.prototypes.count, or remove model.prototypes.weight_norm"
            )
        return self


class LinearEvalConfig(Section):
    """Linear evaluation: a linear classifier trained on a frozen backbone."""

    enabled: bool = Field(
        False,
        description="train a linear classifier on the frozen backbone; the SSL parts of the "
        "recipe (model.head, model.predictor, model.prototypes) are not built",
    )
    num_classes: int = Field(10, ge=2, le=100_000, description="classes of the linear classifier")
    feature_norm: bool = Field(
        True,
        description="normalise each feature dimension (BatchNorm without affine parameters) "
        "before the classifier",
    )
    checkpoint: Path | None = Field(
        None,
        description="backbone weights to start from: a hookbus checkpoint or an exported "
        "state dict; None: random init",
    )


class FineTuneConfig(Section):
    """Fine-tuning: the backbone trained end to end with a linear classifier on the labels."""

    enabled: bool = Field(
        False,
        description="train the backbone and a linear classifier; the SSL parts of the recipe "
        "(model.head, model.predictor, model.prototypes) are not built",
    )
    num_classes: int = Field(10, ge=2, le=100_000, description="classes of the linear classifier")
    feature_norm: bool = Field(
        False,
        description="normalise each feature dimension (BatchNorm without affine parameters) "
        "before the classifier",
    )
    checkpoint: Path | None = Field(
        None,
        description="backbone weights to start from: a hookbus checkpoint or an exported "
        "state dict; None: random init",
    )
    backbone_lr_scale: float = Field(
        1.0,
        gt=0,
        le=100,
        description="the backbone's learning rate as a multiple of the classifier's "
        "(optimizer.lr, on its schedule)",
    )
    layer_decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="ViT backbones: a parameter at depth d (0: patch embedding, class token, "
        "position embedding; i + 1: encoder layer i; L + 1: final LayerNorm, as the "
        "classifier) learns at lr * layer_decay^(L + 1 - d); 1: off",
    )


class MaeDecoderConfig(Section):
    """MAE's light decoder: transformer blocks from the encoded visible patches and mask
    tokens to the pixels of every patch (built only when ``loss.name`` is ``mae``)."""

    width: int = Field(
        512, ge=4, le=8192, description="token width of the decoder (a multiple of 4 and of heads)"
    )
    depth: int = Field(8, ge=1, le=64, description="transformer blocks of the decoder")
    heads: int = Field(16, ge=1, le=128, description="attention heads of the decoder")
    mlp_dim: int | None = Field(
        None, ge=1, le=32_768, description="hidden size of each block's MLP; None: 4 x width"
    )

    @model_validator(mode="after")
    def _width_fits(self) -> MaeDecoderConfig:
        if self.width % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide the width ({self.width})")
        if self.width % 4:
            raise ValueError(
                f"width ({self.width}) must be a multiple of 4: the fixed 2-D sine-cosine "
                "position embedding gives each axis a sine and a cosine half"
            )
        return self


class ModelConfig(Section):
    backbone: BackboneConfig = Field(default_factory=BackboneConfig)
    head: HeadConfig = Field(default_factory=HeadConfig)
    predictor: PredictorConfig = Field(default_factory=PredictorConfig)
    prototypes: PrototypesConfig = Field(default_factory=PrototypesConfig)
    linear_eval: LinearEvalConfig = Field(default_factory=LinearEvalConfig)
    fine_tune: FineTuneConfig = Field(default_factory=FineTuneConfig)
    mae_decoder: MaeDecoderConfig = Field(
        default_factory=MaeDecoderConfig, description="loss.name mae: the decoder's sizes"
    )
    amp: AmpConfig = Field(default_factory=AmpConfig)
    channels_last: bool = Field(
        False,
        description="model and the step's 4-d image batches in channels-last (NHWC) memory format: "
        "faster convolutions under autocast on recent GPUs",
    )
    cuda_cache: CudaCacheConfig = Field(default_factory=CudaCacheConfig)
    compile: CompileConfig = Field(default_factory=CompileConfig)


class MomentumSchedule(Section):
    """An EMA momentum rising from ``momentum`` to ``final_momentum`` on a half cosine over
    the run's train iterations."""

    momentum: float = Field(0.99, ge=0, le=1, description="EMA momentum at the first step")
    final_momentum: float = Field(1.0, ge=0, le=1, description="EMA momentum at the last step")


class MocoConfig(MomentumSchedule):
    """MoCo v2: the momentum key encoder and the queue of keys."""

    temperature: float = Field(0.2, ge=1e-3, le=100, description="softmax temperature")
    queue_size: int = Field(1024, ge=1, le=10**7, description="keys kept as negatives")
    shuffle_bn: bool = Field(
        True,
        description=(
            "with several ranks, the key encoder's BatchNorm sees a shuffled share of the "
            "global batch (shuffle-BN), so its statistics do not pair queries with keys"
        ),
    )


class ByolConfig(MomentumSchedule):
    """BYOL: the target network, an EMA of the online backbone and projector."""


class MocoV3Config(MomentumSchedule):
    """MoCo v3: the momentum encoder (an EMA of backbone and projector) gives the keys of
    the global batch for the online predictor's queries; no queue."""

    temperature: float = Field(
        0.2, ge=1e-3, le=100, description="softmax temperature tau (the loss is scaled by 2 tau)"
    )


class SwavConfig(Section):
    """SwAV: swapped prediction of Sinkhorn-Knopp codes."""

    temperature: float = Field(
        0.1, ge=1e-3, le=100, description="softmax temperature of the predictions"
    )
    epsilon: float = Field(
        0.05, ge=1e-4, le=100, description="Sinkhorn-Knopp entropy regularisation"
    )
    sinkhorn_iterations: int = Field(3, ge=1, le=1000, description="Sinkhorn-Knopp iterations")
    assign_views: int = Field(2, ge=1, le=64, description="the first N views get codes")
    freeze_prototypes_iterations: int = Field(
        0, ge=0, le=10**9, description="prototypes get no update in the first N train iterations"
    )
    queue_size: int = Field(
        0, ge=0, le=10**7, description="embeddings queued per assigned view; 0: off"
    )
    queue_start_epoch: int = Field(
        0, ge=0, le=100_000, description="first epoch (0-based) with a queue"
    )


class DinoConfig(MomentumSchedule):
    """DINO: self-distillation with a momentum teacher, centering and sharpening."""

    student_temperature: float = Field(
        0.1, ge=1e-3, le=100, description="student softmax temperature"
    )
    teacher_temperature: float = Field(
        0.04, ge=1e-3, le=100, description="teacher temperature after warm-up"
    )
    warmup_teacher_temperature: float = Field(
        0.04, ge=1e-3, le=100, description="teacher temperature at the first epoch"
    )
    warmup_teacher_epochs: int = Field(
        0, ge=0, le=100_000, description="epochs of linear teacher-temperature warm-up"
    )
    center_momentum: float = Field(0.9, ge=0, lt=1, description="EMA momentum of the center")
    global_views: int = Field(
        2, ge=1, le=64, description="the first N views go through the teacher"
    )
    freeze_last_layer_epochs: int = Field(
        1, ge=0, le=100_000, description="the last layer (prototypes) gets no update for N epochs"
    )


class IbotConfig(Section):
    """iBOT's masked patch-token loss (loss.name ibot and dinov2): the student sees its
    global views with block-wise masked patches, the teacher sees them whole, and each
    masked patch token predicts the teacher's. The class-token part, the teacher and its
    temperatures are ``loss.dino``'s."""

    mask_probability: float = Field(
        0.5, ge=0, le=1, description="share of the global views that are masked"
    )
    mask_ratio: tuple[Decay, Decay] = Field(
        (0.1, 0.5),
        description="range of the share of a masked view's patches that are masked, "
        "spread evenly over the masked views of a batch",
    )
    loss_weight: float = Field(1.0, ge=0, le=100, description="weight of the patch loss")
    separate_head: bool = Field(
        False,
        description="the patch tokens get their own head (model.head's sizes) and "
        "last layer; false: they share the class token's (DINOv2's default)",
    )
    patch_prototypes: int = Field(
        0, ge=0, le=10**6, description="separate_head: outputs of the patch head's last layer"
    )
    patch_center_momentum: float = Field(
        0.9, ge=0, lt=1, description="loss.name ibot: EMA momentum of the patch center"
    )

    @model_validator(mode="after")
    def _ratios_and_head(self) -> IbotConfig:
        low, high = self.mask_ratio
        if not 0 <= low <= high <= 1:
            raise ValueError(f"mask_ratio must be [low, high] in [0, 1], got {self.mask_ratio}")
        if self.separate_head != bool(self.patch_prototypes):
            raise ValueError(
                "loss.ibot.separate_head and loss.ibot.patch_prototypes go together: a "
                "separate patch head needs its number of outputs, a shared one has none"
            )
        return self


class Dinov2Config(Section):
    """DINOv2's additions to DINO and iBOT (loss.name dinov2)."""

    centering: Literal["sinkhorn_knopp", "centering"] = Field(
        "sinkhorn_knopp",
        description="teacher targets: sinkhorn_knopp (DINOv2's recipe), or centering, "
        "DINO's running centers (loss.dino.center_momentum, "
        "loss.ibot.patch_center_momentum)",
    )
    sinkhorn_iterations: int = Field(3, ge=1, le=1000, description="Sinkhorn-Knopp iterations")
    koleo_weight: float = Field(
        0.1, ge=0, le=100, description="weight of the KoLeo loss on the global class tokens"
    )
    layer_decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="a backbone parameter at depth d (0: patch embedding, class token, "
        "position embedding, mask token; i + 1: encoder layer i; L + 1: final LayerNorm, "
        "registers, as the heads) learns at lr * layer_decay^(L + 1 - d) (DINOv2: 0.9); 1: off",
    )
    patch_embedding_lr_scale: float = Field(
        1.0,
        gt=0,
        le=1,
        description="the patch embedding's learning rate as a multiple of its layer's "
        "(DINOv2: 0.2)",
    )


class BarlowTwinsConfig(Section):
    """Barlow Twins: the cross-correlation of two views driven toward the identity."""

    lambd: float = Field(
        0.005, ge=0, le=100, description="lambda, the weight of the off-diagonal terms"
    )
    eps: float = Field(1e-5, gt=0, le=1, description="variance epsilon of the BatchNorm")


class VicregConfig(Section):
    """VICReg: invariance, variance and covariance terms, weighted as in the paper."""

    sim_coeff: float = Field(
        25.0, ge=0, le=10_000, description="lambda, the weight of the invariance (MSE) term"
    )
    std_coeff: float = Field(
        25.0,
        ge=0,
        le=10_000,
        description="mu, the weight of the variance (std hinge) terms, averaged over the "
        "two branches as in the authors' code",
    )
    cov_coeff: float = Field(
        1.0, ge=0, le=10_000, description="nu, the weight of the covariance terms"
    )


class NnclrConfig(Section):
    """NNCLR: the nearest neighbour in a support set of earlier embeddings as the positive."""

    temperature: float = Field(0.1, ge=1e-3, le=100, description="softmax temperature tau")
    queue_size: int = Field(
        98_304,
        ge=1,
        le=10**7,
        description="embeddings in the support set (the first view's, of every rank)",
    )


class CrossEntropyConfig(Section):
    """The classification loss of linear evaluation and fine-tuning."""

    label_smoothing: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="the target puts 1 - label_smoothing + label_smoothing / C on the label "
        "and label_smoothing / C on each of the C classes' others (fine-tuning ViTs: 0.1)",
    )


class MaeConfig(Section):
    """MAE: reconstruct the pixels of randomly masked patches from the visible ones."""

    mask_ratio: float = Field(
        0.75, gt=0, lt=1, description="fraction of each image's patches masked (not encoded)"
    )
    norm_pix_loss: bool = Field(
        True,
        description="regress each patch's pixels normalised by their own mean and standard "
        "deviation, not the raw pixels",
    )


class LossConfig(Section):
    name: str = Field(
        "nt_xent",
        description="loss, by its registered name; it selects the method and its hooks: "
        "nt_xent (SimCLR), moco, moco_v3, byol, swav, dino, dinov2, ibot, barlow_twins, "
        "vicreg, simsiam, nnclr, mae, cross_entropy (linear eval, fine-tuning)",
    )
    temperature: float = Field(0.5, ge=1e-3, le=100, description="softmax temperature (nt_xent)")
    moco: MocoConfig = Field(default_factory=MocoConfig)
    byol: ByolConfig = Field(default_factory=ByolConfig)
    moco_v3: MocoV3Config = Field(default_factory=MocoV3Config)
    swav: SwavConfig = Field(default_factory=SwavConfig)
    dino: DinoConfig = Field(default_factory=DinoConfig)
    ibot: IbotConfig = Field(default_factory=IbotConfig)
    dinov2: Dinov2Config = Field(default_factory=Dinov2Config)
    barlow_twins: BarlowTwinsConfig = Field(default_factory=BarlowTwinsConfig)
    vicreg: VicregConfig = Field(default_factory=VicregConfig)
    nnclr: NnclrConfig = Field(default_factory=NnclrConfig)
    mae: MaeConfig = Field(default_factory=MaeConfig)
    cross_entropy: CrossEntropyConfig = Field(default_factory=CrossEntropyConfig)


class OptimizerConfig(Section):
    name: Literal["adamw", "sgd", "lars"] = Field(
        "adamw", description="optimizer; lars: SGD with a per-layer trust ratio"
    )
    lr: float = Field(1e-3, gt=0, le=100, description="peak learning rate")
    weight_decay: float = Field(
        1e-5,
        ge=0,
        le=10,
        description="weight decay of weights and kernels (and of biases and norms unless "
        "exclude_bias_and_norm_from_weight_decay)",
    )
    weight_decay_end: float | None = Field(
        None,
        gt=0,
        le=10,
        description="weight decay at the end of a cosine from optimizer.weight_decay over "
        "the run, set every iteration (DINO: 0.04 to 0.4); unset: constant",
    )
    exclude_bias_and_norm_from_weight_decay: bool = Field(
        True,
        description="no weight decay (nor, with lars, trust ratio) on biases and "
        "normalisation weights (DINO, MAE, LARS methods); false decays every parameter "
        "(SimSiam's and MoCo v3's ViT code)",
    )
    fixed_lr_for: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")]] = Field(
        default_factory=list,
        max_length=16,
        description="model parts (e.g. predictor) that keep optimizer.lr while the "
        "schedule moves the rest (SimSiam's predictor)",
    )
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD and LARS momentum")
    betas: tuple[Decay, Decay] = Field(
        (0.9, 0.999),
        description="AdamW: decay rates of the gradient's running mean and of its square "
        "(MAE pre-training uses [0.9, 0.95])",
    )
    trust_coefficient: float = Field(
        0.001, gt=0, le=10, description="LARS: the trust ratio's coefficient (eta)"
    )
    clip_grad_norm: float = Field(
        0.0, ge=0, le=1e6, description="clip the gradients' global L2 norm to this; 0: off"
    )
    num_epochs: int = Field(40, ge=1, le=100_000, description="number of train phases")
    warmup_epochs: float = Field(
        2.0, ge=0, le=100_000, description="linear warm-up length, in epochs"
    )
    schedule: Literal["cosine", "constant"] = Field(
        "cosine", description="learning-rate decay after warm-up, set every iteration"
    )
    final_lr: float = Field(
        0.0, ge=0, le=100, description="learning rate at the end of cosine decay"
    )
    accumulate_steps: int = Field(1, ge=1, le=65_536, description="batches per optimizer step")

    @model_validator(mode="after")
    def _weight_decay_end_needs_a_start(self) -> OptimizerConfig:
        if self.weight_decay_end is not None and self.weight_decay == 0:
            raise ValueError(
                "optimizer.weight_decay_end ends a cosine that starts at "
                "optimizer.weight_decay, which is 0: set optimizer.weight_decay"
            )
        return self

    @model_validator(mode="after")
    def _betas_need_adamw(self) -> OptimizerConfig:
        if self.name != "adamw" and self.betas != (0.9, 0.999):
            raise ValueError(
                f"optimizer.betas is an AdamW setting; optimizer.name is {self.name!r}"
            )
        return self


class KnnMeterConfig(Section):
    enabled: bool = Field(True, description="kNN top-1 of backbone features in test phases")
    k: int = Field(20, ge=1, le=100_000, description="neighbours")
    vote: Literal["majority", "weighted"] = Field(
        "majority",
        description="majority: one vote per neighbour; weighted: DINO's kNN vote, each "
        "neighbour weighted by exp(cosine similarity / temperature)",
    )
    temperature: float = Field(
        0.07, ge=1e-3, le=100, description="temperature of the weighted vote"
    )


class AccuracyMeterConfig(Section):
    enabled: bool = Field(False, description="top-k accuracy of output logits (linear eval)")
    topk: list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default_factory=lambda: [1, 5], min_length=1, description="the k values"
    )


class CollapseMeterConfig(Section):
    enabled: bool = Field(
        False,
        description="collapse diagnostics: feature std, teacher entropy, prototypes in use",
    )


class MetersConfig(Section):
    knn: KnnMeterConfig = Field(default_factory=KnnMeterConfig)
    accuracy: AccuracyMeterConfig = Field(default_factory=AccuracyMeterConfig)
    collapse: CollapseMeterConfig = Field(default_factory=CollapseMeterConfig)


class CheckpointConfig(Section):
    dir: Path = Field(Path("runs/default"), description="run directory: checkpoints and logs")
    phase_frequency: int = Field(1, ge=0, le=100_000, description="every N train phases (0 = off)")
    iter_frequency: int = Field(0, ge=0, le=10**9, description="every N train iterations (0 = off)")
    keep_last: int = Field(2, ge=1, le=1000, description="checkpoints kept")

    @field_validator("dir", mode="before")
    @classmethod
    def _a_path(cls, value: Any) -> Any:
        """A run directory is named: not empty, no NUL, at most 4096 characters."""
        if isinstance(value, str | Path):
            text = str(value)
            if not text.strip():
                raise ValueError("is empty: name the run directory (runs/my_run, say)")
            if "\0" in text:
                raise ValueError("holds a NUL character")
            if len(text) > 4096 or any(len(part) > 255 for part in Path(text).parts):
                raise ValueError("is too long (4096 characters, 255 per folder name)")
        return value

    auto_resume: bool = Field(True, description="resume from the newest checkpoint in dir")
    async_write: bool = Field(
        False,
        description="copy the state to host memory at the step and write it on a background "
        "thread (training waits for the copy only; costs one host copy of the state)",
    )


class EnabledHook(Section):
    enabled: bool = Field(True, description="attach this hook")


class NanCheckConfig(Section):
    enabled: bool = Field(True, description="stop on a non-finite or diverged loss")
    check_frequency: int | None = Field(
        None,
        ge=1,
        le=10**9,
        description="check every N steps (one host sync each); 1 stops at the first bad step; "
        "null: at log steps (trainer.log_frequency) and iteration checkpoints",
    )
    max_loss: float | None = Field(
        1e8,
        gt=0,
        description="stop when a loss's magnitude exceeds this: the run has diverged; "
        "null: only non-finite losses stop",
    )
    check_state: bool = Field(
        True,
        description="stop when the weights or the optimizer state hold inf or NaN, checked "
        "before each iteration checkpoint and at train phase ends",
    )


class EvaluationReportConfig(Section):
    enabled: bool = Field(False, description="kNN and linear probe, random init vs trained")
    labels_per_class: int = Field(
        10, ge=1, le=100_000, description="labels per class for the probe"
    )
    draws: int = Field(10, ge=1, le=1000, description="label draws averaged")


class OnlineProbeConfig(Section):
    enabled: bool = Field(
        False,
        description="online linear probe: a linear classifier trained on the detached "
        "backbone features of the labelled train batches, probe_top1 every phase",
    )
    num_classes: int | None = Field(
        None, ge=2, le=1_000_000, description="classes of the labels; required when enabled"
    )
    optimizer: Literal["adamw", "sgd"] = Field(
        "adamw", description="the probe's own optimizer (SGD with momentum 0.9)"
    )
    lr: float = Field(1e-3, gt=0, le=100, description="the probe's constant learning rate")
    weight_decay: float = Field(0.0, ge=0, le=10, description="the probe's weight decay")

    @model_validator(mode="after")
    def _classes_when_enabled(self) -> OnlineProbeConfig:
        """An enabled probe names its number of classes."""
        if self.enabled and self.num_classes is None:
            raise ValueError(
                "num_classes is required when the probe is enabled: the number of label "
                "classes (10 for digits, say)"
            )
        return self


class ExtraHookConfig(Section):
    name: str = Field(description="a hook registered with hookbus.register_hook")
    params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")


class WandbConfig(Section):
    enabled: bool = Field(
        False, description="log to Weights & Biases (the wandb extra: pip install 'hookbus[wandb]')"
    )
    project: str = Field("hookbus", min_length=1, max_length=128, description="W&B project")
    entity: str | None = Field(
        None, max_length=128, description="W&B team or user; null: the login's default entity"
    )
    mode: Literal["online", "offline", "disabled"] = Field(
        "online",
        description="online: send as it goes (needs `wandb login`); offline: write to disk only, "
        "upload later with `wandb sync`; disabled: log nothing",
    )
    run_name: str | None = Field(
        None, max_length=128, description="the run's display name; null: W&B picks one"
    )
    tags: list[str] = Field(default_factory=list, description="tags of the W&B run")
    dir: Path | None = Field(
        None,
        description="folder W&B writes its files under (in a wandb/ folder); null: the run "
        "directory",
    )


class MlflowConfig(Section):
    enabled: bool = Field(
        False, description="log to MLflow (the mlflow extra: pip install 'hookbus[mlflow]')"
    )
    tracking_uri: str | None = Field(
        None,
        min_length=1,
        description="MLflow tracking URI (http://host:5000, sqlite:///path/mlflow.db); null: "
        "a local store in the run directory, mlflow.db with artifacts in mlartifacts/",
    )
    experiment: str = Field(
        "hookbus", min_length=1, max_length=500, description="MLflow experiment, made if missing"
    )
    run_name: str | None = Field(
        None, max_length=250, description="the run's name; null: MLflow picks one"
    )


class HooksConfig(Section):
    log: EnabledHook = Field(default_factory=EnabledHook)
    progress_bar: EnabledHook = Field(default_factory=EnabledHook)
    metrics_json: EnabledHook = Field(default_factory=EnabledHook)
    tensorboard: EnabledHook = Field(default_factory=EnabledHook)
    summary_plot: EnabledHook = Field(default_factory=EnabledHook)
    nan_check: NanCheckConfig = Field(default_factory=NanCheckConfig)
    evaluation_report: EvaluationReportConfig = Field(default_factory=EvaluationReportConfig)
    online_probe: OnlineProbeConfig = Field(default_factory=OnlineProbeConfig)
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
    extra: list[ExtraHookConfig] = Field(default_factory=list, description="user hooks")


class DistributedConfig(Section):
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="nccl on GPUs, gloo otherwise, when auto"
    )
    find_unused_parameters: bool = Field(False, description="passed to DDP")
    nproc_per_node: int = Field(
        1,
        ge=1,
        le=1024,
        description="processes `hookbus train` starts on this machine (ignored under torchrun)",
    )
    timeout_seconds: float = Field(
        600.0,
        gt=0,
        le=7 * 24 * 3600,
        description="a collective that waits longer (a dead or hung rank) ends the run",
    )
    init_timeout_seconds: float = Field(
        300.0,
        gt=0,
        le=7 * 24 * 3600,
        description="the processes must all meet (the rendezvous at MASTER_ADDR:MASTER_PORT) "
        "within this, or the run ends with one line saying which did not",
    )
    sync_batch_norm: bool = Field(
        False, description="convert BatchNorm layers to SyncBatchNorm (CUDA devices only)"
    )


class MachineConfig(Section):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="cuda when available")
    flush_denormal: bool = Field(True, description="flush denormal floats (fast CPU math)")
    num_threads: int = Field(
        0, ge=0, le=1024, description="torch CPU threads; 0 keeps torch's choice"
    )
    deterministic: bool = Field(
        False,
        description="deterministic algorithms only (torch.use_deterministic_algorithms, "
        "cuDNN deterministic, no cuDNN autotuning): bit-exact GPU resumes, slower kernels",
    )


class FromPythonConfig(Section):
    """Which parts of the run were given to ``SSLTrainer`` as Python objects instead of
    by name. The trainer writes this section into the effective config; a recipe leaves
    it empty, and a config that names a part here needs that object again to resume."""

    backbone: str | None = Field(
        None,
        max_length=300,
        description="class of the backbone module passed as `backbone=` (replaces "
        "model.backbone.name); null: built by name",
    )
    train_data: str | None = Field(
        None,
        max_length=300,
        description="class of the data set passed as `train_data=` (replaces data.name); "
        "null: built by name",
    )
    test_data: str | None = Field(
        None,
        max_length=300,
        description="class of the data set passed as `test_data=` (the train data when "
        "only that is given); null: built by name",
    )
    optimizer: str | None = Field(
        None,
        max_length=300,
        description="the optimizer factory passed as `optimizer=` (replaces optimizer.name; "
        "the learning-rate schedule still applies); null: built by name",
    )
    loss: str | None = Field(
        None,
        max_length=300,
        description="class of the loss module passed as `loss=` (the method's hooks and "
        "views still follow loss.name); null: built by name",
    )


class Config(Section):
    """The whole trainer config. Every section has defaults; a recipe sets what differs."""

    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    meters: MetersConfig = Field(default_factory=MetersConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    machine: MachineConfig = Field(default_factory=MachineConfig)
    from_python: FromPythonConfig = Field(
        default_factory=FromPythonConfig,
        description="parts given to SSLTrainer as Python objects (written by the trainer)",
    )

    @model_validator(mode="after")
    def _method_parts(self) -> Config:
        """The model parts each method's loss reads must be configured."""
        model, loss = self.model, self.loss.name
        if loss in ("byol", "simsiam", "moco_v3", "nnclr") and not model.predictor.dims:
            raise ValueError(f"loss.name {loss} needs a predictor: set model.predictor.dims")
        if loss in ("swav", "dino", "dinov2", "ibot") and not model.prototypes.count:
            raise ValueError(f"loss.name {loss} needs prototypes: set model.prototypes.count")
        if loss == "mae":
            self._mae_parts()
        else:
            self._no_mae_decoder()
            if loss != "cross_entropy" and self.data.num_views < 2:
                raise ValueError(
                    f"loss.name {loss} compares views of each image: data.num_views must be "
                    f"at least 2 (got {self.data.num_views})"
                )
        if model.linear_eval.enabled and model.fine_tune.enabled:
            raise ValueError(
                "model.linear_eval.enabled and model.fine_tune.enabled are two evaluation "
                "protocols (a frozen backbone, a trained one): enable one of them"
            )
        if model.fine_tune.enabled:
            if loss != "cross_entropy":
                raise ValueError(
                    "model.fine_tune.enabled and loss.name cross_entropy go together: "
                    "fine-tuning trains the backbone and a classifier with the cross-entropy loss"
                )
        elif model.linear_eval.enabled != (loss == "cross_entropy"):
            raise ValueError(
                "model.linear_eval.enabled and loss.name cross_entropy go together: "
                "linear evaluation trains a classifier with the cross-entropy loss "
                "(model.fine_tune.enabled: the backbone too)"
            )
        self._classifier_reads_one_view()
        self._layer_decay_needs_a_vit()
        self._masked_distillation_parts()
        return self

    def _masked_distillation_parts(self) -> None:
        """iBOT and DINOv2 mask the patches of a ViT; their own sections are theirs."""
        loss, name = self.loss, self.model.backbone.name
        vit = name.startswith("vit_") or self.from_python.backbone
        if loss.name in ("dinov2", "ibot") and not vit:
            raise ValueError(
                f"loss.name {loss.name} masks the patches of a Vision Transformer: "
                f"model.backbone.name must be vit_tiny, vit_s16 or vit_b16 (got {name})"
            )
        if loss.name == "dinov2" and loss.dinov2.centering == "sinkhorn_knopp":
            unread = [f"loss.dino.{key}" for key in loss.dino.changed_keys()]
            unread += [f"loss.ibot.{key}" for key in loss.ibot.changed_keys()]
            for key in ("loss.dino.center_momentum", "loss.ibot.patch_center_momentum"):
                if key in unread:
                    raise ValueError(
                        f"{key} sets a running center, which loss.dinov2.centering "
                        "sinkhorn_knopp does not keep: remove it, or set "
                        "loss.dinov2.centering=centering"
                    )
        sections = {"ibot": ("dinov2", "ibot"), "dinov2": ("dinov2",)}
        for section, owners in sections.items():
            changed = getattr(loss, section).changed_keys()
            if changed and loss.name not in owners:
                raise ValueError(
                    f"loss.{section}.{changed[0]} is read by loss.name {' and '.join(owners)} "
                    f"only, not {loss.name}; remove it"
                )

    def _classifier_reads_one_view(self) -> None:
        """Linear evaluation and fine-tuning train their classifier on the first view of
        each image: more views (an SSL recipe's, left in) would be made and never read."""
        data, model = self.data, self.model
        protocol = next(
            (
                key
                for key, section in (
                    ("model.linear_eval", model.linear_eval),
                    ("model.fine_tune", model.fine_tune),
                )
                if section.enabled
            ),
            None,
        )
        if protocol and (data.num_views != 1 or data.small_views.count):
            raise ValueError(
                f"{protocol}.enabled trains the classifier on one view of each image: set "
                "data.num_views=1 and data.small_views.count=0 (got "
                f"{data.num_views} and {data.small_views.count})"
            )

    def _mae_parts(self) -> None:
        """MAE encodes the visible patches of one view of each image with a ViT and has
        no projection head, predictor or prototypes."""
        data, model = self.data, self.model
        if data.num_views != 1 or data.small_views.count:
            raise ValueError(
                "loss.name mae reconstructs one masked view of each image: set "
                "data.num_views=1 and data.small_views.count=0 (got "
                f"{data.num_views} and {data.small_views.count})"
            )
        name = model.backbone.name
        if not name.startswith("vit_") and not self.from_python.backbone:
            raise ValueError(
                "loss.name mae masks the patches of a Vision Transformer: model.backbone.name "
                f"must be vit_tiny, vit_s16 or vit_b16 (got {name})"
            )
        if model.predictor.dims or model.prototypes.count:
            raise ValueError(
                "loss.name mae has a decoder (model.mae_decoder), no predictor or prototypes: "
                "set model.predictor.dims=[] and model.prototypes.count=0"
            )
        head = model.head.changed_keys()
        if head:
            raise ValueError(
                f"model.head.{head[0]}: loss.name mae has a decoder (model.mae_decoder), no "
                "projection head, so model.head is not used; remove it"
            )

    def _no_mae_decoder(self) -> None:
        """``model.mae_decoder`` shapes the decoder that only ``loss.name mae`` builds."""
        decoder = self.model.mae_decoder.changed_keys()
        if decoder:
            raise ValueError(
                f"model.mae_decoder.{decoder[0]}: the MAE decoder is built only for "
                f"loss.name mae, not {self.loss.name}; remove it"
            )

    def _layer_decay_needs_a_vit(self) -> None:
        """``model.fine_tune.layer_decay`` counts the encoder layers of a ViT backbone
        (``vit_*``, ``tv:vit_*``); a backbone given from Python is checked when built."""
        tune, name = self.model.fine_tune, self.model.backbone.name
        vit = name.removeprefix("tv:").startswith("vit_")
        if tune.enabled and tune.layer_decay != 1 and not vit and not self.from_python.backbone:
            raise ValueError(
                f"model.fine_tune.layer_decay {tune.layer_decay} needs a ViT backbone "
                f"(vit_*, tv:vit_*), whose encoder layers give the depths; model.backbone.name "
                f"is {name}: set model.fine_tune.layer_decay=1"
            )
