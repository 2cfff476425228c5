"""The standard train step: forward, loss, meters, and in train phases backward and update."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, cast

import torch
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.process.distributed import all_reduce_mean
from hookbus.parts.models.compiled import uncompiled
from hookbus.parts.optim import learning_rate, set_learning_rate, set_weight_decay, weight_decay
from hookbus.steps.registry import register_train_step


def move_to_device(
    batch: Any,
    device: torch.device | str,
    non_blocking: bool = False,
    channels_last: bool = False,
) -> Any:
    """``batch`` with every tensor moved to ``device`` (dicts, lists and tuples kept);
    with ``channels_last``, 4-d floating-point tensors (image batches) are laid out
    channels-last (NHWC) on the way."""
    if isinstance(batch, torch.Tensor):
        if channels_last and batch.ndim == 4 and batch.is_floating_point():
            return batch.to(device, non_blocking=non_blocking, memory_format=torch.channels_last)
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {
            key: move_to_device(value, device, non_blocking, channels_last)
            for key, value in batch.items()
        }
    if isinstance(batch, list | tuple):
        return type(batch)(
            move_to_device(value, device, non_blocking, channels_last) for value in batch
        )
    return batch


def clip_gradients(
    optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None, max_norm: float
) -> torch.Tensor | None:
    """Scale the gradients of ``optimizer``'s parameters so that their global L2 norm is
    at most ``max_norm``; returns the norm before clipping (None, and nothing done, when
    ``max_norm`` is 0). With a GradScaler the gradients are unscaled first, so the norm
    is that of the true gradients; ``scaler.step`` then does not unscale them again. No
    value is read on the host. Under FSDP (gradients sharded as ``DTensor``) torch's norm
    is the global one, over every rank's shards, as DDP's over its whole gradients; it is
    returned as a plain tensor, whole on every rank."""
    if not max_norm:
        return None
    if scaler is not None:
        scaler.unscale_(optimizer)
    params = [param for group in optimizer.param_groups for param in group["params"]]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return norm.full_tensor() if isinstance(norm, DTensor) else norm


@register_train_step("standard_train_step")
def standard_train_step(engine: RunEngine, batch: Any) -> torch.Tensor:
    """One batch of SSL training or testing on the run state of ``engine``.

    Fires, in order: ``on_forward`` (after the model forward; ``state.last_output`` set),
    ``on_loss_and_meter`` (``state.loss`` holds the loss averaged over ranks, meters
    updated), and in train phases ``on_backward`` (after backward) and ``on_update``
    (after the optimizer step; with ``optimizer.accumulate_steps`` = k, every k-th batch
    and at the end of the phase). Forward and loss run under autocast when
    ``model.amp.enabled``; fp16 uses ``state.scaler``; with ``model.channels_last`` the
    image batches are moved channels-last; with ``model.compile`` the forward is the
    compiled one (``state.model``). Test phases run under no_grad.
    The learning rate is set every optimizer step from the train iterations done before
    this one (``state.iteration - 1``: the trainer counts the current step before it
    runs), unless an ignite scheduler attached to the engine sets it
    (``state.lr_scheduler``); with ``optimizer.clip_grad_norm`` the gradients are clipped
    after the ``on_backward`` handlers and before the step, and ``state.grad_norm`` holds
    their norm before it. ``state.updates`` counts the optimizer step before
    ``on_update`` fires. Returns the loss (``state.loss``), which the trainer keeps as
    ``state.output`` for ignite's handlers.
    """
    state = engine.state
    train = state.train
    # async from pinned memory
    batch = move_to_device(
        batch, state.device, non_blocking=True, channels_last=state.cfg.model.channels_last
    )
    state.last_batch = batch
    accumulate = state.cfg.optimizer.accumulate_steps if train else 1
    position = state.batches
    first = position % accumulate == 0
    last = (position + 1) % accumulate == 0 or position + 1 == state.phase_length
    model = state.model
    skip_sync = train and not last and isinstance(uncompiled(model), DistributedDataParallel)
    autocast = torch.autocast(
        device_type=torch.device(state.device).type,
        dtype=state.amp_dtype or torch.float32,
        enabled=state.amp_dtype is not None,
    )

    ddp = cast(DistributedDataParallel, model)
    with ddp.no_sync() if skip_sync else nullcontext(), torch.set_grad_enabled(train):
        with autocast:
            output = model(batch)
        state.last_output = output
        engine.fire_event(SSLEvents.ON_FORWARD)

        with autocast:
            loss = state.loss_fn(output, batch)
        state.add_loss(all_reduce_mean(loss.detach()))
        for meter in state.meters:
            meter.update(output, batch)
        engine.fire_event(SSLEvents.ON_LOSS_AND_METER)

        if not train:
            return _step_loss(state)
        optimizer = state.optimizer
        if first:
            optimizer.zero_grad(set_to_none=True)
        scaled = loss / accumulate
        if state.scaler is not None:
            scaled = state.scaler.scale(scaled)
        scaled.backward()
    engine.fire_event(SSLEvents.ON_BACKWARD)

    if last:
        if state.lr_scheduler is None:
            done = state.iteration - 1
            state.lr = learning_rate(state.cfg.optimizer, done, state.phase_length)
            set_learning_rate(optimizer, state.lr)
        else:
            state.lr = optimizer.param_groups[0]["lr"]
        if state.cfg.optimizer.weight_decay_end is not None:
            decay = weight_decay(state.cfg.optimizer, state.iteration - 1, state.phase_length)
            set_weight_decay(optimizer, decay)
        state.grad_norm = clip_gradients(
            optimizer, state.scaler, state.cfg.optimizer.clip_grad_norm
        )
        if state.scaler is not None:
            state.scaler.step(optimizer)
            state.scaler.update()
        else:
            optimizer.step()
        state.count_update()
        engine.fire_event(SSLEvents.ON_UPDATE)
    return _step_loss(state)


def _step_loss(state: RunState) -> torch.Tensor:
    """The step's output: ``state.loss`` as the step's hooks left it (set by ``add_loss``
    before ``on_loss_and_meter``; a hook may replace it, and handlers read the output)."""
    return cast(torch.Tensor, state.loss)
