"""The ``model`` section: backbone, heads, predictor, prototypes, and how the model runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from hookbus.engine.config.evaluation import FineTuneConfig, LinearEvalConfig
from hookbus.engine.config.methods import METHOD_ENTRIES, method_model_sections
from hookbus.engine.section import MAX_PIXELS, Section, Size


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
        "no update (a random patch projection, for stability)",
    )
    position_embedding: Literal["learned", "sincos", "rope"] = Field(
        "learned",
        description="the encoder's position embedding: learned (torchvision's), sincos, "
        "the fixed 2-D sine-cosine table (frozen; kept under "
        "torchvision's key; the width a multiple of 4), or rope, DINOv3's rotary embedding "
        "of the patch tokens' queries and keys (a head width divisible by 4; no "
        "torchvision export; not for MAE or I-JEPA, which encode parts of the grid)",
    )
    rope_base: float = Field(
        100.0, gt=1, le=1e6, description="rope: the base of the periods (DINOv3's 100)"
    )
    rope_jitter: float | None = Field(
        None,
        ge=1,
        le=100,
        description="rope, in training: each axis's coordinates times exp(u), u uniform in "
        "[-log j, log j] (the authors' jitter_coords); None: none",
    )
    rope_rescale: float | None = Field(
        None,
        ge=1,
        le=100,
        description="rope, in training: both axes' coordinates times one such factor "
        "(the authors' rescale_coords, 2 in their ViT-7B configs); None: none",
    )
    patch_embedding_init: Literal["torchvision", "xavier_uniform"] = Field(
        "torchvision",
        description="init of the patch embedding (conv_proj): torchvision's truncated normal, "
        "or xavier_uniform over the kernel as a Linear layer, bias zero",
    )
    class_token_init: Literal["zeros", "normal"] = Field(
        "zeros",
        description="init of the class token: zeros (torchvision's), or normal with std 0.02",
    )
    class_token: bool = Field(
        True,
        description="a class token (torchvision's); false: none, as I-JEPA's ViT: the "
        "features are the mean patch token, and no torchvision export",
    )
    drop_path: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="stochastic depth: in training each block's attention and MLP branches "
        "are dropped per sample at a rate rising linearly to this at the last block "
        "(fine-tuning ViT-B: 0.1), or at this rate in every block with drop_path_rule "
        "uniform; never in a forward without gradients (a momentum teacher)",
    )
    drop_path_rule: Literal["linear", "uniform"] = Field(
        "linear",
        description="how drop_path spreads over the blocks: linear, rising from 0 at the "
        "first block to drop_path at the last; uniform, drop_path at every block (needs "
        "drop_path above 0)",
    )
    layer_scale: float | None = Field(
        None,
        gt=0,
        le=1,
        description="LayerScale: each block's attention and MLP branch is multiplied, "
        "channel by channel, by a learned vector starting at this value (1e-5 for ViT-S "
        "and ViT-B, 1e-6 for ViT-L), so every block starts close to the identity; None: "
        "none, torchvision's blocks. Adds two keys per block; an export folds them into "
        "the branches' last linear layers",
    )
    activation_checkpointing: bool = Field(
        False,
        description="each encoder block keeps only its input and recomputes its activations "
        "in backward: less memory, about a third more compute (with DDP or FSDP)",
    )
    registers: int = Field(
        0,
        ge=0,
        le=64,
        description="register tokens (4 in the registers paper): learned tokens beside the "
        "class token, dropped from the outputs; a backbone with them does not export to "
        "torchvision's VisionTransformer",
    )

    @model_validator(mode="after")
    def _a_rule_needs_a_rate(self) -> ViTConfig:
        if self.drop_path_rule != "linear" and not self.drop_path:
            raise ValueError(
                f"drop_path_rule {self.drop_path_rule} spreads drop_path over the blocks, "
                "but drop_path is 0 (no drop path): set drop_path, or remove drop_path_rule"
            )
        return self

    @model_validator(mode="after")
    def _rope_settings_need_rope(self) -> ViTConfig:
        if self.position_embedding != "rope":
            for key in ("rope_jitter", "rope_rescale"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} jitters RoPE: set position_embedding rope")
        elif self.activation_checkpointing:
            raise ValueError(
                "position_embedding rope with activation_checkpointing is not supported: the "
                "blocks' recomputation would not see the rotation of their forward"
            )
        return self

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
        "classification model NAME, e.g. tv:resnet34 (random init, last Linear layer removed), "
        "or timm:NAME for timm's model NAME, e.g. timm:vit_small_patch16_224 (random init, "
        "no classifier; the timm extra)",
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
        "a zero scale, so each block starts as the identity",
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


def _head_dims() -> list[Size | Literal["backbone"]]:
    """The default projection head: the backbone's features, 128, 64."""
    return ["backbone", 128, 64]


