"""The text table of ``hookbus eval``'s results (and the HTML report's rows): one row
per kind of features, one column per score."""

from __future__ import annotations

from typing import Any

RESULTS_FILE = "eval.json"
"""The results' file in the output folder (the run directory by default)."""


def score_columns(results: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``[(feature name, [cell, ...])]`` under the headers :func:`score_headers` gives,
    for every kind of features in ``results`` (a ``hookbus eval`` JSON)."""
    rows = []
    for name, described in results.get("features", {}).items():
        cells = [str(described["dims"])]
        for k in results.get("knn", {}).get(name, {}):
            cells.append(f"{results['knn'][name][k]:.4f}")
        if "linear" in results:
            cells.append(f"{results['linear'][name]['top1']:.4f}")
        for part in results.get("low_shot", {}).get(name, {}).values():
            cells.append(f"{part['mean']:.4f} ± {part['std']:.4f}")
        if "retrieval" in results:
            found = results["retrieval"][name]
            cells.append(f"{found['map']:.4f}")
            cells += [f"{value:.4f}" for value in found["recall_at"].values()]
        rows.append((name, cells))
    return rows


def score_headers(results: dict[str, Any]) -> list[str]:
    """The column headers of :func:`score_columns`."""
    first = next(iter(results.get("features", {})), None)
    headers = ["dims"]
    if first is None:
        return headers
    headers += [f"kNN k={k}" for k in results.get("knn", {}).get(first, {})]
    if "linear" in results:
        headers.append("linear")
    for part in results.get("low_shot", {}).get(first, {}).values():
        images = sorted(set(part["images"]))
        counted = f"{images[0]}" if len(images) == 1 else f"{images[0]}-{images[-1]}"
        headers.append(f"{part['fraction']:.0%} labels ({counted} images, {part['draws']} draws)")
    if "retrieval" in results:
        headers.append("mAP")
        headers += [f"R@{k}" for k in results["retrieval"][first]["recall_at"]]
    return headers


def results_table(results: dict[str, Any]) -> str:
    """The results of a ``hookbus eval`` as lines of text: what was evaluated, a table of
    scores, and the probe's chosen settings."""
    headers = ["features", *score_headers(results)]
    rows = [[name, *cells] for name, cells in score_columns(results)]
    widths = [max(len(row[column]) for row in [headers, *rows]) for column in range(len(headers))]
    lines = [
        f"evaluation of {results['source']} on {results['data']}: {results['train_images']} "
        f"train and {results['test_images']} test images, {len(results['classes'])} classes",
        "  ".join(
            cell.ljust(width) if column == 0 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(headers, widths, strict=True))
        ),
    ]
    for row in rows:
        lines.append(
            "  ".join(
                cell.ljust(width) if column == 0 else cell.rjust(width)
                for column, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
        )
    lines += results_notes(results)
    return "\n".join(lines)


def results_notes(results: dict[str, Any]) -> list[str]:
    """The lines under the table: the kNN vote, the probe's choices, what did not apply."""
    notes = []
    if "knn" in results:
        notes.append(f"kNN: weighted vote, temperature {results['knn']['temperature']:g}")
    for name, found in results.get("linear", {}).items():
        notes.append(
            f"linear ({name}): lr {found['lr']:g}, weight decay {found['weight_decay']:g}, "
            f"chosen on {found['held_out_images']} held-out train images"
        )
    if "low_shot" in results:
        notes.append("low-shot: mean ± standard deviation over the draws")
    for part, reason in results.get("not_applicable", {}).items():
        notes.append(f"{part.replace('_', ' ')}: not computed, {reason}")
    if results.get("cached_features"):
        notes.append("features read from the cache")
    return notes
