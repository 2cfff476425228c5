"""The ``hooks`` section: the standard hooks a config turns on, and user hooks by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from hookbus.engine.section import Section


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
