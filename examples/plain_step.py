"""plain_step: the tutorial's train step, the standard step's contract without its options.

The standard step adds autocast, gradient scaling, accumulation and DDP's ``no_sync``;
this one keeps only what every step must do, so it reads in one screen.
"""

from __future__ import annotations

from typing import Any

import torch

from hookbus import RunEngine, SSLEvents, register_train_step
from hookbus.engine.process.distributed import all_reduce_mean
from hookbus.parts.optim import learning_rate, set_learning_rate
from hookbus.steps import move_to_device


@register_train_step("plain_step")
def plain_step(engine: RunEngine, batch: Any) -> Any:
    """Forward, loss and meters; in train phases backward and an optimizer step.

    Writes ``last_batch``, ``last_output``, ``loss`` (detached, averaged over ranks)
    and ``loss_sum`` (``state.add_loss``) and, in train phases, ``lr`` and ``updates``
    (``state.count_update``); fires ``on_forward``,
    ``on_loss_and_meter``, then in train phases ``on_backward`` and ``on_update``.
    The trainer counts the step in ``iteration`` before calling it, and fires
    ``on_step`` after it returns. What it returns becomes ``state.output``.
    """
    state = engine.state
    batch = move_to_device(batch, state.device)
    state.last_batch = batch
    with torch.set_grad_enabled(state.train):
        output = state.model(batch)
        state.last_output = output
        engine.fire_event(SSLEvents.ON_FORWARD)

        loss = state.loss_fn(output, batch)
        state.add_loss(all_reduce_mean(loss.detach()))
        for meter in state.meters:
            meter.update(output, batch)
        engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
    if not state.train:
        return state.loss

    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    engine.fire_event(SSLEvents.ON_BACKWARD)

    state.lr = learning_rate(state.cfg.optimizer, state.iteration - 1, state.phase_length)
    set_learning_rate(state.optimizer, state.lr)
    state.optimizer.step()
    state.count_update()
    engine.fire_event(SSLEvents.ON_UPDATE)
    return state.loss
