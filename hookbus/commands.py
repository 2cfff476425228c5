"""The ``hookbus`` commands' work: training, validation, the hook plan, the schema, plots
and exports. :mod:`hookbus.cli` parses the command line and imports this module only
when a command runs in this process (not for ``--help``, a bad argument or the local
launcher's parent process), because it loads torch, torchvision and the whole trainer.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from hookbus.compose import Composed
from hookbus.embed_output import check_output, output_format
from hookbus.engine.bus.handler_order import handler_priorities
from hookbus.engine.bus.priorities import priority_label
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.checkpoint.run_curves import (
    CURVES_FILE,
    METRICS_FILE,
    PLOT_FILE,
    build_figure,
    read_curves,
    save_png,
)
from hookbus.engine.errors import CheckpointError, CollectiveFailure
from hookbus.engine.process import distributed
from hookbus.engine.process.distributed import collective_failure
from hookbus.export import export_backbone
from hookbus.output_paths import check_destination
from hookbus.parts.task import prepare_task
from hookbus.reference.json_schema import config_json_schema
from hookbus.report import write_report
from hookbus.run_summary import RunSummary
from hookbus.trainer import SSLTrainer

logger = logging.getLogger("hookbus")


def run(args: argparse.Namespace, composed: Composed | None) -> int:
    """Run ``args.command``; returns the exit status. A composing command runs on
    ``composed``, its config as :mod:`hookbus.cli` read it (None for the other commands).
    A collective that failed because another rank died or hung becomes
    :class:`CollectiveFailure` (one line, exit 1)."""
    try:
        if composed is None:
            return _COMMANDS[args.command](args)
        return _COMPOSING[args.command](args, composed)
    except RuntimeError as exc:
        failure = collective_failure(exc)
        if failure is None:
            raise
        raise CollectiveFailure(failure) from exc


def _train(args: argparse.Namespace, composed: Composed) -> int:
    if args.show:
        sys.stdout.write(composed.yaml())
        return 0
    for note in composed.notes:
        logger.info("%s", note)
    trainer = SSLTrainer(composed.config)
    summary = RunSummary().attach(trainer.engine)
    state = trainer.train()
    if state.rank == 0:
        print("\n".join(summary.lines(state)))
    return 0


def _validate(args: argparse.Namespace, composed: Composed) -> int:
    for note in composed.notes:
        logger.info("%s", note)
    cfg = composed.config
    trainer = SSLTrainer(cfg)
    prepare_task(trainer.state, cfg)
    print(f"{args.config or composed.command.removeprefix('composed by hookbus: ')}: valid")
    return 0


def _hooks(args: argparse.Namespace, composed: Composed) -> int:
    trainer = SSLTrainer(composed.config)
    for event, handlers in handler_priorities(trainer.engine).items():
        listed = ", ".join(f"{name} ({priority_label(level)})" for name, level in handlers) or "-"
        print(f"{event:<18} {listed}")
    stateful = [hook.name for hook in trainer.hooks if hook.has_state()]
    print(
        f"\n{len(trainer.hooks)} hooks; lower priorities run first; "
        f"checkpoints carry the state of: {', '.join(stateful) or 'none'}"
    )
    return 0


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(config_json_schema(), indent=2))
    return 0


def _plot(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    output = Path(args.output) if args.output else run_dir / PLOT_FILE
    inputs = [run_dir / CURVES_FILE, run_dir / METRICS_FILE]
    check_destination(output, inputs, allowed=[run_dir / PLOT_FILE])
    save_png(build_figure(read_curves(run_dir), str(run_dir)), output)
    print(f"wrote {output}")
    return 0


def _export(args: argparse.Namespace) -> int:
    weights = export_backbone(run_checkpoint(Path(args.checkpoint)), Path(args.out))
    print(f"wrote {args.out}: {len(weights)} tensors of the backbone")
    return 0


def _embed(args: argparse.Namespace) -> int:
    # Loaded here, not at the top: it imports torchvision's transforms (about a second),
    # which the other commands of a run on tensors never need.
    from hookbus.embed import embed_images, find_images, save_embeddings

    out = Path(args.out)
    output_format(out, args.format)
    found = find_images(args.images, skip_unreadable=args.skip_unreadable)
    check_output(
        out, Path(args.source), inputs=found.inputs, files=found.files, overwrite=args.overwrite
    )
    result = embed_images(
        args.source,
        found,
        recipe=args.recipe,
        batch_size=args.batch_size,
        image_size=args.image_size,
        device=args.device,
        num_workers=args.num_workers,
        progress=not args.quiet,
        skip_unreadable=args.skip_unreadable,
    )
    save_embeddings(result, out, format=args.format, overwrite=args.overwrite)
    count, dims = result.embeddings.shape
    skipped = len(result.skipped)
    if skipped:
        print(
            f"hookbus embed: skipped {skipped} of {count + skipped} images that could not "
            "be used (--skip-unreadable):",
            file=sys.stderr,
        )
        for entry in result.skipped:
            print(f"  {entry.reason}", file=sys.stderr)
    left_out = f", {skipped} skipped (listed on stderr)" if skipped else ""
    print(
        f"wrote {out}: {count} embeddings of {dims} dimensions from {result.source}{left_out}; "
        f"{result.images_per_second:.0f} images/s on {result.device} ({result.seconds:.1f} s)"
    )
    return 0


def _eval(args: argparse.Namespace) -> int:
    # Loaded here, not at the top: it imports the ViT backbones, which load torchvision
    # (about a second), which the other commands of a run on tensors never need.
    from hookbus.eval import EvalSettings, evaluate

    settings = EvalSettings(
        knn_k=() if args.no_knn else tuple(args.k),
        knn_temperature=args.temperature,
        linear=not args.no_linear,
        low_shot=() if args.no_low_shot else tuple(args.low_shot),
        low_shot_draws=args.draws,
        retrieval_k=() if args.no_retrieval else tuple(args.recall_at),
        last_blocks=args.last_blocks,
        seed=args.seed,
    )
    result = evaluate(
        args.source,
        args.data,
        recipe=args.recipe,
        out=args.out,
        settings=settings,
        pictures=args.pictures,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        device=args.device,
        progress=not args.quiet,
    )
    if distributed.rank() == 0:
        print(result.table())
        print(f"wrote {result.path}")
    return 0


def _report(args: argparse.Namespace) -> int:
    print(f"wrote {write_report(args.run_dir, args.output)}")
    return 0


def _shard(args: argparse.Namespace) -> int:
    # Loaded here, not at the top: it needs the streaming library (the optional extra
    # shards), which the other commands never do.
    from hookbus.parts.data.datasets import require_streaming

    require_streaming("hookbus shard")
    from hookbus.shard import write_shards

    written = write_shards(Path(args.folder), Path(args.out), args.shard_bytes)
    classes = f"{len(written.classes)} classes" if written.classes else "no classes"
    print(f"wrote {args.out}: {written.images} images ({classes}) in {written.shards} shards")
    return 0


def run_checkpoint(source: Path) -> Path:
    """``source``, or for a run directory its newest valid checkpoint (as ``hookbus
    embed`` and ``hookbus eval`` read a run directory); CheckpointError when it has none."""
    if not source.is_dir():
        return source
    found = newest_valid_checkpoint(source, hint="")
    if found is None:
        raise CheckpointError(
            f"no checkpoint in {source} (a run directory holds phase*.torch; give a run "
            "directory or a checkpoint)"
        )
    return found[0]


_COMPOSING = {"train": _train, "validate": _validate, "hooks": _hooks}
"""The commands of a composed or recipe config, which :mod:`hookbus.cli` reads once."""

_COMMANDS = {
    "schema": _schema,
    "plot": _plot,
    "export": _export,
    "embed": _embed,
    "shard": _shard,
    "eval": _eval,
    "report": _report,
}
