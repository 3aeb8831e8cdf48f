"""The curator report: summary numbers, gate verdict, figures and files.

Oracles: the table's numbers are recomputed independently from the raw draws (chart
coordinates by ``Sphere.log_coords`` at the footpoint, ``np.mean``/``np.std``,
``az.ess``/``az.rhat``/``az.hdi`` on plain arrays); the coordinates read off the polar
model (``distance * direction/|direction|``) agree with those recomputed at the
footpoint. A run with a stuck chain must fail the verdict and show a large R-hat.
"""

from __future__ import annotations

import arviz as az
import matplotlib
import numpy as np
import pymc as pm
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.privacy.diagnostics import (
    chart_draws,
    check_run,
    report,
    summary,
)
from pymc_manidp.privacy.release import Release

matplotlib.use("Agg")

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


def sphere_data(n, seed):
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.0, np.pi / 8, n)
    phi = rng.uniform(0.0, 2 * np.pi, n)
    return np.stack(
        [np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], axis=-1
    )


@pytest.fixture(scope="module")
def laplace_run():
    """A NUTS run of the Laplace's polar model on S^2 (n = 10, eps = 0.5), its footpoint.

    PyMC's own NUTS rather than nutpie: it calls ``pm.sample`` directly, where
    nutpie would compile without the library's cache (``mcmc.compile_nutpie``); the
    report does not depend on which sampler produced the run.
    """
    mech = pmd.LaplaceMechanism(S2, epsilon=0.5, center=NORTH, radius=np.pi / 8)
    data = sphere_data(10, seed=0)
    with mech.model(data):
        idata = pm.sample(
            nuts_sampler="pymc",
            draws=1000,
            tune=1000,
            chains=2,
            cores=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata, mech.footpoint(data)[1]


@pytest.fixture(scope="module")
def rep(laplace_run, tmp_path_factory):
    idata, foot = laplace_run
    out = tmp_path_factory.mktemp("report") / "run1"
    r = report(idata, footpoint=foot, manifold=S2, out=out)
    yield r
    r.close()


def synthetic_run(shift=0.0, n_chain=4, n_draw=500, seed=0, dim=2):
    """Independent draws of a polar-model-like run; chain 0 shifted by ``shift``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n_chain, n_draw, dim))
    dist = rng.gamma(2.0, 0.1, size=(n_chain, n_draw))
    dist[0] += shift
    x = S2.exp_coords(NORTH, dist[..., None] * z / np.linalg.norm(z, axis=-1, keepdims=True))
    post = xr.Dataset(
        {
            "direction": (("chain", "draw", "d"), z),
            "distance": (("chain", "draw"), dist),
            "release": (("chain", "draw", "e"), x),
        }
    )
    return xr.DataTree.from_dict({"posterior": post})


def test_table_matches_an_independent_computation(rep, laplace_run):
    idata, foot = laplace_run
    # The report projects the footpoint onto the sphere (1 ulp here); without the same
    # projection, NUTS's repeated draws (exact ties) can swap ranks and move the
    # rank-normalized R-hat in the sixth digit.
    foot = foot / np.linalg.norm(foot)
    x = idata.posterior["release"].values
    raw = {"distance": S2.dist(foot, x)}
    coords = S2.log_coords(foot, x)
    raw.update({f"coord[{a}]": coords[..., a] for a in range(2)})
    t = rep.table
    assert list(t.index) == list(raw)
    for key, v in raw.items():
        row = t.loc[key]
        np.testing.assert_allclose(row["mean"], v.mean(), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(row["sd"], v.std(ddof=1), rtol=1e-3)
        np.testing.assert_allclose(row["ess_bulk"], az.ess(v), rtol=1e-10)
        ds = xr.Dataset({"v": (("chain", "draw"), v)})
        expected = az.summary(ds, kind="diagnostics", round_to="none")
        np.testing.assert_allclose(row["ess_tail"], expected.loc["v", "ess_tail"], rtol=1e-10)
        np.testing.assert_allclose(row["r_hat"], az.rhat(v), rtol=1e-10)
        np.testing.assert_allclose(
            [row["hdi94_lb"], row["hdi94_ub"]], az.hdi(v.ravel(), prob=0.94), rtol=1e-10
        )


def test_model_route_equals_footpoint_route(laplace_run):
    """For Laplace the chart origin is the footpoint: the polar model's coordinates
    and those recomputed from the released points agree."""
    idata, foot = laplace_run
    c_model, d_model = chart_draws(idata)
    c_foot, d_foot = chart_draws(idata, footpoint=foot, manifold=S2)
    np.testing.assert_allclose(c_model, c_foot, atol=1e-9)
    np.testing.assert_allclose(d_model, d_foot, atol=1e-9)


def test_verdict_is_the_gate(rep, laplace_run):
    gate = check_run(laplace_run[0])
    assert rep.verdict == gate
    assert rep.verdict.passed
    assert "gate: PASSED" in str(rep) and "coord[1]" in str(rep)


def test_stuck_chain_fails_the_verdict():
    good = report(synthetic_run())
    bad = report(synthetic_run(shift=0.2))
    try:
        assert good.verdict.passed and good.table["r_hat"].max() < 1.01
        assert not bad.verdict.passed
        assert bad.table.loc["distance", "r_hat"] > 1.1
        assert "gate: FAILED" in str(bad)
    finally:
        good.close()
        bad.close()


def test_figures_have_the_expected_axes(rep):
    trace, rank = rep.figures["trace"], rep.figures["rank"]
    # trace: (density, trace) for the distance and for the overlaid coordinates
    assert len(trace.axes) == 4
    assert {ax.get_ylabel() for ax in trace.axes} >= {"distance", "coord"}
    assert {ax.get_xlabel() for ax in trace.axes} >= {"Draw"}
    # rank: one panel per quantity, each with one ECDF line per chain
    assert len(rank.axes) == 3
    titles = [ax.get_title() for ax in rank.axes]
    assert titles[0] == "distance" and all(t.startswith("coord") for t in titles[1:])
    assert all(len(ax.get_lines()) >= 2 for ax in rank.axes)
    assert trace.get_suptitle() and rank.get_suptitle()


def test_files_are_written(rep):
    import matplotlib.image as mpimg

    assert [p.name for p in rep.files] == ["trace.png", "rank.png"]
    for path in rep.files:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(path)
        assert img.shape[0] > 200 and img.shape[1] > 400


def test_no_files_without_out():
    r = report(synthetic_run())
    r.close()
    assert r.files == ()


def test_accepts_a_release_and_refuses_one_without_a_run(laplace_run):
    fields = dict(
        value=NORTH,
        epsilon=1.0,
        delta=None,
        mechanism="manifold Laplace",
        sigma=0.1,
        sensitivity=0.05,
        n=10,
        sampler="nuts",
        seed_policy="fixed seed",
    )
    r = report(Release(**fields, diagnostics=laplace_run[0]))
    r.close()
    assert r.verdict.passed
    with pytest.raises(ValueError, match="no MCMC run"):
        report(Release(**{**fields, "sampler": "exact", "delta": 0.0}))
    with pytest.raises(TypeError, match="DataTree"):
        report(np.zeros(3))


def test_footpoint_needs_a_manifold(laplace_run):
    with pytest.raises(ValueError, match="both"):
        report(laplace_run[0], footpoint=NORTH)


def test_one_dimensional_chart_reads_the_sign():
    u = np.array([[[0.5], [-2.0]], [[1.0], [-0.1]]])
    dist = np.abs(u[..., 0]) * 0.3
    run = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {"u": (("chain", "draw", "k"), u), "distance": (("chain", "draw"), dist)}
            )
        }
    )
    coords, d = chart_draws(run)
    np.testing.assert_allclose(coords[..., 0], 0.3 * u[..., 0])
    np.testing.assert_allclose(d, dist)


def test_summary_lists_distance_and_embedding_coordinates(laplace_run):
    table = summary(laplace_run[0])
    assert list(table.index) == ["distance", "release[0]", "release[1]", "release[2]"]
    np.testing.assert_allclose(
        float(table.loc["distance", "mean"]),
        laplace_run[0].posterior["distance"].values.mean(),
        rtol=1e-2,
    )


def test_gate_numbers_are_az_summary_numbers():
    # the gate reads R-hat and both ESS exactly as az.summary prints them (issue 11)
    rng = np.random.default_rng(5)
    walk = np.cumsum(rng.normal(size=(2, 600)), axis=1) * 0.05 + rng.normal(size=(2, 600))
    x = np.stack([walk, rng.normal(size=(2, 600)), np.ones((2, 600))], -1)
    idata = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {
                    "release": (("chain", "draw", "ambient"), x),
                    "distance": (("chain", "draw"), walk**2),
                }
            )
        }
    )
    rep = check_run(idata)
    table = az.summary(
        xr.Dataset(
            {
                "distance": (("chain", "draw"), walk**2),
                "r0": (("chain", "draw"), walk),
                "r1": (("chain", "draw"), x[..., 1]),
            }
        ),
        kind="diagnostics",
        round_to="none",
    )
    for key, col in (("distance", "distance"), ("release[0]", "r0"), ("release[1]", "r1")):
        assert np.isclose(rep.rhat[key], table.loc[col, "r_hat"], rtol=1e-12)
        assert np.isclose(rep.ess_bulk[key], table.loc[col, "ess_bulk"], rtol=1e-12)
        assert np.isclose(rep.ess_tail[key], table.loc[col, "ess_tail"], rtol=1e-12)
    assert "release[2]" not in rep.rhat  # a constant coordinate is not monitored


def test_arviz_works_on_a_release_without_friction():
    # issue 11's ArviZ row: a release's run has named dims, no constant variable (the
    # old in_domain flag made az.plot_rank raise and az.rhat give NaN)
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=0.4)
    rel = mech.release(sphere_data(60, seed=4), sampler="nuts", random_seed=1)
    post = rel.diagnostics.posterior
    assert "in_domain" not in post.data_vars
    assert not any(dim.startswith("release_dim") for dim in post.sizes)
    for name in post.data_vars:  # every monitored quantity varies over the draws
        assert float(post[name].std()) > 0, name
    rhat = az.rhat(rel.diagnostics)
    assert all(np.all(np.isfinite(rhat[name].values)) for name in rhat.data_vars)
    import matplotlib.pyplot as plt

    az.plot_rank(rel.diagnostics)  # raised "x must be strictly increasing" before
    plt.close("all")


# --- non-finite draws never pass the gate ----------------------------------------------------
def _healthy_run(seed=0, chains=4, draws=1000):
    """Independent draws on S^2 and their distances: a run the gate passes."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(chains, draws, 3))
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    return z, np.abs(rng.normal(size=(chains, draws)))


def _run(release, distance):
    return xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {
                    "release": (("chain", "draw", "e"), release),
                    "distance": (("chain", "draw"), distance),
                }
            )
        }
    )


