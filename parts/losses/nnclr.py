"""The NNCLR loss: InfoNCE with a nearest neighbour from the support set as the positive."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.global_batch import contrast_with_gathered
from hookbus.parts.losses.precision import at_least_float32


class NnclrLoss(nn.Module):
    """NNCLR (Dwibedi et al., 2021) on ``output["neighbours"]`` (per view ``[B, D]``: the
    nearest neighbour of each embedding in the support set, which the ``nnclr_support``
    hook writes) and ``output["predictions"]`` (the predictor, per view ``[B, D]``).

    For every ordered pair of different views ``(a, b)`` and every row ``i``, with
    ``n_i = NN(z_i^a)`` and ``p_k = p_k^b`` L2-normalised::

        loss_i = -log( exp(n_i . p_i / T) / sum_k exp(n_i . p_k / T) )

    as in the paper's equation 2: the neighbour of image ``i`` is held fixed and the
    negatives are the other view's predictions of every image ``k`` of the batch. The
    loss is the mean over rows and pairs; for two views, the mean of the two directions
    (the paper's symmetric loss). No gradient reaches the neighbours; it flows into the
    predictions only.

    When torch.distributed is initialised with more than one process, every rank's
    predictions are gathered (``hookbus.engine.process.distributed.all_gather_cat_with_gradient``,
    through which gradients flow) and the sum runs over the global batch, the positive of
    local row ``i`` at global row ``rank * B + i``; averaging the ranks' losses (and
    DDP's averaging of gradients) gives the loss of one process on the global batch.
    Every rank must then have the same batch size. It runs in float32 (float64 for
    float64 inputs) with autocast off.
    """

    def __init__(self, temperature: float) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        if "predictions" not in output:
            raise KeyError("NnclrLoss needs output['predictions']: set model.predictor.dims")
        if "neighbours" not in output:
            raise KeyError(
                "NnclrLoss needs output['neighbours']: the nnclr_support hook writes them "
                "(loss.name nnclr adds it to the default hooks)"
            )
        predictions = output["predictions"]
        if len(predictions) < 2:
            raise ValueError(f"NNCLR needs at least 2 views, got {len(predictions)}")
        with torch.autocast(device_type=predictions[0].device.type, enabled=False):
            local = [F.normalize(at_least_float32(p), dim=1) for p in predictions]
            anchors = [
                F.normalize(at_least_float32(n.detach()), dim=1).to(local[0].dtype)
                for n in output["neighbours"]
            ]
            gathered = [distributed.all_gather_cat_with_gradient(p) for p in local]
            # Local neighbours against the other view's global predictions: row i's
            # positive is this rank's row i among them.
            losses = [
                contrast_with_gathered(anchors[a], gathered[b], self.temperature)
                for a in range(len(anchors))
                for b in range(len(gathered))
                if a != b
            ]
        return torch.stack(losses).mean()
