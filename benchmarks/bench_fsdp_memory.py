"""Bytes each rank holds of the training state, 1 process vs 2 FSDP ranks.

    .venv/bin/python benchmarks/bench_fsdp_memory.py
    .venv/bin/python benchmarks/bench_fsdp_memory.py --rss    # and peak resident memory

For each model (a recipe's, built as ``hookbus train`` builds it, with AdamW), counts the
bytes of this rank's parameters, gradients, optimizer state (AdamW's two moments and
step counts) and momentum teacher: in one process (the whole model: what every DDP rank
holds), and on each of 2 gloo ranks with ``distributed.strategy: fsdp`` (started by
torchrun from this script, on the CPU). One optimizer step on zero gradients creates the
optimizer's state; nothing is trained. Prints one table, with the ratio of a rank's bytes
with 2 ranks over 1 process (0.5: perfectly sharded).

``--rss`` instead starts, for each model, 2 gloo ranks with ``distributed.strategy: ddp``
(the model wrapped in ``DistributedDataParallel``, its teacher a whole copy) and 2 with
``fsdp``, each rank doing the same step in a fresh process, and prints each rank's
training state beside its peak resident memory (``ru_maxrss``: the runtime, torch's
libraries and allocator included), with FSDP's over DDP's.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hookbus import load_config  # noqa: E402
from hookbus.parts.models import build_model  # noqa: E402
from hookbus.parts.optim import build_optimizer  # noqa: E402
from hookbus.parts.sharding import shard_model, sharded_copy  # noqa: E402

MODELS = {
    "ViT-S/16 DINO": ("dino_imagefolder_vit_s16", True),
    "ResNet-50 BYOL": ("byol_imagefolder_resnet50", True),
}
"""Name: (recipe, whether it has a momentum teacher)."""


def _bytes(tensors: list[torch.Tensor]) -> int:
    total = 0
    for tensor in tensors:
        local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
        total += local.numel() * local.element_size()
    return total


def measure(recipe: str, teacher: bool) -> dict[str, int]:
    """This rank's bytes of each part of the training state of ``recipe``'s model."""
    cfg = load_config(ROOT / "configs" / f"{recipe}.yaml", ["distributed.strategy=fsdp"])
    torch.manual_seed(0)
    model = build_model(cfg)
    sharded = dist.is_initialized() and dist.get_world_size() > 1
    if sharded:
        shard_model(model, None)
    optimizer = build_optimizer(cfg, model)
    for parameter in model.parameters():
        if parameter.requires_grad:
            parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    parts = {
        "parameters": _bytes(list(model.parameters())),
        "gradients": _bytes([p.grad for p in model.parameters() if p.grad is not None]),
        "optimizer": _bytes(state),
    }
    if teacher:
        copy = sharded_copy(model, without=["predictor"]) if sharded else None
        kept = [p for name, p in model.named_parameters() if not name.startswith("predictor.")]
        parts["teacher"] = _bytes(list(copy.parameters()) if copy is not None else kept)
    return parts


def rank_main(out: Path) -> None:
    """Under torchrun: measure every model on this rank, rank 0 writes all ranks' bytes."""
    dist.init_process_group("gloo")
    results = {name: measure(*spec) for name, spec in MODELS.items()}
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, results)
    if dist.get_rank() == 0:
        out.write_text(json.dumps(gathered))
    dist.destroy_process_group()


def rss_rank(out: Path, recipe: str, teacher: bool, strategy: str) -> None:
    """Under torchrun: ``recipe``'s training state as ``strategy`` holds it on this rank,
    after one step; rank 0 writes every rank's state bytes and peak resident bytes."""
    dist.init_process_group("gloo")
    cfg = load_config(ROOT / "configs" / f"{recipe}.yaml", [f"distributed.strategy={strategy}"])
    torch.manual_seed(0)
    model = build_model(cfg)
    if strategy == "fsdp":
        shard_model(model, None)
        twin = sharded_copy(model, without=["predictor"]) if teacher else None
    else:
        twin = copy.deepcopy(model) if teacher else None
        if twin is not None and hasattr(twin, "predictor"):
            twin.predictor = None
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = build_optimizer(cfg, model)
    for parameter in model.parameters():
        if parameter.requires_grad:
            parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    parameters = list(model.parameters())
    grads = [p.grad for p in parameters if p.grad is not None]
    held = _bytes(parameters) + _bytes(grads) + _bytes(state)
    held += _bytes(list(twin.parameters())) if twin is not None else 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (held, peak))
    if dist.get_rank() == 0:
        out.write_text(json.dumps(gathered))
    dist.destroy_process_group()


def rss_table() -> None:
    """Per model and strategy: each of 2 ranks' training state and peak resident memory."""
    print(
        "| model | strategy | training state per rank (MiB) | peak resident, rank 0 / rank 1 "
        "(MiB) | FSDP / DDP, state | FSDP / DDP, peak resident |"
    )
    print("|---|---|---|---|---|---|")
    for name, (recipe, teacher) in MODELS.items():
        found = {}
        for strategy in ("ddp", "fsdp"):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "rss.json"
                env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
                command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
                command += [
                    "--nproc_per_node=2",
                    __file__,
                    "--rss-rank",
                    str(out),
                    recipe,
                    str(teacher),
                    strategy,
                ]
                subprocess.run(command, check=True, env=env, capture_output=True)
                found[strategy] = json.loads(out.read_text())
        for strategy, ranks in found.items():
            state = max(held for held, _ in ranks)
            peaks = " / ".join(f"{peak / 2**20:.0f}" for _, peak in ranks)
            ratios = ["", ""]
            if strategy == "fsdp":
                ddp = found["ddp"]
                ratios = [
                    f"{state / max(held for held, _ in ddp):.3f}",
                    f"{max(p for _, p in ranks) / max(p for _, p in ddp):.3f}",
                ]
            print(f"| {name} | {strategy} | {state / 2**20:.1f} | {peaks} | {' | '.join(ratios)} |")


def main() -> None:
    torch.set_num_threads(1)
    single = {name: measure(*spec) for name, spec in MODELS.items()}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ranks.json"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += ["--nproc_per_node=2", __file__, "--rank", str(out)]
        subprocess.run(command, check=True, env=env, capture_output=True)
        ranks = json.loads(out.read_text())
    print("| model | part | 1 process (MiB) | rank 0 of 2 (MiB) | rank 1 of 2 (MiB) | ratio |")
    print("|---|---|---|---|---|---|")
    for name, parts in single.items():
        rows = [*parts, "total"]
        for part in rows:
            one = sum(parts.values()) if part == "total" else parts[part]
            each = [sum(r[name].values()) if part == "total" else r[name][part] for r in ranks]
            cells = " | ".join(f"{value / 2**20:.2f}" for value in (one, *each))
            print(f"| {name} | {part} | {cells} | {max(each) / one:.3f} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rank"]:
        rank_main(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["--rss-rank"]:
        rss_rank(Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "True", sys.argv[5])
    elif sys.argv[1:2] == ["--rss"]:
        rss_table()
    else:
        main()
