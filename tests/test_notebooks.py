"""The worked examples in ``notebooks/`` run top to bottom against the current API.

Each notebook is read as plain nbformat-4 JSON (no Jupyter needed), checked to hold no
stored outputs, and its code cells are executed in order in one namespace with the
matplotlib backend "Agg". A broken API call fails the test; each test then checks a few
computed quantities that could be wrong (a release off the manifold or outside the
public ball, a share outside [0, 1], ...).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt
import numpy as np
import pytest

import pymc_manidp as pmd

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXPECTED = (
    "01_sphere_mean_direction.ipynb",
    "02_spd_covariance.ipynb",
    "03_cell_shapes.ipynb",
    "04_noise_aware_inference.ipynb",
    "05_mcmc_privacy_diagnostics.ipynb",
)

# plt.show() under Agg only warns that it cannot show anything
pytestmark = pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive")


def load(name: str) -> dict:
    """The notebook's JSON, checked to be nbformat 4 without stored outputs."""
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4, f"{name}: nbformat {nb['nbformat']}, expected 4"
    assert isinstance(nb["cells"], list) and nb["cells"], f"{name}: no cells"
    for i, cell in enumerate(nb["cells"]):
        assert cell["cell_type"] in {"code", "markdown", "raw"}, f"{name} cell {i}"
        assert isinstance(cell["source"], list | str), f"{name} cell {i}: bad source"
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{name} cell {i}: stored outputs"
            assert cell["execution_count"] is None, f"{name} cell {i}: stored execution count"
    return nb


def source(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def run(name: str) -> dict:
    """Execute the notebook's code cells in order in one namespace; return it."""
    nb = load(name)
    namespace = {"__name__": "__main__"}
    try:
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = source(cell)
            magic = [ln for ln in src.splitlines() if ln.lstrip().startswith(("%", "!"))]
            assert not magic, f"{name} cell {i}: IPython magics do not run as Python: {magic}"
            exec(compile(src, f"{name}[cell {i}]", "exec"), namespace)
    finally:
        plt.close("all")
    return namespace


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_format_and_listing(name):
    nb = load(name)
    kinds = {cell["cell_type"] for cell in nb["cells"]}
    assert kinds >= {"code", "markdown"}
    assert name in (NOTEBOOKS / "README.md").read_text(encoding="utf-8")


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


def test_sphere_notebook():
    ns = run("01_sphere_mean_direction.ipynb")
    S, centre, radius = ns["S"], ns["centre"], ns["radius"]
    for key in ("rel_kng", "rel_lap", "rel_nuts"):
        value = ns[key].value
        assert value.shape == (3,)
        assert np.isclose(np.linalg.norm(value), 1.0, atol=1e-12), key
    # KNG lives on the public ball (exact and NUTS); the unrestricted Laplace need not
    for key in ("rel_kng", "rel_nuts"):
        assert S.dist(centre, ns[key].value) <= radius, key
    assert ns["rel_kng"].delta == 0.0 and ns["rel_lap"].delta == 0.0
    assert ns["rel_nuts"].delta is None and ns["rel_nuts"].sampler == "nuts"
    assert ns["rep"].verdict.passed
    assert isinstance(ns["short_run_error"], pmd.DiagnosticsError)
    public = ns["rel_kng"].public()
    assert "sampler_info" not in public and "diagnostics" not in public
    assert 0 < ns["n"] == len(ns["data"])


def test_spd_notebook():
    ns = run("02_spd_covariance.ipynb")
    P, m0, radius = ns["P"], ns["m0"], ns["radius"]
    for key in ("rel_lap", "rel_kng"):
        value = ns[key].value
        assert value.shape == (2, 2) and np.allclose(value, value.T)
        assert np.linalg.eigvalsh(value)[0] > 0, f"{key} is not positive definite"
    assert P.dist(m0, ns["rel_kng"].value) <= radius
    shares = ns["pd_fail_share"]
    assert set(shares) == set(ns["sizes"])
    assert all(0.0 <= s <= 1.0 for s in shares.values())
    # about 20% at n = 20; 2,000 replicates cannot all be PD by chance
    assert shares[20] > 0.05
    assert shares[160] <= shares[20]
    # the manifold releases never leave SPD(2): the whole simulated law, not one draw
    for name in ("manifold Laplace", "KNG"):
        assert np.all(np.linalg.eigvalsh(ns["draws_n"][name])[:, 0] > 0), name


def test_cells_notebook():
    ns = run("03_cell_shapes.ipynb")
    K, m0, radius = ns["K"], ns["m0"], ns["radius"]
    for key in ("rel_kng", "rel_lm"):
        z = ns[key].value
        assert z.shape == (ns["k"], 2)
        # a pre-shape: centred, unit size
        assert np.allclose(z.mean(axis=0), 0.0, atol=1e-12)
        assert np.isclose(np.linalg.norm(z), 1.0)
        assert ns[key].delta == 0.0 and "clip" in ns[key].opt_outs
    assert K.dist(m0, ns["rel_kng"].value) <= radius
    # every record the mechanisms used lies in the public ball
    assert np.all(ns["domain"].distances(ns["data"]) <= radius)
    assert 0 < ns["outside"].sum() < ns["n"]
    d = ns["mean_distance"]
    assert 0 < d["KNG"] < d["landmark-wise Laplace"]


def test_noise_aware_notebook():
    ns = run("04_noise_aware_inference.ipynb")
    S, published, idata = ns["S"], ns["published"], ns["idata"]
    assert int(idata.sample_stats["diverging"].sum()) == 0
    post = idata.posterior["mean"].values.reshape(-1, 3)
    assert np.allclose(np.linalg.norm(post, axis=-1), 1.0)
    # the posterior is the Laplace at the release: mean distance 2 sigma (sigma << pi)
    d = S.dist(np.asarray(published["value"]), post)
    assert 1.5 * published["sigma"] < d.mean() < 2.5 * published["sigma"]
    assert np.median(ns["d_post"]) < np.median(ns["d_prior"])
    ranks = ns["ranks"]
    assert len(ranks) == 30 and np.all((0 <= ranks) & (ranks <= 100))


def test_mcmc_privacy_notebook():
    ns = run("05_mcmc_privacy_diagnostics.ipynb")
    S, north, radius = ns["S"], ns["north"], ns["radius"]
    rel, est = ns["rel"], ns["rel"].delta_estimate
    assert rel.delta is None and rel.sampler == "nuts"
    assert S.dist(north, rel.value) <= radius
    assert est["label"].startswith("ESTIMATE") and est["t"] == 1000
    assert 0.0 <= est["delta_hat"] < 0.1  # a tuned chain from PyMC's start, 1,000 steps
    assert "tv_bound" in ns["rep"].figures
    # the short chain is caught, the long one cleared
    assert ns["short"].delta_hat > 1.0 and ns["long"].delta_hat < 0.05
    # the bound lies above the simulated TV to the exact law, which starts near 1
    assert np.all(ns["tv_sim"] <= ns["bound"].upper(2.0) + 0.04)
    assert ns["tv_sim"][0] > 0.9
    assert ns["rel_exact"].delta == 0.0
    assert "delta_estimate" not in ns["public"]
