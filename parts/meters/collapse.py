"""Collapse diagnostics: feature spread, teacher entropy and prototypes in use."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.parts.losses.dino import teacher_targets
from hookbus.parts.meters.base import Meter


def feature_std(features: Tensor) -> Tensor:
    """Spread of ``features`` ``[B, D]``: the per-dimension standard deviation of the
    L2-normalised rows, averaged over dimensions and multiplied by ``sqrt(D)``.

    About 1 for features spread evenly over the sphere, 0 when every row is the same
    (collapse)."""
    normalised = F.normalize(features.detach().float(), dim=1)
    return normalised.std(dim=0).mean() * normalised.shape[1] ** 0.5


def target_entropy(targets: Tensor) -> Tensor:
    """Mean entropy (nats) of the rows of ``targets`` ``[B, K]`` (probabilities)."""
    return -(targets * torch.log(targets.clamp_min(1e-12))).sum(dim=1).mean()


def prototypes_in_use(scores: Tensor) -> Tensor:
    """Number of prototypes (columns of ``scores`` ``[B, K]``) that are some row's argmax.

    Counted without a host sync."""
    used = torch.zeros(scores.shape[1], device=scores.device)
    used.scatter_(0, scores.argmax(dim=1), 1.0)
    return used.sum()


class CollapseMeter(Meter):
    """Signs of representation collapse, averaged over the steps of a phase.

    ===================  ==========================================================
    value                from the step's model output (first view)
    ===================  ==========================================================
    ``feature_std``      ``view_features``: :func:`feature_std` of the backbone
                         features; near 0 means collapse
    ``teacher_entropy``  ``teacher_scores``, ``teacher_center``,
                         ``teacher_temperature`` (DINO): entropy of the teacher's
                         targets; near 0 (one-hot) or near ``ln K`` (uniform) means
                         collapse
    ``prototypes_used``  ``scores`` (SwAV, DINO): prototypes that are the argmax of
                         at least one image in the step's batch (per rank); 1 means
                         collapse
    ===================  ==========================================================

    A value appears only when its inputs were in the outputs. Active in train and test
    phases.
    """

    name = "collapse"
    count_names = (
        "feature_steps",
        "feature_std",
        "entropy_steps",
        "teacher_entropy",
        "prototype_steps",
        "prototypes_used",
    )
    value_names = ("feature_std", "teacher_entropy", "prototypes_used")
    phases = ("train", "test")

    def update(self, output: dict, batch: dict) -> None:
        """Accumulate the diagnostics the step's ``output`` allows."""
        if "view_features" in output:
            self.add("feature_std", feature_std(output["view_features"][0]))
            self.add("feature_steps", torch.ones(()))
        if all(
            key in output for key in ("teacher_scores", "teacher_center", "teacher_temperature")
        ):
            targets = teacher_targets(
                output["teacher_scores"][0].detach(),
                output["teacher_center"],
                float(output["teacher_temperature"]),
            )
            self.add("teacher_entropy", target_entropy(targets))
            self.add("entropy_steps", torch.ones(()))
        if "scores" in output:
            self.add("prototypes_used", prototypes_in_use(output["scores"][0].detach()))
            self.add("prototype_steps", torch.ones(()))

    def value(self) -> dict[str, float]:
        """The phase means of the diagnostics that had inputs."""
        values = {}
        for steps, name in (
            ("feature_steps", "feature_std"),
            ("entropy_steps", "teacher_entropy"),
            ("prototype_steps", "prototypes_used"),
        ):
            count = float(self.counts[steps])
            if count:
                values[name] = float(self.counts[name]) / count
        return values