class HeadConfig(Section):
    dims: list[Size | Literal["backbone"]] = Field(
        default_factory=_head_dims,
        min_length=2,
        description="projection MLP sizes, input first; an input of backbone: the "
        "backbone's feature size (out_dim), which then follows model.backbone",
    )
    batch_norm: bool = Field(True, description="BatchNorm after each hidden layer")
    output_batch_norm: Literal["none", "affine", "no_affine"] = Field(
        "none",
        description="BatchNorm after the last layer (then without bias): affine with a "
        "learned scale and shift, no_affine without; none: a "
        "plain Linear",
    )
    hidden_bias: bool = Field(
        True,
        description="biases on the hidden layers; false: none",
    )
    activation: Literal["relu", "gelu"] = Field(
        "relu",
        description="after each hidden layer: relu, or gelu (the heads of DINO, iBOT, "
        "DINOv2 and DINOv3 in their authors' code)",
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
    """The prediction MLP on top of the projection head, for the methods whose online
    branch predicts the other branch's embedding."""

    dims: list[Size] = Field(
        default_factory=list,
        description="prediction MLP sizes, input first (= model.head.dims[-1]); empty: none",
    )
    batch_norm: bool = Field(True, description="BatchNorm after each hidden layer")
    output_batch_norm: Literal["none", "affine", "no_affine"] = Field(
        "none",
        description="BatchNorm after the last layer (then without bias), as "
        "model.head.output_batch_norm",
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
    """A linear layer without bias on the L2-normalised embeddings: the scores that a
    clustering or self-distillation loss reads."""

    count: int = Field(0, ge=0, le=10**6, description="prototypes (output scores); 0: none")
    weight_norm: bool = Field(
        False,
        description="use L2-normalised prototype weights in the forward (a "
        "weight-normalised last layer); false: the weights as stored, which a method may "
        "normalise in a hook instead",
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


class ModelParts(Section):
    """The model's parts that every method may have: the backbone, the heads on top of
    it, and the two evaluation protocols."""

    backbone: BackboneConfig = Field(default_factory=BackboneConfig)
    head: HeadConfig = Field(default_factory=HeadConfig)
    predictor: PredictorConfig = Field(default_factory=PredictorConfig)
    prototypes: PrototypesConfig = Field(default_factory=PrototypesConfig)
    linear_eval: LinearEvalConfig = Field(default_factory=LinearEvalConfig)
    fine_tune: FineTuneConfig = Field(default_factory=FineTuneConfig)


class ModelRuntime(Section):
    """How the model runs: precision, memory format, CUDA cache, compilation."""

    amp: AmpConfig = Field(default_factory=AmpConfig)
    channels_last: bool = Field(
        False,
        description="model and the step's 4-d image batches in channels-last (NHWC) memory format: "
        "faster convolutions under autocast on recent GPUs",
    )
    cuda_cache: CudaCacheConfig = Field(default_factory=CudaCacheConfig)
    compile: CompileConfig = Field(default_factory=CompileConfig)


if TYPE_CHECKING:

    class ModelConfig(ModelRuntime, ModelParts):
        def __getattr__(self, key: str) -> Any:
            """The model sections of the methods (``model.<key>``)."""

else:

    class ModelConfig(ModelRuntime, method_model_sections(ModelParts, METHOD_ENTRIES)):
        pass
