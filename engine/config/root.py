"""The whole config (:class:`Config`), with the rules across its sections."""

from __future__ import annotations

from pydantic import Field, model_validator

from hookbus.engine.config.checkpoint import CheckpointConfig
from hookbus.engine.config.data import DataConfig
from hookbus.engine.config.distributed import DistributedConfig
from hookbus.engine.config.hooks import HooksConfig
from hookbus.engine.config.loss import CLASSIFIER_LOSS, LossConfig
from hookbus.engine.config.machine import MachineConfig
from hookbus.engine.config.meters import MetersConfig
from hookbus.engine.config.model import ModelConfig
from hookbus.engine.config.optimizer import OptimizerConfig
from hookbus.engine.config.trainer import TrainerConfig
from hookbus.engine.methods.entries import Views, check_method, method_of
from hookbus.engine.section import Section


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
    loss: LossConfig
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
        """The recipe fits the method that ``loss.name`` selects (its entry's parts, views
        and rules; :func:`~hookbus.engine.methods.entries.check_method`), or the evaluation protocol
        that ``cross_entropy`` trains."""
        model, loss = self.model, self.loss.name
        default_views = None if loss == CLASSIFIER_LOSS else Views()
        check_method(self, method_of(loss), default_views)
        if model.linear_eval.enabled and model.fine_tune.enabled:
            raise ValueError(
                "model.linear_eval.enabled and model.fine_tune.enabled are two evaluation "
                "protocols (a frozen backbone, a trained one): enable one of them"
            )
        if model.fine_tune.enabled:
            if loss != CLASSIFIER_LOSS:
                raise ValueError(
                    "model.fine_tune.enabled and loss.name cross_entropy go together: "
                    "fine-tuning trains the backbone and a classifier with the cross-entropy loss"
                )
        elif model.linear_eval.enabled != (loss == CLASSIFIER_LOSS):
            raise ValueError(
                "model.linear_eval.enabled and loss.name cross_entropy go together: "
                "linear evaluation trains a classifier with the cross-entropy loss "
                "(model.fine_tune.enabled: the backbone too)"
            )
        self._classifier_reads_one_view()
        self._layer_decay_needs_a_vit()
        return self

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
