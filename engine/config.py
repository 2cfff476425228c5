"""The trainer config: pydantic models that reject unknown keys and wrong types."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are checked on set."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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
        1, ge=1, description="a test phase after every N train phases"
    )
    log_frequency: int = Field(10, ge=1, description="log a line every N train iterations")
    imports: list[str] = Field(
        default_factory=list,
        description="modules imported before the run, so that the steps, hooks and "
        "components they register can be chosen by name",
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
    brightness: float = Field(0.1, ge=0, description="brightness shift, +- this value")
    noise_std: float = Field(0.1, ge=0, description="Gaussian noise standard deviation")
    erase_prob: float = Field(0.5, ge=0, le=1, description="probability of random erasing")
    erase_area: tuple[float, float] = Field((0.05, 0.2), description="random erasing: area range")

    @model_validator(mode="after")
    def _ordered_ranges(self) -> AugmentConfig:
        for key in ("crop_area", "crop_aspect", "contrast", "erase_area"):
            low, high = getattr(self, key)
            if not 0 < low <= high:
                raise ValueError(f"{key} must be (low, high) with 0 < low <= high")
        return self


class DataConfig(Section):
    name: str = Field("digits", description="data set, by its registered name")
    image_size: int = Field(16, ge=4, description="side of the square images, in pixels")
    num_views: int = Field(2, ge=2, description="augmented views per image")
    batch_size: int = Field(256, ge=1, description="train batch size per process")
    test_batch_size: int = Field(256, ge=1, description="test and memory batch size")
    drop_last: bool = Field(True, description="drop the last partial train batch")
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes")
    pin_memory: bool = Field(False, description="pin host memory (useful on GPUs)")
    test_size: int = Field(500, ge=1, description="held-out images (digits)")
    augment: AugmentConfig = Field(default_factory=AugmentConfig)


class CudaCacheConfig(Section):
    clear_cuda_cache: bool = Field(False, description="empty the CUDA cache periodically")
    clear_freq: int = Field(100, ge=1, description="every N train iterations")


class AmpConfig(Section):
    enabled: bool = Field(False, description="forward and loss under autocast")
    dtype: Literal["bf16", "fp16"] = Field("bf16", description="fp16 adds a GradScaler")


class BackboneConfig(Section):
    name: str = Field("small_cnn", description="backbone, by its registered name")
    width: int = Field(32, ge=1, description="channels of the first layer (small_cnn)")
    in_channels: int = Field(1, ge=1, description="image channels")


class HeadConfig(Section):
    dims: list[int] = Field(
        default_factory=lambda: [128, 128, 64],
        min_length=2,
        description="projection MLP sizes, input first",
    )
    batch_norm: bool = Field(True, description="BatchNorm after each hidden layer")


class ModelConfig(Section):
    backbone: BackboneConfig = Field(default_factory=BackboneConfig)
    head: HeadConfig = Field(default_factory=HeadConfig)
    amp: AmpConfig = Field(default_factory=AmpConfig)
    cuda_cache: CudaCacheConfig = Field(default_factory=CudaCacheConfig)


class LossConfig(Section):
    name: str = Field("nt_xent", description="loss, by its registered name")
    temperature: float = Field(0.5, gt=0, description="softmax temperature")


class OptimizerConfig(Section):
    name: Literal["adamw", "sgd"] = Field("adamw", description="optimizer")
    lr: float = Field(1e-3, gt=0, description="peak learning rate")
    weight_decay: float = Field(1e-5, ge=0, description="weight decay")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum")
    num_epochs: int = Field(40, ge=1, description="number of train phases")
    warmup_epochs: float = Field(2.0, ge=0, description="linear warm-up length, in epochs")
    schedule: Literal["cosine", "constant"] = Field(
        "cosine", description="learning-rate decay after warm-up, set every iteration"
    )
    final_lr: float = Field(0.0, ge=0, description="learning rate at the end of cosine decay")
    accumulate_steps: int = Field(1, ge=1, description="batches per optimizer step")


class KnnMeterConfig(Section):
    enabled: bool = Field(True, description="kNN top-1 of backbone features in test phases")
    k: int = Field(20, ge=1, description="neighbours")


class MetersConfig(Section):
    knn: KnnMeterConfig = Field(default_factory=KnnMeterConfig)


class CheckpointConfig(Section):
    dir: Path = Field(Path("runs/default"), description="run directory: checkpoints and logs")
    phase_frequency: int = Field(1, ge=0, description="every N train phases (0 = off)")
    iter_frequency: int = Field(0, ge=0, description="every N train iterations (0 = off)")
    keep_last: int = Field(2, ge=1, description="checkpoints kept")
    auto_resume: bool = Field(True, description="resume from the newest checkpoint in dir")


class EnabledHook(Section):
    enabled: bool = Field(True, description="attach this hook")


class NanCheckConfig(Section):
    enabled: bool = Field(True, description="stop on a non-finite loss")
    check_frequency: int = Field(
        1,
        ge=1,
        description="check every N steps (one host sync each); 1 stops at the first bad step",
    )


class EvaluationReportConfig(Section):
    enabled: bool = Field(False, description="kNN and linear probe, random init vs trained")
    labels_per_class: int = Field(10, ge=1, description="labels per class for the probe")
    draws: int = Field(10, ge=1, description="label draws averaged")


class ExtraHookConfig(Section):
    name: str = Field(description="a hook registered with hooks.register_hook")
    params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")


class HooksConfig(Section):
    log: EnabledHook = Field(default_factory=EnabledHook)
    progress_bar: EnabledHook = Field(default_factory=EnabledHook)
    metrics_json: EnabledHook = Field(default_factory=EnabledHook)
    tensorboard: EnabledHook = Field(default_factory=EnabledHook)
    summary_plot: EnabledHook = Field(default_factory=EnabledHook)
    nan_check: NanCheckConfig = Field(default_factory=NanCheckConfig)
    evaluation_report: EvaluationReportConfig = Field(default_factory=EvaluationReportConfig)
    extra: list[ExtraHookConfig] = Field(default_factory=list, description="user hooks")


class DistributedConfig(Section):
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="nccl on GPUs, gloo otherwise, when auto"
    )
    find_unused_parameters: bool = Field(False, description="passed to DDP")
    nproc_per_node: int = Field(
        1,
        ge=1,
        description="processes `hookbus train` starts on this machine (ignored under torchrun)",
    )
    timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="a collective that waits longer (a dead or hung rank) ends the run",
    )
    sync_batch_norm: bool = Field(
        False, description="convert BatchNorm layers to SyncBatchNorm (CUDA devices only)"
    )


class MachineConfig(Section):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="cuda when available")
    flush_denormal: bool = Field(True, description="flush denormal floats (fast CPU math)")
    num_threads: int = Field(0, ge=0, description="torch CPU threads; 0 keeps torch's choice")


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
