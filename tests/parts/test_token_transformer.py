"""The token transformer MAE's decoder and I-JEPA's predictor share: the state-dict names
a saved run's checkpoint holds, the draw of a seeded build, and the shared layers' use."""

from __future__ import annotations

import pytest
import torch

from hookbus.parts.models.ijepa import JepaPredictor
from hookbus.parts.models.mae import MaeDecoder
from hookbus.parts.models.token_transformer import TokenTransformer

SHARED = [
    "mask_token",
    "embed.weight",
    "embed.bias",
    "layers.0.ln_1.weight",
    "layers.0.ln_1.bias",
    "layers.0.self_attention.in_proj_weight",
    "layers.0.self_attention.in_proj_bias",
    "layers.0.self_attention.out_proj.weight",
    "layers.0.self_attention.out_proj.bias",
    "layers.0.ln_2.weight",
    "layers.0.ln_2.bias",
    "layers.0.mlp.0.weight",
    "layers.0.mlp.0.bias",
    "layers.0.mlp.3.weight",
    "layers.0.mlp.3.bias",
    "ln.weight",
    "ln.bias",
]


def decoder() -> MaeDecoder:
    return MaeDecoder(8, 4, (2, 2), width=8, depth=1, heads=2)


def predictor() -> JepaPredictor:
    return JepaPredictor(8, (2, 2), width=8, depth=1, heads=2)


@pytest.mark.parametrize(
    ("build", "output"), [(decoder, "predict"), (predictor, "project")], ids=["mae", "ijepa"]
)
def test_the_state_dict_keeps_the_names_checkpoints_hold(build, output: str) -> None:
    assert list(build().state_dict()) == [*SHARED, f"{output}.weight", f"{output}.bias"]


@pytest.mark.parametrize("build", [decoder, predictor], ids=["mae", "ijepa"])
def test_a_seeded_build_draws_the_shared_parts_first(build) -> None:
    # The shared parts take the first numbers of a seeded build, as a TokenTransformer
    # of the same sizes alone draws them; only the subclass's init then redraws some.
    torch.manual_seed(3)
    module = build()
    torch.manual_seed(3)
    shared = TokenTransformer(8, (2, 2), width=8, depth=1, heads=2, mlp_dim=None)
    for name, value in shared.state_dict().items():
        if name.startswith(("layers.", "ln.")):
            assert torch.equal(module.state_dict()[name], value), name
    assert module.layers[0].mlp[0].out_features == 32  # mlp_dim None: 4 x width


def test_transform_runs_the_layers_then_the_final_norm() -> None:
    torch.manual_seed(0)
    module = TokenTransformer(8, (2, 2), width=8, depth=2, heads=2, mlp_dim=16)
    x = torch.randn(3, 5, 8)
    assert torch.equal(module.transform(x), module.ln(module.layers(x)))
    assert module.layers[1].mlp[0].out_features == 16
    assert module.grid == (2, 2) and module.mask_token.shape == (1, 1, 8)
