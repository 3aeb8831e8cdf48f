"""docs/reproduction.md against the committed full-run files under docs/reproduction/.

The full run is not part of the tests (minutes on 2 cores, more with median_robustness);
these tests read its committed output files and re-render the document's generated
blocks from them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pymc_manidp.experiments import EXPERIMENTS, report
from pymc_manidp.experiments._common import _jsonable

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reproduction.md"
RESULTS = ROOT / "docs" / "reproduction"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_doc_numbers_match_the_committed_full_run():
    """Every generated block equals what the committed files give (no hand-copied numbers)."""
    assert report.check_doc(DOC, RESULTS) == []
    # and the document has one block per experiment plus the settings
    names = {m.group("name") for m in report.BLOCK.finditer(DOC.read_text())}
    assert names == {"settings", *EXPERIMENTS}


def _committed():
    return [n for n in EXPERIMENTS if (RESULTS / n / "summary.json").exists()]


def test_an_experiment_without_a_full_run_says_so_and_claims_no_numbers():
    """A missing full run is visible: its block is the "not run in full yet" notice."""
    text = DOC.read_text()
    bodies = {m.group("name"): m.group("body") for m in report.BLOCK.finditer(text)}
    for name in set(EXPERIMENTS) - set(_committed()):
        assert bodies[name] == report._missing(name)
    assert _committed(), "no full run committed under docs/reproduction/"


@pytest.mark.parametrize("name", _committed())
def test_committed_files_are_a_full_run_with_the_papers_settings(name):
    res = report.load(RESULTS, name)  # raises on a --quick run
    table, summary = res
    assert len(table) > 0 and summary["quick"] is False
    module = __import__(f"pymc_manidp.experiments.{name}", fromlist=["SETTINGS"])
    full = json.loads(json.dumps(_jsonable(module.SETTINGS["full"])))
    assert summary["settings"] == full  # no --replicates override either
    if "seed" in summary:
        assert summary["seed"] == 20211206  # the command line's default


def test_every_figure_named_in_the_doc_is_committed_and_small():
    """Each section (``## ... — `pymc-manidp reproduce NAME` ``) names its figures; those
    of every experiment with a committed full run exist as PNG files."""
    sections = re.split(r"\n## ", DOC.read_text())
    named = {}
    for sec in sections:
        m = re.search(r"`pymc-manidp reproduce (\w+)`", sec.splitlines()[0])
        if m:
            named[m.group(1)] = set(re.findall(r"`(\w+\.png)`", sec))
    assert set(named) == set(EXPERIMENTS) and all(named.values())
    for name in _committed():
        for png in named[name]:
            assert (RESULTS / name / png).read_bytes().startswith(PNG_MAGIC), png
    total = sum(p.stat().st_size for p in RESULTS.rglob("*") if p.is_file())
    assert total < 4_000_000  # committed outputs stay small


@pytest.fixture
def copies(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "results")
    shutil.copy(DOC, tmp_path / "doc.md")
    return tmp_path / "doc.md", tmp_path / "results"


def test_an_edited_result_or_doc_number_is_caught(copies):
    doc, results = copies
    assert report.check_doc(doc, results) == []
    # a result file changes (e.g. a rerun): that experiment's block no longer matches
    name = _committed()[0]
    path = results / name / "table.csv"
    t = pd.read_csv(path)
    col = "value" if "value" in t else "mean"
    t[col] = t[col] * 1.01
    t.to_csv(path, index=False)
    assert report.check_doc(doc, results) == [name]
    # rewriting the document from the files repairs it
    report.update_doc(doc, results)
    assert report.check_doc(doc, results) == []
    # a hand edit of one number inside a block is caught
    text = doc.read_text()
    m = next(report.BLOCK.finditer(text))
    body = m.group("body")
    i = next(i for i, c in enumerate(body) if c.isdigit())
    edited = body[:i] + str((int(body[i]) + 1) % 10) + body[i + 1 :]
    doc.write_text(text.replace(body, edited, 1))
    assert report.check_doc(doc, results) == [m.group("name")]


def test_quick_runs_are_refused(copies):
    doc, results = copies
    path = results / _committed()[0] / "summary.json"
    s = json.loads(path.read_text())
    s["quick"] = True
    path.write_text(json.dumps(s))
    with pytest.raises(report.QuickResultsError, match="--quick"):
        report.check_doc(doc, results)


def test_cli_doc_option_refuses_a_quick_run_before_any_work(tmp_path, capsys):
    from pymc_manidp.cli import main

    code = main(["reproduce", "theorems", "--quick", "--out", str(tmp_path), "--doc", str(DOC)])
    assert code == 2
    assert "--doc needs a full run" in capsys.readouterr().err
    assert not (tmp_path / "theorems").exists()


def test_median_block_names_exactly_the_cells_where_the_median_loses():
    """A synthetic table: the median is 2x worse in one cell (tiny SE: a loss), 2x worse
    in another with a huge SE (not a loss), and better elsewhere; the block lists only the
    first, and compares against the *better* of the two means."""
    from pymc_manidp.experiments import median_robustness as R

    rows = []
    for n in (50, 1000):
        for p in (0.0, 0.1):
            errs = {R.LAPLACE: 1.0, R.KNG_MEAN: 0.5, R.KNG_MEDIAN: 0.25}
            se = 0.01
            if (n, p) == (50, 0.0):
                errs[R.KNG_MEDIAN] = 1.0  # 2x the better mean (KNG's 0.5), not Laplace's
            if (n, p) == (1000, 0.0):
                errs[R.KNG_MEDIAN], se = 1.0, 1.0  # as bad, but within the noise
            for m, v in errs.items():
                rows.append(dict(space="S2", method=m, n=n, contamination=p, mean=v, se=se))
    text = report._median_against_means(pd.DataFrame(rows), R.KNG_MEDIAN, (R.LAPLACE, R.KNG_MEAN))
    assert "Where the median loses (by more than 2 SE): S2 at 0% and n = 50 (2.00)." in text
    assert "n = 1000 (2.00)" not in text
    assert "| S2 | 0% | **2.00** | 2.00 |" in text
    assert "| S2 | 10% | **0.50** | **0.50** |" in text
