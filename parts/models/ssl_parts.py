"""The parts an SSL model puts after its backbone: the projection head, the predictor and
the prototypes, built from ``model.head``, ``model.predictor`` and ``model.prototypes``."""

from __future__ import annotations

from typing import NamedTuple

from torch import nn

from hookbus.parts.config import Config
from hookbus.parts.models.heads import MLPHead, Prototypes


class SSLParts(NamedTuple):
    """The parts an SSL model puts after its backbone (:func:`ssl_parts`)."""

    head: MLPHead
    predictor: MLPHead | None
    prototypes: Prototypes | None


def ssl_parts(cfg: Config, backbone: nn.Module, name: str | None) -> SSLParts:
    """The head (``model.head``), and when configured the predictor (``model.predictor``)
    and the prototypes (``model.prototypes``), of an SSL model on ``backbone`` (named
    ``name`` in messages); ``ValueError`` when the sizes of consecutive parts do not
    match. A method's own model builder takes them too where it has them (DINOv2's and
    iBOT's)."""
    model_cfg = cfg.model
    out_dim: int = backbone.out_dim  # type: ignore[assignment]  # set by every backbone
    head_dims = [out_dim if size == "backbone" else size for size in model_cfg.head.dims]
    if head_dims[0] != backbone.out_dim:
        raise ValueError(
            f"model.head.dims[0] is {head_dims[0]} but backbone "
            f"{name!r} gives {backbone.out_dim} features "
            f"(out_dim); set model.head.dims[0] to {backbone.out_dim} or backbone"
        )
    predictor = None
    if model_cfg.predictor.dims:
        if model_cfg.predictor.dims[0] != head_dims[-1]:
            raise ValueError(
                f"model.predictor.dims[0] is {model_cfg.predictor.dims[0]} but the head gives "
                f"{head_dims[-1]}; set it to model.head.dims[-1]"
            )
        predictor = MLPHead(
            model_cfg.predictor.dims,
            model_cfg.predictor.batch_norm,
            model_cfg.predictor.output_batch_norm,
            hidden_bias=model_cfg.predictor.hidden_bias,
        )
    prototypes = None
    if model_cfg.prototypes.count:
        prototypes = Prototypes(
            head_dims[-1], model_cfg.prototypes.count, model_cfg.prototypes.weight_norm
        )
    head = MLPHead(
        head_dims,
        model_cfg.head.batch_norm,
        model_cfg.head.output_batch_norm,
        hidden_bias=model_cfg.head.hidden_bias,
        activation=model_cfg.head.activation,
    )
    return SSLParts(head, predictor, prototypes)