def test_a_healthy_synthetic_run_passes():
    assert check_run(_run(*_healthy_run())).passed  # so the failures below are the NaN's


@settings(max_examples=25)
@given(
    chain=st.integers(0, 3),
    draw=st.integers(0, 999),
    coord=st.integers(-1, 2),  # -1: the distance
    value=st.sampled_from([np.nan, np.inf, -np.inf]),
    count=st.sampled_from([1, 2, 500]),
)
def test_a_run_with_non_finite_draws_fails_the_gate(chain, draw, coord, value, count):
    # a NaN in an embedding coordinate made np.ptp NaN, and NaN > 0 dropped the
    # coordinate from the gate: 500 NaN draws in one chain passed (fails on the old code)
    release, distance = _healthy_run()
    target = distance if coord < 0 else release[..., coord]
    target[chain, draw : draw + count] = value
    report = check_run(_run(release, distance))
    assert not report.passed
    name = "distance" if coord < 0 else f"release[{coord}]"
    assert any(f.startswith(f"{name} has ") and "non-finite draws" in f for f in report.failures)


def test_a_nan_r_hat_after_the_first_quantity_is_the_one_reported():
    release, distance = _healthy_run()
    release[2, 500:, 1] = np.nan
    report = check_run(_run(release, distance))
    assert np.isnan(report.rhat["release[1]"])
    assert "R-hat of release[1] is nan > 1.01" in report.failures
    assert "bulk ESS of release[1] is nan < 400" in report.failures
