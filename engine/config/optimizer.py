"""The ``optimizer`` section: the optimizer, its learning-rate and weight-decay schedules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hookbus.engine.section import Decay, Section


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
        "the run, set every iteration (e.g. 0.04 to 0.4); unset: constant",
    )
    exclude_bias_and_norm_from_weight_decay: bool = Field(
        True,
        description="no weight decay (nor, with lars, trust ratio) on biases and "
        "normalisation weights; false decays every parameter",
    )
    fixed_lr_for: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")]] = Field(
        default_factory=list,
        max_length=16,
        description="model parts (e.g. predictor) that keep optimizer.lr while the "
        "schedule moves the rest",
    )
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD and LARS momentum")
    betas: tuple[Decay, Decay] = Field(
        (0.9, 0.999),
        description="AdamW: decay rates of the gradient's running mean and of its square "
        "(masked-image pre-training often uses [0.9, 0.95])",
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
