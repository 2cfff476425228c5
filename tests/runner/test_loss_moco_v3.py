"""The MoCo v3 loss against the paper's equations, written out element by element.

    ``ctr(q, k) = -2 tau / N sum_i log( exp(q_i . k_i / tau) / sum_j exp(q_i . k_j / tau) )``
    ``loss = ctr(q_1, k_2) + ctr(q_2, k_1)``

with ``q`` the L2-normalised predictions of the online network, ``k`` the L2-normalised
projections of the momentum encoder (no gradient) and ``j`` over the keys of the whole
global batch. On two gloo ranks, each holding its shard of a fixed global batch, the
loss and gradients are those of one process on the whole batch.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer, load_config
from hookbus.config import validate_config
from hookbus.hook_set import method_hooks
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.losses import MocoV3Loss, build_loss
from hookbus.parts.models import build_model
from hookbus.parts.optim import build_optimizer
from tests.loss_reference import (
    ShardedLoss,
    assert_same_value_and_gradients,
    log_softmax_entry,
    on_two_ranks,
    tensors,
    two_rank_results,
    unit,
)
from tests.tiny_data import tiny_recipe, train_tiny

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
GLOBAL_BATCH, DIM = 8, 5


def contrast(queries: torch.Tensor, keys: torch.Tensor, temperature: float) -> torch.Tensor:
    """ctr(q, k): each query classified toward the key of its own row among all keys,
    the mean cross-entropy scaled by 2 tau."""
    q = [unit(row) for row in queries]
    k = [unit(row) for row in keys.detach()]
    terms = []
    for i, query in enumerate(q):
        logits = [sum(query[d] * key[d] for d in range(len(query))) / temperature for key in k]
        terms.append(-log_softmax_entry(logits, i))
    return 2 * temperature * sum(terms) / len(q)


def output(predictions: list[torch.Tensor], keys: list[torch.Tensor]) -> dict:
    return {"predictions": predictions, "teacher_embeddings": keys}


@pytest.mark.parametrize("temperature", [0.2, 1.0])
def test_two_views_match_the_paper(temperature: float) -> None:
    q1, q2, k1, k2 = tensors(4, rows=6, cols=4)
    ours = MocoV3Loss(temperature)(output([q1, q2], [k1, k2]), {})
    expected = contrast(q1, k2, temperature) + contrast(q2, k1, temperature)
    # No gradient reaches the keys, in ours or in the reference.
    assert_same_value_and_gradients(ours, expected, [q1, q2, k1, k2])


def test_no_gradient_reaches_the_keys() -> None:
    q1, q2, k1, k2 = tensors(4, rows=4, cols=3, seed=1)
    MocoV3Loss()(output([q1, q2], [k1, k2]), {}).backward()
    assert k1.grad is None and k2.grad is None
    assert q1.grad is not None and bool(q1.grad.abs().sum() > 0)


def test_three_views_keep_the_two_view_scale() -> None:
    queries = tensors(3, rows=5, cols=3, seed=2)
    keys = tensors(3, rows=5, cols=3, seed=3)
    ours = MocoV3Loss(0.5)(output(queries, keys), {})
    pairs = [(a, b) for a in range(3) for b in range(3) if a != b]
    expected = 2 * sum(contrast(queries[a], keys[b], 0.5) for a, b in pairs) / len(pairs)
    assert_same_value_and_gradients(ours, expected, queries)


def test_aligned_one_hot_queries_and_keys_give_the_closed_form() -> None:
    # q_i = k_i = e_i: the positive logit is 1/tau, the B - 1 negatives 0.
    batch, tau = 4, 0.2
    eye = torch.eye(batch, dtype=torch.float64)
    loss = MocoV3Loss(tau)(output([eye, eye], [eye, eye]), {})
    one_pair = 2 * tau * math.log(1 + (batch - 1) * math.exp(-1 / tau))
    assert float(loss) == pytest.approx(2 * one_pair, rel=1e-12)


def test_gradcheck_in_float64() -> None:
    q1, q2, k1, k2 = tensors(4, rows=5, cols=3, seed=4)
    loss = MocoV3Loss(0.3)
    keys = [k1.detach(), k2.detach()]
    assert torch.autograd.gradcheck(lambda a, b: loss(output([a, b], keys), {}), (q1, q2))


def test_missing_keys_or_predictions_are_errors_that_say_what_writes_them() -> None:
    views = tensors(2)
    with pytest.raises(KeyError, match="momentum_teacher"):
        MocoV3Loss()({"predictions": views}, {})
    with pytest.raises(KeyError, match="model.predictor.dims"):
        MocoV3Loss()({"embeddings": views, "teacher_embeddings": views}, {})
    with pytest.raises(ValueError, match="at least 2 views"):
        MocoV3Loss()(output(views[:1], views[:1]), {})
    with pytest.raises(ValueError, match="temperature"):
        MocoV3Loss(0.0)


def moco_v3_config(**section: float) -> dict:
    return {
        "loss": {"name": "moco_v3", "moco_v3": section},
        "model": {"predictor": {"dims": [64, 32, 64]}},
    }


def test_built_from_the_section_with_its_momentum_teacher() -> None:
    cfg = validate_config(moco_v3_config(temperature=0.5, momentum=0.9, final_momentum=0.999))
    loss = build_loss(cfg)
    assert isinstance(loss, MocoV3Loss) and loss.temperature == 0.5
    hooks = method_hooks(cfg)
    assert [hook.name for hook in hooks] == ["momentum_teacher"]
    teacher = hooks[0]
    assert isinstance(teacher, MomentumTeacherHook)
    assert (teacher.momentum, teacher.final_momentum, teacher.shuffle_bn) == (0.9, 0.999, False)
    assert validate_config(moco_v3_config()).loss.moco_v3.temperature == 0.2


def test_a_config_without_a_predictor_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"moco_v3 needs a predictor: set model.predictor.dims"):
        validate_config({"loss": {"name": "moco_v3"}})


def test_a_bad_temperature_or_key_is_rejected_naming_its_path() -> None:
    with pytest.raises(ValueError, match=r"loss\.moco_v3\.temperature"):
        validate_config(moco_v3_config(temperature=0))
    with pytest.raises(ValueError, match=r"loss\.moco_v3\.queue_size"):
        validate_config(moco_v3_config(queue_size=10))


def global_batch() -> dict[str, list[torch.Tensor]]:
    """Predictions and momentum keys of a global batch, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    views = [torch.randn(GLOBAL_BATCH, DIM, generator=generator) for _ in range(4)]
    return output(views[:2], views[2:])


