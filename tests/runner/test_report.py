"""``hookbus report RUN_DIR``: one self-contained page of a trained run (config, curves,
the evaluation tables, the pictures), every image inline; drawn by a real headless
Chromium, which finds each section and decodes each image."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.report import SECTIONS, build_report
from hookbus.testing import tiny_config
from tests.disk_mounts import small_tmpfs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Page(HTMLParser):
    """The sections (by id), images (alt and data) and every URL attribute of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.images: dict[str, bytes] = {}
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.attributes: dict[str, str] = {}
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.add(tag)
        if tag == "section":
            self.sections.append(found["id"] or "")
        if tag == "img":
            kind, _, data = (found["src"] or "").partition(",")
            assert kind == "data:image/png;base64"
            self.images[found["alt"] or ""] = base64.b64decode(data)
        if tag == "body":
            self.attributes = {key: value or "" for key, value in attrs}
        self.urls += [value or "" for key, value in attrs if key in ("src", "href", "action")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained tiny run (2 epochs, its evaluation report), then hookbus eval with pictures."""
    run_dir = tmp_path_factory.mktemp("report") / "run"
    hooks = {"evaluation_report": {"enabled": True, "labels_per_class": 2, "draws": 2}}
    SSLTrainer(tiny_config(run_dir, hooks=hooks, trainer={"test_every_num_epochs": 1})).train()
    assert main(["eval", str(run_dir), "--pictures", "-q"]) == 0
    assert main(["report", str(run_dir), "-q"]) == 0
    return run_dir


def test_the_page_has_every_section_and_its_content(run: Path) -> None:
    text = (run / "report.html").read_text()
    page = Page(text)
    assert page.sections == list(SECTIONS)
    assert set(page.images) == {"loss, learning rate and meter curves", "tsne", "neighbours"}
    for data in page.images.values():
        with Image.open(io.BytesIO(data)) as image:
            assert image.format == "PNG" and min(image.size) > 100
    assert page.images["tsne"] == (run / "pictures" / "tsne.png").read_bytes()
    assert "<td>method (loss.name)</td><td>nt_xent</td>" in text
    trained = json.loads((run / "evaluation.json").read_text())["trained"]
    assert f"<td>trained</td><td>{trained['knn_top1']:.4f}</td>" in text
    scores = json.loads((run / "eval.json").read_text())
    assert f"<td>{scores['linear']['backbone']['top1']:.4f}</td>" in text
    assert "attention: not drawn, the backbone is not a ViT" in text


def test_the_page_needs_no_network_and_runs_no_code(run: Path) -> None:
    page = Page((run / "report.html").read_text())
    assert page.urls and all(url.startswith("data:image/png;base64,") for url in page.urls)
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}


def test_a_run_without_evaluation_says_what_to_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    SSLTrainer(tiny_config(run_dir, optimizer={"num_epochs": 1})).train()
    text = build_report(run_dir)
    assert "no evaluation: run <code>hookbus eval RUN_DIR</code>" in text
    assert "no pictures: run <code>hookbus eval RUN_DIR --pictures</code>" in text
    assert Page(text).sections == list(SECTIONS)


def edit_results(run_dir: Path, **values: object) -> None:
    """Replace keys of the run's ``eval.json``."""
    path = run_dir / "eval.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | values))


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda run: (run / "eval.json").write_text("{not json"), "eval.json is not JSON"),
        (lambda run: (run / "eval.json").write_text("[1, 2]"), "is not a JSON object"),
        (lambda run: (run / "eval.json").write_text('{"features": 3}'), "not hookbus eval's"),
        (
            lambda run: edit_results(run, pictures={"tsne": "../../x.png"}),
            "names a picture outside the run directory",
        ),
        (lambda run: (run / "pictures" / "tsne.png").unlink(), "picture not found"),
        (
            lambda run: ((run / "eval.json").unlink(), os.mkfifo(run / "eval.json")),
            "not a regular file",
        ),
        (lambda run: (run / "config.yaml").write_text("model: [1"), "config.yaml"),
    ],
)
def test_an_unreadable_input_is_one_line_and_no_page(
    run: Path,
    tmp_path: Path,
    damage,
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("eval_cache", "tensorboard"))
    (copy / "report.html").unlink()
    (copy / "eval.json").unlink()
    shutil.copy(run / "eval.json", copy / "eval.json")
    damage(copy)
    assert main(["report", str(copy), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hookbus report: error: ") and named in err
    assert len(err.strip().splitlines()) == 1
    assert not (copy / "report.html").exists()


def test_report_refuses_a_folder_that_is_no_run_and_a_run_file_as_output(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path), "-q"]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing"), "-q"]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    before = (run / "config.yaml").read_bytes()
    assert main(["report", str(run), "-o", str(run / "config.yaml"), "-q"]) == 2
    assert "config.yaml" in capsys.readouterr().err
    assert (run / "config.yaml").read_bytes() == before
    assert main(["report", str(run), "-o", str(tmp_path / "page.html"), "-q"]) == 0
    assert (tmp_path / "page.html").read_text() == (run / "report.html").read_text()


PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].map(
    (image) => `${image.alt}=${image.complete}:${image.naturalWidth}x${image.naturalHeight}:` +
      `${image.getBoundingClientRect().width > 0}`);
  const sections = [...document.querySelectorAll("section")].map(
    (section) => `${section.id}:${section.getBoundingClientRect().height > 0}`);
  document.body.setAttribute("data-images", images.join("|"));
  document.body.setAttribute("data-sections", sections.join("|"));
});
</script>"""
"""Added to a copy of the page by the test (the report itself runs no code): records, once
the page has loaded, whether each image decoded and was laid out, and each section."""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_draws_every_section_and_image(run: Path, tmp_path: Path) -> None:
    page = (run / "report.html").read_text().replace("</body>", PROBE + "</body>")
    probed = tmp_path / "probed.html"
    probed.write_text(page)
    result = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    body = Page(result.stdout).attributes
    sections = dict(entry.split(":") for entry in body["data-sections"].split("|"))
    assert sections == dict.fromkeys(SECTIONS, "true")
    drawn = {}
    for entry in body["data-images"].split("|"):
        alt, _, state = entry.partition("=")
        complete, size, laid_out = state.split(":")
        width, height = map(int, size.split("x"))
        drawn[alt] = complete == "true" and width > 100 and height > 100 and laid_out == "true"
    assert drawn == dict.fromkeys(Page(page).images, True)
    assert re.search(r"<h2[^>]*>Pictures</h2>", result.stdout)


@pytest.mark.parametrize(
    ("make", "status", "named"),
    [
        (lambda page: page.mkdir(), 2, "is a directory"),
        (lambda page: page.symlink_to("/dev/full"), 2, "is a symbolic link (to /dev/full)"),
    ],
    ids=["a folder", "a link to /dev/full"],
)
def test_a_bad_page_path_is_one_line(
    run: Path, tmp_path: Path, make, status: int, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.html"
    make(page)
    assert main(["report", str(run), "-o", str(page), "-q"]) == status
    err = capsys.readouterr().err
    assert err.startswith("hookbus report: error: ") and named in err
    assert len(err.strip().splitlines()) == 1


def test_a_read_only_place_is_one_line_exit_1(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_tmpfs(tmp_path / "disk", size_kib=64, read_only=True) as disk:
        assert main(["report", str(run), "-o", str(disk / "page.html"), "-q"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("hookbus report: error: cannot write") and len(err.splitlines()) == 1
        assert list(disk.iterdir()) == []
