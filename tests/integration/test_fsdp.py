"""Sharded models (``distributed.strategy: fsdp``, PyTorch's FSDP2) on two gloo ranks.

The runs (tests/integration/fsdp_job.py: BYOL, whose momentum teacher is updated shard by shard, on
the tiny data set, 3 steps an epoch on two ranks, 6 in one process) are made once for the
module: two torchrun launches and one run in this process.

Tolerances: FSDP against DDP, parameters within 1e-6 (absolute) after 2 epochs (the
gradients are reduced by a reduce-scatter instead of an all-reduce); everything else,
resume on the same or another number of ranks and export, bit-exact.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, list_checkpoints
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint, shards_folder
from hookbus.engine.errors import CheckpointError, ConfigError
from hookbus.export import export_backbone
from hookbus.parts.models.pretrained import read_backbone_weights
from hookbus.parts.sharding import check_strategy
from tests.integration.fsdp_job import SMALL
from tests.tiny_data import tiny_recipe
from tests.torchrun import torchrun

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
BF16 = "model.amp.enabled=true"
RESUME_STOPPED = "trainer.resume_stopped=true"


def _launch(*runs: dict) -> None:
    torchrun(
        "-m",
        "tests.integration.fsdp_job",
        json.dumps([{**run, "dir": str(run["dir"])} for run in runs]),
    )


EXTEND = "checkpoint.change_finished=true"
"""Going on from a finished run for more epochs: a change the tests ask for."""


def _config(run_dir: Path, epochs: int, *overrides: str):
    return tiny_recipe(
        "byol_digits",
        run_dir,
        *SMALL,
        f"optimizer.num_epochs={epochs}",
        "distributed.strategy=fsdp",
        *overrides,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ddp``, ``fsdp``: 2 epochs on two ranks (``*.pt``: the whole final weights);
    ``split``: 2 epochs, stopped after the 1st, then on to the 2nd in a second run;
    ``bf16``: 1 epoch under bf16 autocast; ``moved``: 1 epoch on two ranks, the 2nd in
    one process, the 3rd on two ranks again (``moved_start.pt``: the whole state the 3rd
    epoch resumed); ``vit``: DINO's ViT, 1 epoch in bf16 with activation checkpointing."""
    root = tmp_path_factory.mktemp("fsdp")
    _launch(
        {"dir": root / "ddp", "epochs": 2, "strategy": "ddp", "weights": str(root / "ddp.pt")},
        {"dir": root / "fsdp", "epochs": 2, "strategy": "fsdp", "weights": str(root / "fsdp.pt")},
        {"dir": root / "split", "epochs": 2, "strategy": "fsdp", "stop_after": 1},
        {"dir": root / "split", "epochs": 2, "strategy": "fsdp", "overrides": [RESUME_STOPPED]}
        | {"weights": str(root / "split.pt")},
        {
            "dir": root / "bf16",
            "epochs": 1,
            "strategy": "fsdp",
            "overrides": ["model.amp.enabled=true"],
        },
        {"dir": root / "moved", "epochs": 1, "strategy": "fsdp"},
        {"dir": root / "vit", "epochs": 1, "strategy": "fsdp", "recipe": "dino_digits_vit_tiny"},
    )
    _copy(root / "moved", root / "moved_at_1")
    SSLTrainer(_config(root / "moved", 2, EXTEND)).train()
    _copy(root / "moved", root / "moved_at_2")
    _launch(
        {
            "dir": root / "moved",
            "epochs": 3,
            "strategy": "fsdp",
            "start": str(root / "moved_start.pt"),
            "overrides": [EXTEND],
        }
    )
    return root


def _copy(source: Path, destination: Path) -> Path:
    """A copy of a run directory, its link to the newest checkpoint kept a link."""
    return Path(shutil.copytree(source, destination, symlinks=True))


def _newest(run_dir: Path) -> dict:
    return load_whole_checkpoint(run_dir / POINTER_NAME)