# Each rank's queries see the keys of the whole batch, with the positive at the rank's
# offset; the loss of the global batch is the mean of the shards'.
SHARDED = ShardedLoss(lambda out: MocoV3Loss()(out, {}), global_batch, ("predictions",))


@on_two_ranks
def moco_v3_on_each_rank() -> dict:
    return SHARDED.on_rank()


def test_two_gloo_ranks_equal_one_process_on_the_whole_batch() -> None:
    SHARDED.assert_ranks_match_one_process(two_rank_results(moco_v3_on_each_rank))


def test_the_digits_recipe_trains_an_epoch_on_the_tiny_data_set(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "moco_v3_digits",
        tmp_path / "run",
        "model.backbone.width=4",
        "model.head.dims=[16, 32, 16]",
        "model.predictor.dims=[16, 32, 16]",
    )
    assert cfg.loss.name == "moco_v3"
    train_tiny(cfg)


def tiny_vit_config(freeze: bool) -> dict:
    return {
        "data": {"image_size": 8},
        "model": {
            "backbone": {
                "name": "vit_tiny",
                "vit": {
                    "patch_size": 4,
                    "width": 8,
                    "depth": 1,
                    "heads": 2,
                    "mlp_dim": 8,
                    "freeze_patch_embedding": freeze,
                },
            },
            "head": {"dims": [8, 8, 4]},
        },
    }


def test_a_frozen_patch_embedding_keeps_its_random_init_through_a_step() -> None:
    torch.manual_seed(0)
    model = build_model(validate_config(tiny_vit_config(freeze=True)))
    optimizer = build_optimizer(validate_config(tiny_vit_config(freeze=True)), model)
    patch = model.backbone.conv_proj
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert not any(p.requires_grad or id(p) in optimized for p in patch.parameters())
    views = [torch.randn(4, 1, 8, 8) for _ in range(2)]
    torch.cat(model({"views": views})["embeddings"]).square().mean().backward()
    optimizer.step()
    after = dict(model.named_parameters())
    assert patch.weight.grad is None
    assert torch.equal(after["backbone.conv_proj.weight"], before["backbone.conv_proj.weight"])
    assert not torch.equal(after["backbone.class_token"], before["backbone.class_token"])
    unfrozen = build_model(validate_config(tiny_vit_config(freeze=False)))
    assert all(p.requires_grad for p in unfrozen.backbone.conv_proj.parameters())


def test_the_vit_s16_recipe_trains_a_step_on_small_generated_images(tmp_path: Path) -> None:
    from tests.runner.test_recipes import small_folder

    cfg = load_config(
        CONFIGS / "moco_v3_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={small_folder(tmp_path, per_class=1)}",
            "data.folder.test_dir=null",
            "data.image_size=32",  # a 2x2 grid of the real 16x16 patches
            "data.batch_size=2",
            "data.num_workers=0",
            "data.pin_memory=false",
            # Narrow heads for speed; the backbone is the real ViT-S/16.
            "model.head.dims=[384,64,32]",
            "model.predictor.dims=[32,64,32]",
            "model.amp.enabled=false",
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    assert cfg.model.backbone.name == "vit_s16"
    assert cfg.model.backbone.vit.freeze_patch_embedding
    assert cfg.optimizer.lr == pytest.approx(1.5e-4 * 4096 / 256)
    state = SSLTrainer(cfg, hooks=method_hooks(cfg)).train()
    assert state.iteration == 1
    assert bool(state.loss.isfinite())
    backbone = state.base_model.backbone
    assert not backbone.conv_proj.weight.requires_grad
    # MoCo v3's ViT-S: 12 heads, the fixed sine-cosine table, BatchNorm ending both MLPs.
    assert backbone.encoder.layers[0].num_heads == 12
    assert not backbone.encoder.pos_embedding.requires_grad
    for mlp in (state.base_model.head, state.base_model.predictor):
        assert isinstance(mlp.layers[-1], torch.nn.BatchNorm1d) and not mlp.layers[-1].affine
