"""SmallCNN, MLPHead, SSLModel and build_model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookbus import BACKBONES, Config
from hookbus.engine.registry import UnknownNameError
from hookbus.parts.models import MLPHead, SmallCNN, SSLModel, build_model


def model() -> SSLModel:
    torch.manual_seed(0)
    return SSLModel(SmallCNN(width=4), MLPHead([16, 16, 8], batch_norm=True))


def views(count: int = 2, size: int = 5) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(size, 1, 16, 16, generator=generator) for _ in range(count)]


def test_small_cnn_has_240608_parameters() -> None:
    assert sum(p.numel() for p in SmallCNN(in_channels=1, width=32).parameters()) == 240_608


def test_small_cnn_gives_flat_features_of_out_dim() -> None:
    net = SmallCNN(in_channels=3, width=8)
    assert net.out_dim == 32
    assert net(torch.randn(2, 3, 16, 16)).shape == (2, 32)


def test_head_puts_norm_and_relu_after_hidden_layers_only() -> None:
    kinds = [type(layer) for layer in MLPHead([8, 6, 5, 4], batch_norm=True).layers]
    assert kinds == [
        nn.Linear,
        nn.BatchNorm1d,
        nn.ReLU,
        nn.Linear,
        nn.BatchNorm1d,
        nn.ReLU,
        nn.Linear,
    ]


def test_head_without_batch_norm() -> None:
    head = MLPHead([8, 6, 4], batch_norm=False)
    assert [type(layer) for layer in head.layers] == [nn.Linear, nn.ReLU, nn.Linear]
    assert head(torch.randn(3, 8)).shape == (3, 4)


def test_an_output_batch_norm_follows_a_bias_free_last_layer() -> None:
    head = MLPHead([8, 6, 4], batch_norm=True, output_batch_norm="no_affine")
    kinds = [type(layer) for layer in head.layers]
    assert kinds == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Linear, nn.BatchNorm1d]
    last, norm = head.layers[-2], head.layers[-1]
    assert last.bias is None and not norm.affine and norm.num_features == 4
    affine = MLPHead([8, 6, 4], batch_norm=True, output_batch_norm="affine").layers[-1]
    assert affine.affine and affine.weight.shape == (4,)
    assert "layers.4.running_mean" in head.state_dict()


def test_the_output_batch_norm_standardises_each_output_over_the_batch() -> None:
    torch.manual_seed(0)
    features = torch.randn(64, 8) * 3 + 5
    plain = MLPHead([8, 6, 4], batch_norm=False)(features)
    assert plain.mean(dim=0).abs().max() > 0.05
    torch.manual_seed(0)
    head = MLPHead([8, 6, 4], batch_norm=False, output_batch_norm="no_affine")
    out = head(features)  # train mode: the batch's own statistics
    torch.testing.assert_close(out.mean(dim=0), torch.zeros(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(dim=0, unbiased=False), torch.ones(4), atol=1e-3, rtol=0)
    # The same layer weights: the output is the plain head's last Linear, standardised.
    linear = head.layers[-2](head.layers[1](head.layers[0](features)))
    standard = (linear - linear.mean(0)) / torch.sqrt(linear.var(0, unbiased=False) + 1e-5)
    torch.testing.assert_close(out, standard, atol=1e-5, rtol=1e-5)
    affine = MLPHead([8, 6, 4], batch_norm=False, output_batch_norm="affine")
    with torch.no_grad():
        affine.layers[-1].weight.fill_(2.0)
        affine.layers[-1].bias.fill_(-1.0)
    torch.testing.assert_close(
        affine(features).mean(dim=0), torch.full((4,), -1.0), atol=1e-5, rtol=0
    )


def test_a_bad_output_batch_norm_is_refused() -> None:
    with pytest.raises(ValueError, match="none, affine or no_affine"):
        MLPHead([8, 4], batch_norm=True, output_batch_norm="yes")  # type: ignore[arg-type]


def test_the_heads_output_batch_norm_comes_from_the_config() -> None:
    cfg = Config.model_validate(
        {
            "model": {
                "head": {"dims": [128, 64, 16], "output_batch_norm": "affine"},
                "predictor": {"dims": [16, 32, 16], "output_batch_norm": "no_affine"},
            }
        }
    )
    net = build_model(cfg)
    assert isinstance(net.head.layers[-1], nn.BatchNorm1d) and net.head.layers[-1].affine
    assert isinstance(net.predictor.layers[-1], nn.BatchNorm1d)
    assert not net.predictor.layers[-1].affine
    assert isinstance(build_model(Config()).head.layers[-1], nn.Linear)  # none by default
    with pytest.raises(ValueError, match="output_batch_norm"):
        Config.model_validate({"model": {"head": {"output_batch_norm": "last"}}})


def test_forward_runs_the_backbone_once_on_all_views() -> None:
    net = model()
    calls: list[int] = []
    net.backbone.register_forward_hook(lambda _m, inputs, _o: calls.append(len(inputs[0])))
    output = net({"views": views(3)})
    assert calls == [15]
    assert [e.shape for e in output["embeddings"]] == [(5, 8)] * 3
    assert [f.shape for f in output["view_features"]] == [(5, 16)] * 3
    assert "features" not in output


def test_forward_splits_outputs_per_view() -> None:
    net = model().eval()
    batch_views = views(2)
    output = net({"views": batch_views})
    for view, embedding, feature in zip(
        batch_views, output["embeddings"], output["view_features"], strict=True
    ):
        torch.testing.assert_close(feature, net.backbone(view))
        torch.testing.assert_close(embedding, net.head(net.backbone(view)))


def test_forward_encodes_the_clean_images_when_present() -> None:
    net = model().eval()
    image = views(1)[0]
    output = net({"views": views(2), "image": image})
    torch.testing.assert_close(output["features"], net.encode(image))
    torch.testing.assert_close(net.encode(image), net.backbone(image))


def test_build_model_follows_the_config() -> None:
    cfg = Config.model_validate(
        {"model": {"backbone": {"width": 8}, "head": {"dims": [32, 24, 12]}}}
    )
    built = build_model(cfg)
    assert isinstance(built.backbone, SmallCNN)
    assert built.backbone.out_dim == 32
    assert built.head.layers[-1].out_features == 12


def test_build_model_rejects_a_head_that_does_not_fit_the_backbone() -> None:
    cfg = Config.model_validate({"model": {"head": {"dims": [64, 32]}}})
    with pytest.raises(ValueError, match=r"model\.head\.dims\[0\] is 64 .* 128"):
        build_model(cfg)


def test_unknown_backbone_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="small_cnn"):
        BACKBONES.get("resnet")


@pytest.mark.slow
def test_zero_init_residual_starts_every_residual_block_as_the_identity() -> None:
    cfg = Config.model_validate(
        {"model": {"backbone": {"name": "resnet18", "zero_init_residual": True}}}
    )
    net = BACKBONES.get("resnet18")(cfg.model.backbone)
    blocks = [
        block for layer in (net.layer1, net.layer2, net.layer3, net.layer4) for block in layer
    ]
    assert len(blocks) == 8
    assert all(torch.count_nonzero(block.bn2.weight) == 0 for block in blocks)
    assert all(torch.equal(block.bn1.weight, torch.ones_like(block.bn1.weight)) for block in blocks)
    first = net.layer1[0].eval()  # no downsampling: the block is relu(x + 0)
    x = torch.rand(2, 64, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(first(x), x)
    plain = BACKBONES.get("resnet18")(
        Config().model.backbone.model_copy(update={"name": "resnet18"})
    )
    assert torch.equal(plain.layer1[0].bn2.weight, torch.ones(64))


@pytest.mark.parametrize(("width", "features"), [(4, 16), (8, 32)])
def test_the_default_head_takes_the_backbones_feature_size(width: int, features: int) -> None:
    cfg = Config.model_validate({"model": {"backbone": {"width": width}}})
    assert cfg.model.head.dims == ["backbone", 128, 64]
    model = build_model(cfg)
    assert model.head(torch.zeros(2, features)).shape == (2, 64)


def test_backbone_as_a_later_head_size_is_refused() -> None:
    with pytest.raises(ValueError, match="only the first entry may be backbone"):
        Config.model_validate({"model": {"head": {"dims": [32, "backbone"]}}})