def _load(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def test_two_fsdp_ranks_train_the_weights_of_two_ddp_ranks(runs: Path) -> None:
    ddp, fsdp = _load(runs / "ddp.pt"), _load(runs / "fsdp.pt")
    assert ddp.keys() == fsdp.keys()
    for key, value in ddp.items():
        assert torch.allclose(fsdp[key].float(), value.float(), rtol=0, atol=1e-6), key
    moved = [
        key for key in ddp if key.endswith(".weight") and not torch.equal(ddp[key], 0 * ddp[key])
    ]
    assert moved  # the weights are not all zero: a real comparison


def test_a_sharded_checkpoint_is_a_folder_of_one_file_per_rank_with_checksums(runs: Path) -> None:
    newest = (runs / "fsdp" / POINTER_NAME).resolve()
    folder = shards_folder(newest)
    names = sorted(entry.name for entry in folder.iterdir())
    assert names == [".metadata", "__0_0.distcp", "__1_0.distcp", "shards.sha256"]
    assert len((folder / "shards.sha256").read_text().splitlines()) == 3
    assert [path.name for path in list_checkpoints(runs / "fsdp")] == [
        "phase00000_batch0000003.torch",
        "phase00001_batch0000003.torch",
    ]


def test_a_sharded_checkpoint_holds_the_trained_model_and_teacher(runs: Path) -> None:
    saved = _newest(runs / "fsdp")
    weights = _load(runs / "fsdp.pt")
    assert saved["model"].keys() == weights.keys()
    assert all(torch.equal(saved["model"][key], value) for key, value in weights.items())
    teacher = saved["hooks"]["momentum_teacher"]["teacher"]
    assert "predictor.layers.0.weight" not in teacher
    assert not torch.equal(teacher["head.layers.0.weight"], weights["head.layers.0.weight"])


def test_resume_on_the_same_two_ranks_equals_the_run_without_a_stop(runs: Path) -> None:
    whole, split = _load(runs / "fsdp.pt"), _load(runs / "split.pt")
    assert all(torch.equal(split[key], value) for key, value in whole.items())
    assert (
        json.loads((runs / "split" / "metrics.json").read_text().splitlines()[-1])["loss"]
        == (json.loads((runs / "fsdp" / "metrics.json").read_text().splitlines()[-1])["loss"])
    )


def test_bf16_autocast_trains_with_float32_weights(runs: Path) -> None:
    saved = _newest(runs / "bf16")
    assert {value.dtype for value in saved["model"].values() if value.is_floating_point()} == {
        torch.float32
    }
    row = json.loads((runs / "bf16" / "metrics.json").read_text().splitlines()[-1])
    assert 0 < row["loss"] < 10


def test_a_vit_with_checkpointed_blocks_trains_in_bf16_with_float32_weights(runs: Path) -> None:
    saved = _newest(runs / "vit")
    blocks = [key for key in saved["model"] if ".encoder_layer_" in key]
    assert blocks and all(saved["model"][key].dtype == torch.float32 for key in blocks)
    teacher = saved["hooks"]["momentum_teacher"]["teacher"]
    assert not torch.equal(teacher[blocks[0]], saved["model"][blocks[0]])
    row = json.loads((runs / "vit" / "metrics.json").read_text().splitlines()[-1])
    assert 0 < row["loss"] < 10


def test_one_process_resumes_two_ranks_shards_bit_exactly(runs: Path) -> None:
    saved = _newest(runs / "moved_at_1")
    state = SSLTrainer(_config(runs / "moved_at_1", 2, EXTEND)).setup()
    assert state.world_size == 1
    own = state.base_model.state_dict()
    assert all(torch.equal(own[key], value) for key, value in saved["model"].items())
    for index, values in saved["optimizer"]["state"].items():
        live = state.optimizer.state_dict()["state"][index]
        assert all(torch.equal(live[name], value) for name, value in values.items())
    assert state.iteration == 6  # the 3 steps of 2 ranks count as the 6 of one process


def test_two_ranks_resume_one_process_checkpoint_bit_exactly(runs: Path) -> None:
    saved = load_whole_checkpoint(list_checkpoints(runs / "moved_at_2")[-1])
    start = _load(runs / "moved_start.pt")
    assert all(torch.equal(start["model"][key], value) for key, value in saved["model"].items())
    rows = [json.loads(line) for line in (runs / "moved" / "metrics.json").read_text().splitlines()]
    assert [(row["train_phase_idx"], row["iteration"]) for row in rows] == [(0, 3), (1, 12), (2, 9)]


def test_export_of_a_sharded_checkpoint_equals_the_trained_backbone(
    runs: Path, tmp_path: Path
) -> None:
    exported = export_backbone(runs / "fsdp" / POINTER_NAME, tmp_path / "backbone.pth")
    weights = _load(runs / "fsdp.pt")
    backbone = {
        key.removeprefix("backbone."): v
        for key, v in weights.items()
        if key.startswith("backbone.")
    }
    assert backbone.keys() == exported.keys()
    assert all(torch.equal(exported[key], value) for key, value in backbone.items())


def test_linear_evaluation_reads_the_backbone_of_a_sharded_checkpoint(runs: Path) -> None:
    read = read_backbone_weights(runs / "fsdp" / POINTER_NAME)
    weights = _load(runs / "fsdp.pt")
    assert read.keys() == {key.removeprefix("backbone.") for key in weights if "backbone." in key}
    assert all(torch.equal(value, weights[f"backbone.{key}"]) for key, value in read.items())


def _corrupt_newest_shard(run_dir: Path) -> Path:
    shard = shards_folder((run_dir / POINTER_NAME).resolve()) / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    return shard


def test_a_corrupt_shard_is_refused_by_export(runs: Path, tmp_path: Path) -> None:
    run = _copy(runs / "fsdp", tmp_path / "run")
    _corrupt_newest_shard(run)
    with pytest.raises(CheckpointError, match=r"__1_0\.distcp does not match its SHA-256: corrupt"):
        export_backbone(run / POINTER_NAME, tmp_path / "backbone.pth")
    assert not (tmp_path / "backbone.pth").exists()


def test_resume_skips_a_checkpoint_with_a_corrupt_shard(
    runs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = _copy(runs / "fsdp", tmp_path / "run")
    _corrupt_newest_shard(run)
    state = SSLTrainer(_config(run, 2)).setup()
    assert state.resumed_from.endswith("phase00000_batch0000003.torch")
    assert "__1_0.distcp does not match its SHA-256" in caplog.text


def test_a_missing_shard_leaves_no_valid_checkpoint(runs: Path, tmp_path: Path) -> None:
    run = _copy(runs / "split", tmp_path / "run")
    for path in list_checkpoints(run):
        (shards_folder(path) / "__0_0.distcp").unlink()
    with pytest.raises(CheckpointError, match="__0_0.distcp is missing"):
        SSLTrainer(_config(run, 2)).setup()


def test_a_half_written_checkpoint_is_never_the_newest_and_is_cleared(
    runs: Path, tmp_path: Path
) -> None:
    run = _copy(runs / "moved_at_2", tmp_path / "run")
    partial = run / ".phase00002_batch0000006.shards.partial"
    _copy(shards_folder(list_checkpoints(run)[-1]), partial)
    (partial / "__0_0.distcp").unlink()
    state = SSLTrainer(_config(run, 3, EXTEND)).train()
    assert state.iteration == 18
    assert not partial.exists()
    assert (run / POINTER_NAME).resolve().name == "phase00002_batch0000006.torch"


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("checkpoint.async_write=true", "checkpoint.async_write"),
        ("model.compile.enabled=true", "model.compile.enabled"),
        ("model.amp.enabled=true model.amp.dtype=fp16", "model.amp.dtype"),
    ],
)
def test_what_fsdp_cannot_take_is_refused_naming_the_key(
    tmp_path: Path, override: str, named: str
) -> None:
    cfg = _config(tmp_path / "run", 1, *override.split())
    with pytest.raises(ConfigError, match=rf"^{named}: distributed.strategy fsdp cannot take it"):
        check_strategy(cfg)
