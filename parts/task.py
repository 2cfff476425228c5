"""Building the task from the config: data loaders, model, loss, optimizer and meters."""

from __future__ import annotations

from collections.abc import Sized
from typing import cast

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from hookbus.engine.bus.state import RunState
from hookbus.engine.errors import ConfigError
from hookbus.engine.registry import UnknownNameError
from hookbus.parts.activation_checkpointing import checkpoint_vit_blocks
from hookbus.parts.config import Config
from hookbus.parts.data import DATASETS, build_data_loaders
from hookbus.parts.losses import LOSSES, build_loss
from hookbus.parts.meters import build_meters
from hookbus.parts.meters.knn import Encode
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.build import check_backbone_options
from hookbus.parts.models.compiled import check_compile, compile_forward
from hookbus.parts.optim import build_optimizer
from hookbus.parts.python_parts import OptimizerFactory, PythonParts, describe, feature_size
from hookbus.parts.sharding import check_strategy, shard_model


def check_component_names(cfg: Config) -> None:
    """Raise a ConfigError naming the key whose registered name is unknown (the data and
    backbone names are not used when ``from_python`` names those parts; the loss name
    always is: it chooses the method's hooks), or the ``model.compile`` setting that
    cannot be honoured (:func:`~hookbus.parts.models.compiled.check_compile`), or one
    that ``distributed.strategy: fsdp`` cannot take
    (:func:`~hookbus.parts.sharding.check_strategy`)."""
    python = cfg.from_python
    for key, registry, name, replaced in (
        ("data.name", DATASETS, cfg.data.name, python.train_data),
        ("model.backbone.name", BACKBONES, cfg.model.backbone.name, python.backbone),
        ("loss.name", LOSSES, cfg.loss.name, None),
    ):
        if replaced is not None:
            continue
        try:
            registry.get(name)
        except UnknownNameError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    check_compile(cfg)
    check_strategy(cfg)


def check_options_are_read(cfg: Config) -> None:
    """Raise a ConfigError naming a model option that the parts of the run would not
    read: a ``model.backbone`` option its backbone does not read
    (:func:`~hookbus.parts.models.build.check_backbone_options`), or a predictor or
    prototypes that the loss does not read (with a loss from Python, or for linear
    evaluation and fine-tuning, which build no SSL parts, those are not checked)."""
    check_backbone_options(cfg)
    model, name = cfg.model, cfg.loss.name
    reads = LOSSES.reads(name)
    if (
        reads is None
        or cfg.from_python.loss
        or model.linear_eval.enabled
        or model.fine_tune.enabled
    ):
        return
    for part, output, key, value, off in (
        ("predictor", "predictions", "model.predictor.dims", model.predictor.dims, "[]"),
        ("prototypes", "prototype scores", "model.prototypes.count", model.prototypes.count, "0"),
    ):
        if value and part not in reads:
            raise ConfigError(
                f"{key}: loss.name {name} reads no {output} (the losses that do: "
                f"{', '.join(LOSSES.readers(part))}); set {key}={off}"
            )


