"""The ``hookbus`` command line: train, validate and inspect YAML recipes; plot runs.

Wherever a command takes a RECIPE, it is a YAML file's path or a shipped recipe's name
(``hookbus recipes`` lists them; a file at the path wins).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import TYPE_CHECKING

from hookbus.config import load_config
from hookbus.console import console, guarded_stdout
from hookbus.engine.errors import (
    INTERRUPTED_EXIT_STATUS,
    PREEMPTED_EXIT_STATUS,
    CollectiveFailure,
    ConfigError,
    InputChangedError,
    InterruptedRun,
    MachineFailure,
    PreemptedError,
    UserError,
    WriteFailure,
)
from hookbus.engine.process.launch_env import launch_environment
from hookbus.launcher import launch_local
from hookbus.recipes_index import recipe_table, recipe_text, resolve_recipe
from hookbus.sbatch import SbatchRequest, check_request, default_job_name, sbatch_script

if TYPE_CHECKING:
    from hookbus.compose import Composed

EXIT_STATUS = """exit status: 0 done (or already complete), 1 crash or a file that could not
be written (a full disk: the checkpoints are intact, run again to resume), 2 user error
(bad config, override, environment variable, file or checkpoint), 75 preempted by
SIGTERM/SIGUSR1 (a checkpoint was written: run the same command again to resume), 130
stopped by Ctrl-C (the same: a checkpoint at the next step, a second Ctrl-C at once), 141
standard output closed early (| head)
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "recipes": (
        "list the shipped recipes (name, method, backbone, data), or print one to copy",
        """\
  hookbus recipes                                  # one line per recipe
  hookbus recipes --show simclr_digits > my_recipe.yaml   # copy one, edit, train it
""",
    ),
    "models": (
        "list the backbones a run can name: hookbus's own, torchvision's, timm's (with a "
        "pattern; --pretrained: timm's weights tags)",
        """\
  hookbus models                                   # every name, by library
  hookbus models '*dinov2*' --pretrained           # timm's DINOv2 weights, timm:NAME.TAG
""",
    ),
    "train": (
        "train a method on a model over a folder (composed defaults), or from a YAML recipe "
        "(a path or a shipped recipe's name); resumes from the newest checkpoint",
        """\
  hookbus train --method dino --model vit_tiny --data photos/ --out runs/dino_photos
  hookbus train --method simclr --data photos/ --out runs/x --show > mine.yaml  # to edit
  hookbus train --method byol --data digits optimizer.num_epochs=20
  hookbus train simclr_digits                      # a shipped recipe, by name
  hookbus train configs/simclr_digits.yaml         # a YAML file
  hookbus train configs/simclr_digits.yaml optimizer.num_epochs=2 checkpoint.dir=runs/try
  hookbus train configs/simclr_digits.yaml -q      # warnings and the final summary only
  torchrun --standalone --nproc_per_node=2 -m hookbus train configs/simclr_digits.yaml
""",
    ),
    "sbatch": (
        "print a SLURM batch script that trains a recipe on N nodes, one task per GPU (or "
        "CPU tasks), and requeues itself when preempted (exit status 75)",
        """\
  hookbus sbatch --nodes 2 --gpus-per-node 8 --time 24:00:00 simclr_digits \\
      checkpoint.dir=/shared/runs/simclr > simclr.sbatch
  sbatch simclr.sbatch
""",
    ),
    "validate": (
        "check a recipe and its overrides: build data and model, train nothing",
        """\
  hookbus validate configs/simclr_digits.yaml
  hookbus validate configs/simclr_digits.yaml optimizer.lr=0.3 data.batch_size=128
""",
    ),
    "hooks": (
        "print the hook plan: each event's handlers in order, with priorities",
        """\
  hookbus hooks configs/simclr_digits.yaml
  hookbus hooks configs/simclr_digits.yaml hooks.tensorboard.enabled=false
""",
    ),
    "schema": (
        "print the config's JSON Schema, for editors that complete and check recipes",
        """\
  hookbus schema > hookbus.schema.json
  # then, as the first line of a recipe, for the YAML language server:
  # yaml-language-server: $schema=../hookbus.schema.json
""",
    ),
    "export": (
        "write a checkpoint's backbone as a plain state dict (torchvision / small CNN)",
        """\
  hookbus export runs/moco_digits backbone.pth       # a run directory: its newest checkpoint
  hookbus export runs/moco_digits/checkpoint.torch backbone.pth
  hookbus export runs/byol_r50/checkpoint.torch resnet50.pth   # resnet50().load_state_dict
""",
    ),
    "embed": (
        "write the embeddings of a folder (or files) of images by a trained encoder, with "
        "their paths (torch, NumPy or CSV)",
        """\
  hookbus embed runs/simclr_photos photos/ --out photos.pt      # a run's newest checkpoint
  hookbus embed backbone.pth photos/ --recipe runs/simclr_photos/config.yaml --out photos.npz
  hookbus embed runs/simclr_photos/checkpoint.torch a.jpg b.jpg --out two.csv --device cpu
""",
    ),
    "shard": (
        "write an image folder as MDS shards (labels and class names kept) for "
        "data.name: shards (the optional extra: pip install 'hookbus[shards]')",
        """\
  hookbus shard photos/train shards/train          # then data.shards.path=shards/train
  hookbus shard photos/train shards/train --shard-bytes 134217728
""",
    ),
    "eval": (
        "evaluate a trained encoder on labelled images: kNN, a linear probe, low-shot "
        "probes, retrieval (and pictures); the features are cached",
        """\
  hookbus eval runs/simclr_digits                  # the run's own data; writes eval.json
  hookbus eval runs/simclr_photos data/photos --pictures   # a folder of train/ and test/
  hookbus eval backbone.pth data/photos --recipe runs/simclr_photos/config.yaml --out ev
  torchrun --standalone --nproc_per_node=2 -m hookbus eval runs/simclr_digits
""",
    ),
    "report": (
        "write a run's report: one self-contained HTML page (config, curves, evaluation, pictures)",
        """\
  hookbus report runs/simclr_digits                # writes runs/simclr_digits/report.html
  hookbus report runs/simclr_digits -o /tmp/simclr.html
""",
    ),
    "plot": (
        "redraw a run's curves (loss, learning rate, meters) from its run directory",
        """\
  hookbus plot runs/simclr_digits                  # writes runs/simclr_digits/curves.png
  hookbus plot runs/simclr_digits -o /tmp/curves.png
""",
    ),
}
"""``{command: (summary, example lines)}`` for ``--help``."""

