"""OnlineProbeHook: a linear classifier trained beside SSL on detached backbone features."""

from __future__ import annotations

import copy
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.config import OnlineProbeConfig
from hookbus.engine.process import distributed


@register_hook("online_probe")
class OnlineProbeHook(Hook):
    """A linear probe ``nn.Linear(D, num_classes)`` trained during SSL training, with its
    own optimizer, on backbone features cut from the graph: it never sends a gradient to
    the backbone.

    ======================  ===========================================================
    event                   what it does
    ======================  ===========================================================
    ``on_start``            builds the probe restored from a checkpoint on
                            ``state.device`` (a fresh probe is built at its first
                            step, on the features' device)
    ``on_phase_start``      sets the counts to zero when the phase starts afresh
                            (``state.batches`` 0; a phase resumed inside keeps the
                            restored counts)
    ``on_loss_and_meter``   train phases: reads ``state.last_output["view_features"][0]``
                            (the first view's backbone features, detached) and
                            ``state.last_batch["label"]``, counts the probe's hits,
                            then takes one optimizer step of the probe on the mean
                            cross-entropy. Test phases: reads
                            ``state.last_output["features"]`` (the clean images) and
                            counts the hits, under ``no_grad``
    ``on_phase_end``        sums the counts over ranks and writes
                            ``state.metrics["probe_top1"]`` (hits / labelled images;
                            nothing when the phase had no labelled image)
    ======================  ===========================================================

    Priority ``HIGH`` (-50): at phase end it runs after the meter sync (``FIRST``),
    which fills ``state.metrics``, and before the reporters (``REPORT``: log,
    metrics.json, TensorBoard) and the checkpoint (``LAST``), so they all see
    ``probe_top1``. In train phases the value is the accuracy on the augmented train
    batches before each probe step; in test phases, on the clean test images.

    Images with a negative label (an unlabelled folder) are left out. The probe is
    built at its first step from the features' width, with zero weights (no random
    draw, so the run's random stream is the one it would be without the probe); it
    steps once per train batch at a constant learning rate, whatever
    ``optimizer.accumulate_steps``. Distributed: the probe's gradient is averaged over
    ranks before each step (a few kB), so every rank keeps the same probe, as the
    checkpoint of rank 0 assumes.

    State: the probe's weights, its optimizer state and the phase's counts, in
    checkpoints under ``online_probe``.
    """

    priority = Priority.HIGH
    metric_names = ("probe_top1",)

    def __init__(
        self,
        *,
        num_classes: int,
        optimizer: Literal["adamw", "sgd"] = "adamw",
        lr: float = 1e-3,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        if optimizer not in ("adamw", "sgd"):
            raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {optimizer!r}")
        if lr <= 0 or weight_decay < 0:
            raise ValueError("the probe needs lr > 0 and weight_decay >= 0")
        self.num_classes = num_classes
        self.optimizer_name = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.probe: nn.Linear | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.correct = torch.zeros((), dtype=torch.float64)
        self.total = torch.zeros((), dtype=torch.float64)
        self._restored: dict[str, Any] | None = None
        self._labels_checked = False

    @classmethod
    def from_section(cls, section: OnlineProbeConfig) -> OnlineProbeHook:
        """From its own section, ``hooks.online_probe``."""
        if section.num_classes is None:
            raise ValueError("hooks.online_probe.num_classes is required")
        return cls(
            num_classes=section.num_classes,
            optimizer=section.optimizer,
            lr=section.lr,
            weight_decay=section.weight_decay,
        )

    def on_start(self, engine: RunEngine) -> None:
        if self._restored is not None:
            self._build(engine.state.device)

    def on_phase_start(self, engine: RunEngine) -> None:
        if engine.state.batches == 0:
            self.correct = torch.zeros((), dtype=torch.float64)
            self.total = torch.zeros((), dtype=torch.float64)

    def on_loss_and_meter(self, engine: RunEngine) -> None:
        state = engine.state
        output = state.last_output
        key = "view_features" if state.train else "features"
        if key not in output:
            raise KeyError(
                f"online_probe needs output[{key!r}] (the backbone features of the "
                f"{'views' if state.train else 'clean images'}); the model gave "
                f"{sorted(output)}: set hooks.online_probe.enabled false for this model"
            )
        features = output[key][0] if state.train else output[key]
        features = features.detach().float()
        labels = state.last_batch["label"].to(features.device)
        probe = self._probe(features)
        self._check_labels(labels)
        labelled = labels >= 0
        targets = labels.where(labelled, torch.full_like(labels, -100))
        with torch.enable_grad() if state.train else torch.no_grad():
            logits = probe(features)
        hits = (logits.detach().argmax(dim=1) == labels) & labelled
        self.correct = self.correct + hits.sum()
        self.total = self.total + labelled.sum()
        if state.train:
            self._step(logits, targets, labelled)

    def on_phase_end(self, engine: RunEngine) -> None:
        device = engine.state.device
        counts = torch.stack([self.correct.to(device), self.total.to(device)])
        correct, total = distributed.all_reduce_sum(counts).tolist()
        if total:
            engine.state.metrics["probe_top1"] = correct / total

    def state_dict(self) -> dict[str, Any]:
        """``{"probe": weights, "optimizer": its state, "counts": [hits, labelled]}``
        (empty dicts before the probe is built)."""
        counts = torch.stack([self.correct.cpu(), self.total.cpu()]).to(torch.float64)
        if self.probe is None or self.optimizer is None:
            restored = self._restored or {"probe": {}, "optimizer": {}}
            return {
                "probe": restored["probe"],
                "optimizer": restored["optimizer"],
                "counts": counts,
            }
        weights = {
            name: value.detach().cpu().clone() for name, value in self.probe.state_dict().items()
        }
        return {
            "probe": weights,
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "counts": counts,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counts now, the probe and its optimizer when it is next built (at
        ``on_start``, on ``state.device``)."""
        self.correct, self.total = state["counts"].to(torch.float64).clone().unbind()
        if state["probe"]:
            self._restored = state
            self.probe = self.optimizer = None

    def _probe(self, features: Tensor) -> nn.Linear:
        """The probe, built on the features' device at the first step (or restored)."""
        if self.probe is None:
            self._build(features.device, features.shape[1])
        assert self.probe is not None
        return self.probe

    def _build(self, device: torch.device | str, width: int = 0) -> None:
        """A zero probe of ``width`` inputs and a fresh optimizer on ``device``; the
        restored state, when there is one, sets the width and is loaded into them."""
        restored, self._restored = self._restored, None
        if restored is not None:
            width = restored["probe"]["weight"].shape[1]
        probe = nn.Linear(width, self.num_classes, device=device)
        nn.init.zeros_(probe.weight)
        nn.init.zeros_(probe.bias)
        if self.optimizer_name == "sgd":
            optimizer: torch.optim.Optimizer = torch.optim.SGD(
                probe.parameters(), lr=self.lr, momentum=0.9, weight_decay=self.weight_decay
            )
        else:
            optimizer = torch.optim.AdamW(
                probe.parameters(), lr=self.lr, weight_decay=self.weight_decay
            )
        if restored is not None:
            probe.load_state_dict(restored["probe"])
            optimizer.load_state_dict(restored["optimizer"])
        self.probe, self.optimizer = probe, optimizer

    def _check_labels(self, labels: Tensor) -> None:
        """Once per run (one host sync): the labels fit ``num_classes``."""
        if self._labels_checked:
            return
        self._labels_checked = True
        if len(labels) and int(labels.max()) >= self.num_classes:
            raise ValueError(
                f"online_probe: a label is {int(labels.max())} but "
                f"hooks.online_probe.num_classes is {self.num_classes}: set it to the "
                "number of classes of the data"
            )

    def _step(self, logits: Tensor, targets: Tensor, labelled: Tensor) -> None:
        """One optimizer step of the probe on the mean cross-entropy of the labelled
        rows, its gradient averaged over ranks."""
        assert self.probe is not None and self.optimizer is not None
        loss = F.cross_entropy(logits, targets, reduction="sum") / labelled.sum().clamp(min=1)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if distributed.is_distributed():
            params = list(self.probe.parameters())
            # After backward every parameter of the probe has its gradient.
            grads = [cast(Tensor, p.grad) for p in params]
            flat = distributed.all_reduce_mean(torch.cat([g.flatten() for g in grads]))
            for grad, reduced in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
                grad.copy_(reduced.view_as(grad))
        self.optimizer.step()
