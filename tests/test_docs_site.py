"""The documentation site as a person sees it (``bash .ci/run docs``, docs/_build/html).

Headless Debian ``chromium`` screenshots the home page, the API page of ``KNGMechanism``
and a notebook page (kept in docs/_build/screenshots/ for a human look); the notebook
pages must show figures rendered from their executed outputs; no page may link to a
missing page, file or anchor of the site.

``bash .ci/run`` builds the site before running this file. Run alone, it builds the site
first if there is none (the notebooks are then executed by the build).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import matplotlib.image as mpimg
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "docs" / "_build" / "html"
SHOTS = ROOT / "docs" / "_build" / "screenshots"
PAGES = {
    "home": "index.html",
    "kng_mechanism": "api/generated/pymc_manidp.mechanisms.KNGMechanism.html",
    "notebook": "notebooks/01_sphere_mean_direction.html",
}


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "index.html").exists():
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-q"]
        subprocess.run([*cmd, str(ROOT / "docs"), str(SITE)], check=True, cwd=ROOT)
    return SITE


class Page(HTMLParser):
    """The links, images and element ids of one HTML page."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.images: list[tuple[str, tuple[str, ...]]] = []  # (src, classes of open divs)
        self._divs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "div":
            self._divs.append(a.get("class") or "")
        for key in ("href", "src"):
            if a.get(key) and tag in {"a", "img", "link", "script"}:
                self.links.append(a[key])
        if tag == "img" and a.get("src"):
            self.images.append((a["src"], tuple(self._divs)))

    def handle_endtag(self, tag):
        if tag == "div" and self._divs:
            self._divs.pop()


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def internal_targets(page_path: Path, page: Page):
    """(link, target file, fragment) for every link that stays inside the site."""
    for link in page.links:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
            continue
        target = page_path if not parts.path else (page_path.parent / unquote(parts.path))
        yield link, target.resolve(), unquote(parts.fragment)


def broken_links(site: Path) -> list[str]:
    # the pages, not the theme's Jinja templates that it copies into _static/
    pages = {p.resolve(): parse(p) for p in site.rglob("*.html") if "_static" not in p.parts}
    broken = []
    for path, page in pages.items():
        for link, target, fragment in internal_targets(path, page):
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such file)")
            elif fragment and target in pages and fragment not in pages[target].ids:
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such anchor)")
    return broken


def test_no_broken_internal_links(site):
    broken = broken_links(site)
    assert not broken, "\n".join(broken[:50])


def test_link_checker_catches_a_broken_link(tmp_path):
    # the checker can fail: a missing page and a missing anchor are both reported
    (tmp_path / "index.html").write_text(
        '<a href="missing.html">x</a><a href="other.html#nowhere">y</a><p id="here"></p>'
        '<a href="#here">ok</a>'
    )
    (tmp_path / "other.html").write_text('<h1 id="top">t</h1>')
    broken = broken_links(tmp_path)
    assert len(broken) == 2 and "no such file" in broken[0] + broken[1]


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_notebook_pages_show_executed_figures(site, page):
    html = site / "notebooks" / page.replace(".ipynb", ".html")
    parsed = parse(html)
    # MyST-NB renders a cell's outputs inside <div class="cell_output ...">
    figures = [src for src, divs in parsed.images if any("cell_output" in d for d in divs)]
    if page in {
        "01_sphere_mean_direction.ipynb",
        "02_spd_covariance.ipynb",
        "03_cell_shapes.ipynb",
    }:
        assert figures, f"{html.name}: no figure from an executed output"
    for src in figures:
        png = (html.parent / unquote(src)).resolve()
        assert png.exists() and png.stat().st_size > 2000, src
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", src


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium not found: .ci/setup installs it (apt-get install chromium)"
    return exe


@pytest.mark.parametrize("name", sorted(PAGES))
def test_screenshot(site, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    page = site / PAGES[name]
    assert page.exists(), page
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,1600",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=180)
    img = mpimg.imread(shot)
    assert img.shape[:2] == (1600, 1280)
    # a rendered page, not a blank one: text and figures give many distinct grey levels
    grey = np.round(img[..., :3].mean(axis=-1) * 255)
    assert grey.std() > 5 and len(np.unique(grey)) > 20, f"{name}: the screenshot looks blank"
