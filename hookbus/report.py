"""``hookbus report RUN_DIR``: one self-contained HTML page of a run (its config, curves,
evaluation tables and pictures), every image inline, nothing fetched from a network."""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path
from typing import Any

from hookbus.config import Config, load_config
from hookbus.engine.bounded_files import loads_json_bounded, read_bounded, read_text_bounded
from hookbus.engine.checkpoint.run_curves import (
    CURVES_FILE,
    METRICS_FILE,
    build_figure,
    read_curves,
)
from hookbus.engine.config.config_io import config_to_yaml
from hookbus.engine.errors import DataError, UserError
from hookbus.eval_table import RESULTS_FILE, results_notes, score_columns, score_headers
from hookbus.output_paths import check_destination, is_run_directory, write_output

REPORT_FILE = "report.html"
"""The report's file in the run directory."""

SECTIONS = ("config", "curves", "evaluation", "pictures")
"""The ids of the page's sections, in order."""

MAX_JSON_BYTES = 16 << 20
"""The most bytes of an ``evaluation.json`` or ``eval.json`` the report reads."""

MAX_PICTURE_BYTES = 32 << 20
"""The most bytes of a picture the report puts inline."""

PICTURE_TITLES = {
    "tsne": "t-SNE map of the test features, coloured by class",
    "neighbours": "test images (grey frame) and their nearest train images "
    "(green: same class, red: another)",
    "attention": "the class token's attention over the patches in the last block",
    "patch_pca": "patch features: first three principal components as RGB",
}
"""Captions of the pictures ``hookbus eval --pictures`` draws."""

STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; display: block; margin: .5em 0; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: .9em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
.note { color: #555; }
table.settings td { text-align: left; }
"""


def build_report(run_dir: Path) -> str:
    """The HTML page of the run directory ``run_dir``: sections ``config`` (the config's
    main settings, and the whole YAML folded), ``curves`` (drawn from ``curves.json`` or
    ``metrics.json``), ``evaluation`` (``evaluation.json``'s random-init vs trained table
    and ``eval.json``'s scores) and ``pictures`` (those ``eval.json`` lists), each saying
    so when the run has nothing for it. A folder that is no run directory, or a file that
    cannot be read, is a :class:`~hookbus.engine.errors.UserError` naming it."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or not is_run_directory(run_dir):
        raise UserError(f"{run_dir} is not a run directory (no checkpoint, config.yaml or log)")
    config_path = run_dir / "config.yaml"
    cfg = load_config(config_path) if config_path.exists() else None
    evaluation = _json(run_dir / "evaluation.json")
    scores = _json(run_dir / RESULTS_FILE)
    body = [
        f"<h1>hookbus run {html.escape(str(run_dir))}</h1>",
        _section("config", "Config", _config_html(cfg)),
        _section("curves", "Curves", _curves_html(run_dir)),
        _section("evaluation", "Evaluation", _evaluation_html(evaluation, scores)),
        _section("pictures", "Pictures", _pictures_html(run_dir, scores)),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>hookbus run {html.escape(run_dir.name)}</title>"
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write :func:`build_report` of ``run_dir`` to ``out`` (default
    ``run_dir/report.html``), all or nothing; never over one of the run's own files."""
    run_dir = Path(run_dir)
    path = Path(out) if out is not None else run_dir / REPORT_FILE
    inputs = [run_dir / name for name in ("config.yaml", RESULTS_FILE, "evaluation.json")]
    if path.is_symlink():
        raise UserError(
            f"{path} is a symbolic link (to {os.readlink(path)}): remove it, or give another "
            "path with -o"
        )
    check_destination(path, inputs, allowed=[run_dir / REPORT_FILE])
    write_output(path, build_report(run_dir).encode("utf-8"))
    return path


def _section(name: str, title: str, content: str) -> str:
    return f"<section id='{name}'><h2>{title}</h2>\n{content}\n</section>"


def _json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, None when there is no such file."""
    if not path.exists() and not path.is_symlink():
        return None
    text = read_text_bounded(path, "results file", MAX_JSON_BYTES, error=DataError)
    try:
        found = loads_json_bounded(text, str(path), error=DataError)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(found, dict):
        raise DataError(f"{path} is not a JSON object")
    return found


def _table(headers: list[str], rows: list[list[str]], kind: str = "scores") -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in headers)
    lines = [
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>"
        for row in rows
    ]
    return f"<table class='{kind}'><tr>{head}</tr>{''.join(lines)}</table>"


def _config_html(cfg: Config | None) -> str:
    if cfg is None:
        return "<p class='note'>no config.yaml in the run directory</p>"
    data, model, optimizer = cfg.data, cfg.model, cfg.optimizer
    rows = [
        ["method (loss.name)", cfg.loss.name],
        ["backbone", model.backbone.name],
        ["data", data.name],
        ["image size", str(data.image_size)],
        ["views", f"{data.num_views} + {data.small_views.count} small"],
        ["batch size per process", str(data.batch_size)],
        ["processes", str(cfg.distributed.nproc_per_node)],
        [
            "optimizer",
            f"{optimizer.name}, lr {optimizer.lr:g}, weight decay {optimizer.weight_decay:g}",
        ],
        ["epochs", str(optimizer.num_epochs)],
        ["seed", str(cfg.trainer.seed)],
    ]
    if data.name == "image_folder":
        rows.insert(3, ["folders", f"{data.folder.train_dir}, {data.folder.test_dir}"])
    yaml_text = html.escape(config_to_yaml(cfg))
    return (
        _table(["setting", "value"], rows, "settings")
        + f"<details><summary>the whole config</summary><pre>{yaml_text}</pre></details>"
    )


def _img(data: bytes, alt: str) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{encoded}'>"


def _curves_html(run_dir: Path) -> str:
    if not any((run_dir / name).exists() for name in (CURVES_FILE, METRICS_FILE)):
        return "<p class='note'>no curves: the run has written no metrics yet</p>"
    figure = build_figure(read_curves(run_dir), str(run_dir.name))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return _img(buffer.getvalue(), "loss, learning rate and meter curves")


def _evaluation_html(evaluation: dict | None, scores: dict | None) -> str:
    parts = []
    if evaluation:
        rows = []
        for encoder, values in evaluation.items():
            if isinstance(values, dict):
                rows.append(
                    [
                        encoder,
                        *(
                            f"{values.get(key, float('nan')):.4f}"
                            for key in ("knn_top1", "probe_top1")
                        ),
                    ]
                )
        parts.append("<h3>At the end of training (evaluation.json)</h3>")
        parts.append(_table(["encoder", "kNN top-1", "probe top-1"], rows))
    if scores:
        try:
            headers = ["features", *score_headers(scores)]
            rows = [[name, *cells] for name, cells in score_columns(scores)]
            described = (
                f"{scores['source']} on {scores['data']}: {scores['train_images']} train and "
                f"{scores['test_images']} test images, {len(scores['classes'])} classes"
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{RESULTS_FILE} is not hookbus eval's results ({exc!r})") from None
        parts.append(f"<h3>hookbus eval ({RESULTS_FILE})</h3><p>{html.escape(described)}</p>")
        parts.append(_table(headers, rows))
        notes = "".join(f"<li>{html.escape(line)}</li>" for line in results_notes(scores))
        parts.append(f"<ul class='note'>{notes}</ul>")
    if not parts:
        return (
            "<p class='note'>no evaluation: run <code>hookbus eval RUN_DIR</code>, or train "
            "with hooks.evaluation_report.enabled=true</p>"
        )
    return "\n".join(parts)


def _pictures_html(run_dir: Path, scores: dict | None) -> str:
    listed = (scores or {}).get("pictures")
    if not isinstance(listed, dict):
        return "<p class='note'>no pictures: run <code>hookbus eval RUN_DIR --pictures</code></p>"
    parts = []
    for name, relative in listed.items():
        if name not in PICTURE_TITLES or not isinstance(relative, str):
            continue
        path = run_dir / relative
        if run_dir.resolve() not in path.resolve().parents:
            raise DataError(f"{RESULTS_FILE} names a picture outside the run directory: {relative}")
        data = read_bounded(path, "picture", MAX_PICTURE_BYTES, error=DataError)
        caption = html.escape(PICTURE_TITLES[name])
        parts.append(
            f"<figure id='picture-{name}'>{_img(data, name)}<figcaption>{caption}"
            "</figcaption></figure>"
        )
    for name, reason in listed.get("not_drawn", {}).items():
        parts.append(f"<p class='note'>{html.escape(name)}: not drawn, {html.escape(reason)}</p>")
    return "\n".join(parts)
