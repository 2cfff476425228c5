"""The I-JEPA loss against the paper's equation and the authors' smooth-L1, in float64."""

from __future__ import annotations

import pytest
import torch

from hookbus.parts.losses.ijepa import IjepaLoss, target_tokens

B, M, KT, N, D = 3, 2, 4, 9, 5


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Predictions ``[B, M, Kt, D]``, teacher tokens ``[B, N, D]``, target indices."""
    generator = torch.Generator().manual_seed(seed)
    prediction = torch.randn(B, M, KT, D, generator=generator, dtype=torch.float64)
    teacher = 3 * torch.randn(B, N, D, generator=generator, dtype=torch.float64) + 1
    target_keep = torch.stack(
        [
            torch.stack([torch.randperm(N, generator=generator)[:KT] for _ in range(M)])
            for _ in range(B)
        ]
    )
    return prediction.requires_grad_(), teacher, target_keep


def normalised(token: torch.Tensor) -> torch.Tensor:
    """A token's layer norm without scale or shift: (s - mean) / sqrt(var + 1e-5), the
    variance divided by D."""
    mean = sum(token) / len(token)
    var = sum((value - mean) ** 2 for value in token) / len(token)
    return (token - mean) / (var + 1e-5) ** 0.5


def paper_l2(prediction: torch.Tensor, teacher: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The paper's loss, image by image: 1/M sum_i sum_{j in B_i} ||s_hat_j - s_j||^2,
    then the mean over the images."""
    per_image = []
    for b in range(B):
        total = prediction.new_zeros(())
        for i in range(M):
            for j in range(KT):
                target = normalised(teacher[b, int(keep[b, i, j])])
                total = total + ((prediction[b, i, j] - target) ** 2).sum()
        per_image.append(total / M)
    return sum(per_image) / B


def code_smooth_l1(
    prediction: torch.Tensor, teacher: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    """The authors' loss: smooth L1 (beta 1) of every value, averaged over all of them:
    0.5 d^2 where |d| < 1, |d| - 0.5 elsewhere."""
    values = []
    for b in range(B):
        for i in range(M):
            for j in range(KT):
                d = prediction[b, i, j] - normalised(teacher[b, int(keep[b, i, j])])
                values.append(torch.where(d.abs() < 1, 0.5 * d**2, d.abs() - 0.5).sum())
    return sum(values) / (B * M * KT * D)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    ("distance", "reference"), [("l2", paper_l2), ("smooth_l1", code_smooth_l1)]
)
def test_the_loss_and_its_gradient_equal_the_formula(seed: int, distance: str, reference) -> None:
    prediction, teacher, keep = inputs(seed)
    output = {"predictions": prediction, "teacher_embeddings": [teacher]}
    loss = IjepaLoss(distance)(output, {"target_keep": keep})
    (grad,) = torch.autograd.grad(loss, prediction)
    expected = reference(prediction, teacher, keep)
    (expected_grad,) = torch.autograd.grad(expected, prediction)
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, expected, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-12, atol=1e-15)


def test_the_smooth_l1_case_has_values_on_both_sides_of_beta() -> None:
    # The check above covers both branches of smooth L1 only if the distances straddle 1.
    prediction, teacher, keep = inputs(0)
    distances = (prediction - target_tokens(teacher, keep)).abs()
    assert (distances < 1).any() and (distances > 1).any()


def test_the_targets_are_the_normalised_tokens_of_the_target_patches() -> None:
    _, teacher, keep = inputs(3)
    targets = target_tokens(teacher, keep)
    assert targets.shape == (B, M, KT, D)
    torch.testing.assert_close(targets[2, 1, 3], normalised(teacher[2, int(keep[2, 1, 3])]))
    torch.testing.assert_close(targets.mean(dim=-1), torch.zeros(B, M, KT, dtype=torch.float64))


def test_no_gradient_reaches_the_target_encoder() -> None:
    prediction, teacher, keep = inputs(4)
    teacher.requires_grad_()
    IjepaLoss()(
        {"predictions": prediction, "teacher_embeddings": [teacher]}, {"target_keep": keep}
    ).backward()
    assert teacher.grad is None
    assert prediction.grad is not None


def test_a_perfect_prediction_costs_nothing() -> None:
    _, teacher, keep = inputs(5)
    output = {"predictions": target_tokens(teacher, keep), "teacher_embeddings": [teacher]}
    for distance in ("l2", "smooth_l1"):
        assert IjepaLoss(distance)(output, {"target_keep": keep}).item() == 0.0


def test_low_precision_inputs_are_computed_in_float32() -> None:
    prediction, teacher, keep = inputs(6)
    output = {
        "predictions": prediction.detach().bfloat16(),
        "teacher_embeddings": [teacher.bfloat16()],
    }
    assert IjepaLoss()(output, {"target_keep": keep}).dtype == torch.float32


def test_an_unknown_distance_is_refused() -> None:
    with pytest.raises(ValueError, match="smooth_l1 or l2"):
        IjepaLoss("l1")  # type: ignore[arg-type]
