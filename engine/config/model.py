"""The ``model`` section: backbone, heads, predictor, prototypes, and how the model runs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hookbus.engine.config.backbone import BackboneConfig
from hookbus.engine.config.evaluation import FineTuneConfig, LinearEvalConfig
from hookbus.engine.section import Section, Size


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
        description="after each hidden layer: relu, or gelu (the heads of several "
        "teacher-student methods in their authors' code)",
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
    clustering or teacher-student loss reads."""

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


class ModelConfig(ModelRuntime, ModelParts):
    """The kernel's part of ``model``; a method's own model part (``model.<part>``) is
    declared in the whole config, ``hookbus.parts.config``."""
