"""The documentation site as a person sees it (``bash .ci/run docs``, docs/_build/html).

Headless Debian ``chromium`` screenshots the home page, the API page of ``KNGMechanism``
and a notebook page (kept in docs/_build/screenshots/ for a human look); the notebook
pages must show figures rendered from their executed outputs; no page may link to a
missing page, file or anchor of the site. The site is complete offline: no page loads a
script, style sheet or image from the network, and with the network blocked MathJax
(shipped in ``_static/mathjax``, docs/conf.py) renders every formula of a page.

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
        self.loads: list[str] = []  # what the browser fetches to show the page
        self.formulas = 0  # Sphinx's math elements, <span|div class="math ...">
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
        if tag in {"script", "img", "iframe", "audio", "video", "source"} and a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href") and a.get("rel") not in {"canonical", "alternate"}:
            self.loads.append(a["href"])  # style sheets, preloads, icons
        if tag in {"span", "div"} and "math" in (a.get("class") or "").split():
            self.formulas += 1

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


#: Pages with formulas of each source: a notebook's Markdown cells (MyST dollar math),
#: a numpydoc docstring's ``.. math::`` and inline ``:math:``.
MATH_PAGES = [
    "notebooks/01_sphere_mean_direction.html",
    "api/generated/pymc_manidp.laws.KNG.html",
    "api/generated/pymc_manidp.laws.normalizers.html",
]
#: Blocks every host name (file:// needs none): what the page shows then is what a reader
#: without a network sees.
NO_NETWORK = "--host-resolver-rules=MAP * ~NOTFOUND"


def rendered_dom(page: Path) -> str:
    """The page's DOM after its scripts ran, in headless chromium without network."""
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        NO_NETWORK,
        # virtual time runs the page's timers and loads without waiting in real time
        "--virtual-time-budget=30000",
        "--dump-dom",
        page.as_uri(),
    ]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=180).stdout


def test_no_page_loads_anything_from_the_network(site):
    remote = [
        f"{path.relative_to(site)}: {src}"
        for path in site.rglob("*.html")
        if "_static" not in path.parts
        for src in parse(path).loads
        if urlsplit(src).scheme in {"http", "https"} or src.startswith("//")
    ]
    assert not remote, "\n".join(remote[:50])


@pytest.mark.parametrize("page", MATH_PAGES)
def test_formulas_render_offline(site, page):
    html = site / page
    formulas = parse(html).formulas
    assert formulas > 0, f"{page}: no formula to render"
    dom = rendered_dom(html)
    # MathJax replaces the TeX of each formula by one <mjx-container>; a TeX error is an
    # <mjx-merror> inside it
    assert dom.count("<mjx-container") == formulas, f"{page}: formulas left as raw TeX"
    assert "<mjx-merror" not in dom


def test_render_without_network_cannot_reach_a_cdn(tmp_path):
    # the oracle of the test above: with MathJax from its CDN a formula stays raw TeX,
    # also on a machine with internet access
    page = tmp_path / "cdn.html"
    page.write_text(
        '<html><head><script defer src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/'
        'tex-mml-chtml.js"></script></head><body><span class="math">\\(x^2\\)</span>'
        "</body></html>"
    )
    dom = rendered_dom(page)
    assert "x^2" in dom and "<mjx-container" not in dom


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
