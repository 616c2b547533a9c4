"""The documentation site (docs/, mkdocs.yml): it builds with ``mkdocs build --strict`` (no broken
link or reference), its generated reference covers every command and route, the examples marked
runnable run and print what the page shows, and the built pages render in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUNNABLE = re.compile(
    r"<!-- runnable -->\n```bash\n(.*?)```\n(?:\n<!-- output -->\n```text\n(.*?)```)?", re.S
)


def examples() -> list[tuple[str, str, str | None]]:
    found = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for m in RUNNABLE.finditer(page.read_text()):
            found.append((f"{page.relative_to(ROOT)}:{m.start()}", m.group(1), m.group(2)))
    return found


def test_some_examples_are_marked_runnable():
    assert len(examples()) >= 3


@pytest.mark.parametrize("where,script,shown", examples(), ids=[e[0] for e in examples()])
def test_a_runnable_example_runs_and_prints_what_the_page_shows(where, script, shown, tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "100",
        "JURYBOX_VERDICT_CACHE": "off",
    }
    run = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{where}:\n{run.stderr[-3000:]}"
    for line in (shown or "").splitlines():
        assert line.rstrip() in run.stdout, f"{where}: {line!r} not in:\n{run.stdout}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


def test_the_reference_covers_every_command_and_route(site):
    import typer
    from typer.core import TyperGroup

    from jurybox.serving.cli import app

    cli = (site / "reference" / "cli" / "index.html").read_text()
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="jurybox")
    assert isinstance(root, TyperGroup)
    for name in root.list_commands(ctx):
        assert f"jurybox {name}</code>" in cli, name
    http = (site / "reference" / "http" / "index.html").read_text()
    for route in (
        "/v1/score",
        "/v1/provenance",
        "/v1/rubrics",
        "/v1/jury",
        "/healthz",
        "/metrics",
        "/v1/openrlhf/{rubric}",
    ):
        assert f"<code>{route}</code>" in http, route
    formats = (site / "reference" / "formats" / "index.html").read_text()
    assert "<code>provenance</code>" in formats and "<code>criteria</code>" in formats


def test_the_home_page_and_a_guide_render_in_chromium(site, browser, tmp_path):
    for page, heading in (
        (site / "index.html", "jurybox"),
        (site / "guides" / "leaderboard" / "index.html", "Leaderboards"),
    ):
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        tab.goto(page.as_uri())
        tab.screenshot(path=str(tmp_path / f"{page.parent.name or 'home'}.png"), full_page=False)
        assert tab.locator("article h1").first.inner_text().startswith(heading)
        # Material's navigation is there, with every section of the site.
        nav = tab.locator("nav.md-nav--primary").first.inner_text()
        for section in ("Get started", "Guides", "Concepts", "Reference"):
            assert section in nav, nav
        tab.close()
