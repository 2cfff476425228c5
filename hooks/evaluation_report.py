"""EvaluationReportHook: kNN and linear-probe accuracy, random init vs trained, at the end."""

from __future__ import annotations

import json
import logging
from typing import cast

import torch
from torch import Tensor

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_io import write_text_atomic
from hookbus.engine.errors import RESUME_HINT, writing
from hookbus.parts.config import Config, method_config
from hookbus.parts.meters.frozen_eval import knn_accuracy, linear_probe_accuracy
from hookbus.parts.meters.knn import Encode, KnnVote, extract_features, gather_labelled
from hookbus.parts.models import build_model
from hookbus.parts.sharding import is_sharded

logger = logging.getLogger("hookbus")


@register_hook("evaluation_report")
class EvaluationReportHook(Hook):
    """Compares the encoder at random init with the trained one and prints a table.

    ============  ==============================================================
    fires         ``on_start`` (the random-init encoder: the model built afresh
                  with ``trainer.seed``, as the run's own was, around a copy of a
                  backbone given from Python as it was given) and ``on_end``
                  (the trained encoder); every rank encodes its share of the test
                  split, rank 0 gathers the whole split (its padding left out),
                  encodes the train split (every rank, for a sharded model),
                  scores it and writes
    reads         ``state.cfg``, ``state.initial_backbone``, ``state.base_model``,
                  the ``"memory"`` (train split) and ``"test"`` loaders,
                  ``state.device``, ``state.run_dir``
    writes        ``state.summary["evaluation"]``, ``evaluation.json`` in the run
                  directory (a failed write: a ``WriteFailure`` naming it, exit
                  status 1; the run's end-of-run work stays owed), and the table
                  to the ``hookbus`` logger
    ============  ==============================================================

    kNN top-1 uses the train split as memory (k, vote and temperature from
    ``meters.knn``); the probe is a
    logistic regression on ``labels_per_class`` labelled train images per class, the mean
    over ``draws`` label draws, scored on the test split.
    """

    priority = Priority.REPORT

    def __init__(
        self,
        *,
        k: int = 20,
        labels_per_class: int = 10,
        draws: int = 10,
        vote: KnnVote = "majority",
        temperature: float = 0.07,
    ) -> None:
        super().__init__()
        self.k = k
        self.vote = vote
        self.temperature = temperature
        self.labels_per_class = labels_per_class
        self.draws = draws
        self.results: dict[str, dict[str, float]] = {}

    @classmethod
    def from_config(cls, cfg: Config) -> EvaluationReportHook:
        """Built from ``hooks.evaluation_report`` and ``meters.knn``."""
        section, knn = cfg.hooks.evaluation_report, cfg.meters.knn
        return cls(
            k=knn.k,
            labels_per_class=section.labels_per_class,
            draws=section.draws,
            vote=knn.vote,
            temperature=knn.temperature,
        )

    def on_start(self, engine: RunEngine) -> None:
        state = engine.state
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(state.cfg.trainer.seed)
            backbone = state.initial_backbone
            initial = build_model(method_config(state.cfg), backbone=backbone).to(state.device)
        self._evaluate_as("random init", initial, state)

    def on_end(self, engine: RunEngine) -> None:
        state = engine.state
        self._evaluate_as("trained", state.base_model, state)
        if state.rank != 0:
            return
        state.summary["evaluation"] = dict(self.results)
        path = state.run_dir / "evaluation.json"
        with writing(path, RESUME_HINT):
            write_text_atomic(path, json.dumps(self.results, indent=2))
        logger.info("evaluation of the encoder:\n%s", self.table())

    def _evaluate_as(self, name: str, model: torch.nn.Module, state: RunState) -> None:
        """Every rank encodes its share of the test split; rank 0 gathers the whole split
        and stores ``model``'s results under ``name``."""
        was_training = model.training
        model.eval()
        with torch.no_grad():
            encode = cast(Encode, model.encode)
            shard = extract_features(encode, state.data_loaders["test"], state.device)
            test = gather_labelled(*shard)
            if state.rank == 0 or is_sharded(model):  # a sharded model's forward is collective
                train = extract_features(encode, state.data_loaders["memory"], state.device)
        model.train(was_training)
        if state.rank == 0:
            self.results[name] = self.scores(train, test, state.cfg.trainer.seed)

    def scores(
        self, train: tuple[Tensor, Tensor], test: tuple[Tensor, Tensor], seed: int
    ) -> dict[str, float]:
        """kNN top-1 and probe accuracy of the test features and labels against the
        train ones."""
        return {
            "knn_top1": knn_accuracy(
                *train, *test, k=self.k, vote=self.vote, temperature=self.temperature
            ),
            "probe_top1": linear_probe_accuracy(
                *train,
                *test,
                labels_per_class=self.labels_per_class,
                draws=self.draws,
                seed=seed,
            ),
        }

    def table(self) -> str:
        """The results as a small text table."""
        probe = f"probe {self.labels_per_class}/class"
        lines = [f"{'encoder':<12} {'kNN top-1':>10} {probe:>14}"]
        for name, values in self.results.items():
            lines.append(f"{name:<12} {values['knn_top1']:>10.4f} {values['probe_top1']:>14.4f}")
        return "\n".join(lines)
