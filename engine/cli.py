"""The ``hookbus`` command line: train, validate and inspect YAML recipes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from engine.config_io import load_config
from engine.errors import CheckpointWriteError, UserError
from engine.preemption import PREEMPTED_EXIT_STATUS, PreemptedError

EXAMPLES = """examples:
  hookbus train configs/simclr_digits.yaml
  hookbus train configs/simclr_digits.yaml optimizer.num_epochs=2 checkpoint.dir=runs/try
  hookbus validate configs/simclr_digits.yaml optimizer.lr=0.3
  hookbus hooks configs/simclr_digits.yaml

exit status: 0 done (or already complete), 1 crash, 2 user error (bad config,
override, file or checkpoint), 75 preempted by SIGTERM/SIGUSR1 (a checkpoint was
written: run the same command again to resume)
"""

EXIT_USER_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hookbus`` command."""
    parser = argparse.ArgumentParser(
        prog="hookbus",
        description="Self-supervised training of image encoders on an event-driven hook bus.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, summary in (
        ("train", "train from a YAML recipe; resumes from the newest checkpoint"),
        ("validate", "check a recipe and its overrides: build data and model, train nothing"),
        ("hooks", "print the hook plan: each event's handlers in order, with priorities"),
    ):
        command = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_argument("config", help="path of the YAML recipe")
        command.add_argument(
            "overrides",
            nargs="*",
            metavar="KEY=VALUE",
            help="dotted overrides, e.g. optimizer.lr=0.3",
        )
        command.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hookbus`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    _setup_logging(args.quiet)
    try:
        return _COMMANDS[args.command](args)
    except UserError as exc:
        print(f"hookbus {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (CheckpointWriteError, FloatingPointError) as exc:
        print(f"hookbus {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except PreemptedError as exc:
        print(f"hookbus {args.command}: preempted: {exc}", file=sys.stderr)
        return PREEMPTED_EXIT_STATUS
    except KeyboardInterrupt:
        print(f"hookbus {args.command}: interrupted", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _train(args: argparse.Namespace) -> int:
    from engine.trainer import SSLTrainer

    cfg = load_config(args.config, args.overrides)
    trainer = SSLTrainer(cfg)
    state = trainer.train()
    evaluation = state.summary.get("evaluation")
    if evaluation:
        trained = evaluation["trained"]
        print(
            f"done: kNN top-1 {trained['knn_top1']:.4f}, "
            f"probe top-1 {trained['probe_top1']:.4f}; run directory {state.run_dir}"
        )
    else:
        print(f"done: run directory {state.run_dir}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from engine.task import prepare_task
    from engine.trainer import SSLTrainer

    cfg = load_config(args.config, args.overrides)
    trainer = SSLTrainer(cfg)
    prepare_task(trainer.state, cfg)
    print(f"{args.config}: valid")
    return 0


def _hooks(args: argparse.Namespace) -> int:
    from engine.bus import handler_priorities
    from engine.trainer import SSLTrainer

    trainer = SSLTrainer(load_config(args.config, args.overrides))
    for event, handlers in handler_priorities(trainer.engine).items():
        listed = ", ".join(f"{name} ({priority})" for name, priority in handlers) or "-"
        print(f"{event:<18} {listed}")
    return 0


_CONSOLE = "hookbus-console"
_COMMANDS = {"train": _train, "validate": _validate, "hooks": _hooks}


def _setup_logging(quiet: bool) -> None:
    logger = logging.getLogger("hookbus")
    for old in [h for h in logger.handlers if h.get_name() == _CONSOLE]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stdout)
    handler.set_name(_CONSOLE)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


if __name__ == "__main__":
    sys.exit(main())