def check_model_accepts_data(
    model: torch.nn.Module, loader: DataLoader, cfg: Config, device: torch.device | str
) -> None:
    """Encode one real image with ``model`` (eval mode, no_grad), or raise a ConfigError.

    A backbone that cannot take the data's images (too small for its pooling, another
    number of channels) is a config mistake: it is reported before anything is written.
    """
    # Through the loader's collate: the image as the model gets it (an image folder's
    # files are resized and cropped there).
    image = loader.collate_fn([loader.dataset[0]])["image"].to(device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            cast(Encode, model.encode)(image)
    except (RuntimeError, ValueError, AssertionError) as exc:  # timm checks sizes by assert
        shape = "x".join(str(n) for n in image.shape[1:])
        problem = str(exc).splitlines()[0]
        backbone = cfg.from_python.backbone or cfg.model.backbone.name
        data = cfg.from_python.train_data or cfg.data.name
        raise ConfigError(
            f"model.backbone ({backbone}) cannot encode the {data} "
            f"images ({shape}, from data.image_size={cfg.data.image_size}): {problem}"
        ) from None
    finally:
        model.train(was_training)


def data_classes(dataset: object) -> int | None:
    """The number of classes of a labelled data set: its ``classes`` (an image folder's
    class folders), else one more than the largest of its ``labels``; 0 for an image
    folder without class folders; None when the data set says neither."""
    classes = getattr(dataset, "classes", None)
    if isinstance(classes, (list, tuple)):
        return len(classes)
    labels = getattr(dataset, "labels", None)
    if labels is None or not len(labels):
        return None
    return int(max(labels)) + 1


def check_loaders_fit_the_data(loaders: dict[str, DataLoader], cfg: Config) -> None:
    """Raise a ConfigError when the train loader has no batch (``data.batch_size`` over
    the train images of a process, with ``data.drop_last``), or the classes of linear
    evaluation, fine-tuning or the online probe are not the data's (:func:`data_classes`
    of the train split: an image folder's class folders, the labels of the others)."""
    train = loaders["train"]
    data = cfg.from_python.train_data or cfg.data.name
    if len(train) == 0:
        images = len(cast(Sized, train.sampler))
        raise ConfigError(
            f"data.batch_size {cfg.data.batch_size} is more than the {images} train images "
            f"of a process ({data}), and data.drop_last drops the partial batch: "
            "no step would run; lower data.batch_size"
        )
    classes = data_classes(train.dataset)
    if classes is None:
        return
    check_labels_for_evaluation(classes, data_classes(loaders["test"].dataset), cfg)
    probe = cfg.hooks.online_probe
    for key, enabled, configured in (
        ("model.linear_eval", cfg.model.linear_eval.enabled, cfg.model.linear_eval.num_classes),
        ("model.fine_tune", cfg.model.fine_tune.enabled, cfg.model.fine_tune.num_classes),
        ("hooks.online_probe", probe.enabled, probe.num_classes),
    ):
        if not enabled:
            continue
        if classes == 0:
            raise ConfigError(
                f"{key} needs labelled images, but the {data} train images have no labels "
                "(a flat folder): put them in class folders"
            )
        if configured != classes:
            raise ConfigError(
                f"{key}.num_classes is {configured}, but the {data} train data has "
                f"{classes} classes: set {key}.num_classes={classes}"
            )


def check_labels_for_evaluation(train: int, test: int | None, cfg: Config) -> None:
    """Raise a ConfigError when a part that scores the encoder with labels is on, but the
    images have none (an image folder read without labels: ``train`` or ``test`` classes
    0): the kNN meter (its memory is the train split, its queries the test split) and the
    end-of-run evaluation report. Refused here, at validation, never after an epoch."""
    data = cfg.from_python.train_data or cfg.data.name
    for key, enabled in (
        ("meters.knn", cfg.meters.knn.enabled),
        ("hooks.evaluation_report", cfg.hooks.evaluation_report.enabled),
    ):
        if not enabled or (train and test != 0):
            continue
        split = "train" if not train else "test"
        raise ConfigError(
            f"{key} needs labelled images, but the {data} {split} images have no labels "
            f"(an unlabelled folder): set {key}.enabled=false and evaluate the trained "
            "encoder with hookbus eval RUN LABELLED_FOLDER, or give the images class folders"
        )


def prepare_task(state: RunState, cfg: Config, parts: PythonParts | None = None) -> None:
    """Build the task onto the run state; the model is DDP-wrapped when distributed (or
    sharded in place with ``distributed.strategy: fsdp``,
    :func:`hookbus.parts.sharding.shard_model`), and then compiled with
    ``model.compile.enabled``.

    Writes ``data_loaders``, ``base_model`` (the plain module), ``model`` (what the step
    calls: ``base_model``, or its DDP and compile wrappers), ``loss_fn``, ``optimizer``,
    ``scaler``, ``amp_dtype`` and ``meters``. The model is built right after seeding with
    ``trainer.seed``, so its initial weights depend on the seed alone (a backbone from
    Python comes with its own). ``parts`` given as Python objects replace those the
    config names. ``cfg`` is one the trainer has checked (:func:`check_component_names`
    when it was built), so no check of its names runs twice.
    """
    parts = parts or PythonParts()
    device = torch.device(state.device)
    data_name = cfg.from_python.train_data or cfg.data.name
    try:
        state.data_loaders = build_data_loaders(
            cfg, rank=state.rank, world_size=state.world_size, datasets=parts.datasets(cfg)
        )
    except ValueError as exc:
        raise ConfigError(f"data ({data_name}): {exc}") from None
    check_loaders_fit_the_data(state.data_loaders, cfg)
    if parts.backbone is not None:
        out_dim = feature_size(parts.backbone, state.data_loaders["memory"], device)
        if state.initial_backbone is not None:
            state.initial_backbone.out_dim = out_dim  # type: ignore[assignment]  # an int
    torch.manual_seed(cfg.trainer.seed)
    try:
        state.base_model = build_model(cfg, backbone=parts.backbone).to(device)
    except ValueError as exc:
        raise ConfigError(f"model: {exc}") from None
    check_model_accepts_data(state.base_model, state.data_loaders["memory"], cfg, device)
    if cfg.model.channels_last:
        state.base_model.to(memory_format=torch.channels_last)
    if cfg.model.backbone.vit.activation_checkpointing:
        checkpoint_vit_blocks(state.base_model)
    if cfg.distributed.sync_batch_norm and state.world_size > 1:
        if torch.device(device).type != "cuda":
            raise ConfigError("distributed.sync_batch_norm needs CUDA devices (SyncBatchNorm)")
        state.base_model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(state.base_model)
    state.model = state.base_model
    amp = cfg.model.amp
    state.amp_dtype = (
        (torch.bfloat16 if amp.dtype == "bf16" else torch.float16) if amp.enabled else None
    )
    if cfg.distributed.strategy == "fsdp" and state.world_size > 1:
        state.model = state.base_model = shard_model(state.base_model, state.amp_dtype)
    elif state.world_size > 1:
        state.model = DistributedDataParallel(
            state.base_model,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=cfg.distributed.find_unused_parameters,
        )
    if cfg.model.compile.enabled:
        state.model = compile_forward(state.model, cfg.model.compile)
    state.loss_fn = (parts.loss if parts.loss is not None else build_loss(cfg)).to(device)
    state.optimizer = (
        build_optimizer(cfg, state.base_model)
        if parts.optimizer is None
        else _user_optimizer(parts.optimizer, state.base_model)
    )
    state.scaler = (
        torch.amp.GradScaler(device.type) if amp.enabled and amp.dtype == "fp16" else None
    )
    state.meters = build_meters(cfg)


def _user_optimizer(factory: OptimizerFactory, model: torch.nn.Module) -> torch.optim.Optimizer:
    optimizer = factory(model)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(
            f"the optimizer factory {describe(factory)} returned a {type(optimizer).__name__}, "
            "not a torch.optim.Optimizer"
        )
    return optimizer