EXIT_USER_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hookbus`` command."""
    parser = argparse.ArgumentParser(
        prog="hookbus",
        description="Self-supervised training of image encoders on an event-driven hook bus.",
        epilog="examples:\n"
        + "".join(examples for _, examples in COMMANDS.values())
        + "\n"
        + EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hookbus {version('hookbus')}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, examples) in COMMANDS.items():
        command = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog="examples:\n" + examples + ("\n" + EXIT_STATUS if name == "train" else ""),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "plot":
            command.add_argument("run_dir", metavar="RUN_DIR", help="a run directory")
            command.add_argument(
                "-o", "--output", help="where to write the PNG (default: RUN_DIR/curves.png)"
            )
        elif name == "export":
            command.add_argument(
                "checkpoint", help="a hookbus checkpoint, or a run directory (its newest)"
            )
            command.add_argument("out", help="where to write the state dict (.pth)")
        elif name == "embed":
            _embed_arguments(command)
        elif name == "eval":
            _eval_arguments(command)
        elif name == "report":
            command.add_argument("run_dir", metavar="RUN_DIR", help="a run directory")
            command.add_argument(
                "-o", "--output", help="where to write the page (default: RUN_DIR/report.html)"
            )
        elif name == "shard":
            command.add_argument("folder", metavar="FOLDER", help="a folder of class folders")
            command.add_argument("out", metavar="OUT", help="a new or empty folder")
            command.add_argument(
                "--shard-bytes",
                type=int,
                default=64 << 20,
                help="most bytes a shard holds (64 MiB)",
            )
        elif name == "sbatch":
            _sbatch_arguments(command)
        elif name == "models":
            command.add_argument(
                "pattern", nargs="?", metavar="PATTERN", help="names matching it ('*dinov2*')"
            )
            command.add_argument(
                "--pretrained", action="store_true", help="timm's pretrained weights only"
            )
        elif name == "recipes":
            command.add_argument(
                "--show", metavar="NAME", help="print the recipe NAME's YAML, exactly as shipped"
            )
        elif name != "schema":
            composes = name in COMPOSING
            command.add_argument(
                "config",
                metavar="RECIPE",
                nargs="?" if composes else None,
                help="a YAML recipe's path, or a shipped recipe's name (hookbus recipes)"
                + (", or a short YAML of method, model, data and out" if composes else ""),
            )
            command.add_argument(
                "overrides",
                nargs="*",
                metavar="KEY=VALUE",
                help="dotted overrides, e.g. optimizer.lr=0.3",
            )
        if name in COMPOSING:
            _composition_arguments(command, show=name == "train")
        command.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    return parser


COMPOSING = ("train", "validate", "hooks")
"""The commands that compose a config from --method, --model and --data."""


def _composition_arguments(command: argparse.ArgumentParser, *, show: bool) -> None:
    """``--method``, ``--model``, ``--data``, ``--out`` (and ``--show``): a composed run
    (:mod:`hookbus.compose`) in place of a recipe."""
    group = command.add_argument_group(
        "a composed run (in place of RECIPE; KEY=VALUE overrides go on top)"
    )
    group.add_argument(
        "--method", help="the SSL method: simclr, moco, byol, swav, dino, dinov2, mae, ..."
    )
    group.add_argument(
        "--model",
        help="the backbone: resnet18, vit_tiny, small_cnn, tv:NAME, timm:NAME (default: "
        "resnet18; small_cnn for digits)",
    )
    group.add_argument(
        "--data", help="a folder of images (read recursively, without labels), or digits"
    )
    group.add_argument(
        "--out", help="the run directory (checkpoint.dir; default runs/METHOD_MODEL_DATA)"
    )
    if show:
        group.add_argument(
            "--show",
            action="store_true",
            help="print the composed config (a recipe to edit) and train nothing",
        )


def _sbatch_arguments(command: argparse.ArgumentParser) -> None:
    """The arguments of ``hookbus sbatch``."""
    command.add_argument("config", metavar="RECIPE", help="a YAML recipe's path, or a name")
    command.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="dotted overrides for the run"
    )
    command.add_argument("--nodes", type=int, required=True, help="nodes of the job")
    command.add_argument(
        "--gpus-per-node",
        type=int,
        required=True,
        help="GPUs per node (one task each); 0 for CPU nodes",
    )
    command.add_argument(
        "--tasks-per-node",
        type=int,
        help="tasks per node (default: one per GPU; 1 on CPU nodes)",
    )
    command.add_argument("--time", required=True, help="the time limit, HH:MM:SS or DAYS-HH:MM:SS")
    command.add_argument("--job-name", help="default: the recipe's file name without .yaml")
    command.add_argument("--partition", help="the SLURM partition (default: the cluster's)")
    command.add_argument(
        "--port",
        type=int,
        help="where the tasks meet on the first node (default: a port from the job's id)",
    )
    command.add_argument(
        "--signal-seconds",
        type=int,
        default=120,
        help="seconds before the time limit that SLURM sends SIGUSR1 (120)",
    )


def _embed_arguments(command: argparse.ArgumentParser) -> None:
    """The arguments of ``hookbus embed``."""
    command.add_argument(
        "source", metavar="SOURCE", help="a checkpoint, a run directory or a hookbus export file"
    )
    command.add_argument(
        "images", nargs="+", metavar="IMAGES", help="image files, or folders (read recursively)"
    )
    command.add_argument("-o", "--out", required=True, help="the file to write (.pt, .npz or .csv)")
    command.add_argument(
        "--recipe",
        help="for an exported backbone: the recipe of its run (the run's config.yaml)",
    )
    command.add_argument(
        "--format", choices=("pt", "npz", "csv"), help="default: from the --out file's ending"
    )
    command.add_argument("--batch-size", type=int, default=64, help="images per batch (64)")
    command.add_argument(
        "--image-size", type=int, help="side of the center crop (default: the run's)"
    )
    command.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: CUDA if present"
    )
    command.add_argument(
        "--num-workers", type=int, help="DataLoader workers (default: the cores but one, <= 8)"
    )
    command.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    command.add_argument(
        "--skip-unreadable",
        action="store_true",
        help="leave out the images that cannot be read (listed on stderr) instead of refusing",
    )


def _eval_arguments(command: argparse.ArgumentParser) -> None:
    """The arguments of ``hookbus eval``."""
    command.add_argument(
        "source", metavar="SOURCE", help="a checkpoint, a run directory or a hookbus export file"
    )
    command.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="a folder holding train/ and test/ class folders, or digits (default: the "
        "run's own train and test data)",
    )
    command.add_argument(
        "--recipe", help="for an exported backbone: the recipe of its run (the run's config.yaml)"
    )
    command.add_argument(
        "--out",
        help="the folder to write eval.json, the cache and the pictures into "
        "(default: the run directory)",
    )
    command.add_argument(
        "--k", type=int, nargs="+", default=[10, 20, 200], help="kNN's k (10 20 200)"
    )
    command.add_argument(
        "--temperature", type=float, default=0.07, help="kNN's vote temperature (0.07)"
    )
    command.add_argument("--no-knn", action="store_true", help="skip the kNN classifiers")
    command.add_argument("--no-linear", action="store_true", help="skip the linear probe")
    command.add_argument(
        "--low-shot",
        type=float,
        nargs="+",
        default=[0.01, 0.1],
        metavar="FRACTION",
        help="fractions of the train labels for the low-shot probes (0.01 0.1)",
    )
    command.add_argument("--draws", type=int, default=5, help="draws of each low-shot split (5)")
    command.add_argument("--no-low-shot", action="store_true", help="skip the low-shot probes")
    command.add_argument(
        "--recall-at", type=int, nargs="+", default=[1, 5, 10], help="retrieval's recall@k (1 5 10)"
    )
    command.add_argument("--no-retrieval", action="store_true", help="skip retrieval")
    command.add_argument(
        "--last-blocks",
        type=int,
        default=4,
        help="ViTs: also the class tokens of the last N blocks, concatenated (4; 0: off)",
    )
    command.add_argument("--seed", type=int, default=0, help="held-out part, draws, probes (0)")
    command.add_argument(
        "--pictures", action="store_true", help="draw the pictures (t-SNE map, neighbours, ...)"
    )
    command.add_argument("--batch-size", type=int, default=128, help="images per batch (128)")
    command.add_argument(
        "--num-workers", type=int, help="DataLoader workers (default: the cores but one, <= 8)"
    )
    command.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: CUDA if present"
    )


EXIT_CLOSED_PIPE = 141
"""Exit status when standard output is a pipe closed early (``hookbus recipes | head``):
nothing more is printed, and the status is 128 + SIGPIPE, as a shell reports a tool
that the closed pipe stopped."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hookbus`` console script; returns the exit status.

    Standard output is written like a file (:func:`hookbus.console.guarded_stdout`): a
    full device is one line and exit status 1, a closed pipe ends quietly.
    """
    try:
        with guarded_stdout() as stdout:
            return _main(argv)
    except WriteFailure as exc:  # standard output failed at its last flush
        print(f"hookbus: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        if not stdout.failed:
            raise
        return EXIT_CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    with console(args.quiet):
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    try:
        if args.command == "recipes":
            return _recipes(args)
        if args.command == "sbatch":
            return _sbatch(args)
        if args.command == "models":
            from hookbus.models_list import model_lines

            print("\n".join(model_lines(args.pattern, pretrained=args.pretrained)))
            return 0
        _composition_or_recipe(args)
        if getattr(args, "config", None) is not None:
            args.config = resolve_recipe(args.config)
        composed, nproc = _command_config(args)
        if nproc > 1:
            forwarded = ["train", *_train_source(args), *args.overrides]
            return launch_local([*forwarded, *(["-q"] if args.quiet else [])], nproc)
        # Loaded here, not at the top: it imports torch, ignite and the trainer (about
        # 5 s on 2 cores), which --help, a bad argument and the launcher's parent never need.
        from hookbus.commands import run

        return run(args, composed)
    except UserError as exc:
        print(f"hookbus {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (
        WriteFailure,
        CollectiveFailure,
        MachineFailure,
        InputChangedError,
        FloatingPointError,
    ) as exc:
        print(f"hookbus {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except InterruptedRun as exc:
        print(f"hookbus {args.command}: interrupted: {exc}", file=sys.stderr)
        return INTERRUPTED_EXIT_STATUS
    except PreemptedError as exc:
        print(f"hookbus {args.command}: preempted: {exc}", file=sys.stderr)
        return PREEMPTED_EXIT_STATUS
    except KeyboardInterrupt:
        print(f"hookbus {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_STATUS


def _recipes(args: argparse.Namespace) -> int:
    """``hookbus recipes``: list the shipped recipes, or print one (``--show NAME``)."""
    if args.show is not None:
        sys.stdout.write(recipe_text(args.show))
    else:
        print("\n".join(recipe_table()))
    return 0


def _sbatch(args: argparse.Namespace) -> int:
    """``hookbus sbatch``: check the options, the recipe and its overrides, print the
    batch script."""
    request = SbatchRequest(
        recipe=args.config,
        overrides=tuple(args.overrides),
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        time=args.time,
        job_name=args.job_name or default_job_name(args.config),
        port=args.port,
        signal_seconds=args.signal_seconds,
        partition=args.partition,
        tasks_per_node=args.tasks_per_node,
    )
    check_request(request)
    load_config(resolve_recipe(args.config), args.overrides)
    sys.stdout.write(sbatch_script(request))
    return 0


def _command_config(args: argparse.Namespace) -> tuple[Composed | None, int]:
    """A composing command's config (``train``, ``validate``, ``hooks``; None for the
    others), read and checked once here for the whole command, and the processes to
    launch: for ``train`` outside a launched rank, ``distributed.nproc_per_node``; else
    1. For ``train``, the launch environment variables are checked first (one line
    naming a malformed one, exit status 2)."""
    if args.command not in COMPOSING:
        return None, 1
    alone = args.command != "train" or launch_environment().launched or args.show
    from hookbus.compose import run_config

    composed = run_config(args)
    return composed, 1 if alone else composed.config.distributed.nproc_per_node


def _composition_or_recipe(args: argparse.Namespace) -> None:
    """Check that a composing command got a RECIPE or ``--method``, not both; a first
    override taken for the RECIPE (``--method dino optimizer.lr=0.1``) goes back to the
    overrides; ``--out`` alone moves a recipe's run directory (``checkpoint.dir``)."""
    if args.command not in COMPOSING:
        return
    if args.method is None:
        if args.model is not None or args.data is not None:
            raise ConfigError(
                f"hookbus {args.command}: --model and --data compose a run with --method "
                "(--method simclr, say), or name a RECIPE"
            )
        if args.config is None:
            raise ConfigError(
                f"hookbus {args.command}: name a RECIPE (hookbus recipes lists them), or "
                "compose one: --method M --model X --data DIR"
            )
        if args.out is not None:
            args.overrides.append(f"checkpoint.dir={args.out}")
        return
    if args.config is not None:
        if "=" not in args.config:
            raise ConfigError(
                f"hookbus {args.command}: give a RECIPE ({args.config}) or --method "
                f"{args.method}, not both"
            )
        args.overrides.insert(0, args.config)
        args.config = None


def _train_source(args: argparse.Namespace) -> list[str]:
    """The arguments that name what ``train`` trains: the RECIPE, or the composition."""
    if args.config is not None:
        return [args.config]
    chosen = [("--method", args.method), ("--model", args.model), ("--data", args.data)]
    chosen.append(("--out", args.out))
    return [part for flag, value in chosen if value is not None for part in (flag, value)]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
