"""The fused log-density against the graph it replaces (issue 38 item 6).

Oracle: :func:`pymc_manidp.mcmc.polar_model`'s own log-density and gradient (PyTensor's
autodiff of the polar chart, the exponential map and the law, the model releases sampled
before), evaluated at the same ``u`` as :func:`pymc_manidp.mcmc.fused_model`'s. Both are
compiled with PyTensor's Python linker (``FAST_COMPILE``: no numba compile of the graph,
which would cost a minute per case); the fused Op then runs its numba kernel through
``perform``. Tolerance: relative 1e-9 on values and gradients (both are the same
floating-point function; measured agreement is 1e-15-1e-13), at 15 points per case drawn
with seed 0 (|z| and s over the chart: radii from 1e-3 σ to the cap).

The deterministics (released point, chart coordinates, distance) that
:func:`pymc_manidp.mcmc.expand_fused` computes from the draws are checked the same way.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.laws.distributions import KNG, ManifoldLaplace
from pymc_manidp.laws.fused import PolarLogDensity

RTOL = 1e-9


def _case(space):
    """(manifold, mode, records): records within 0.3 of the mode."""
    rng = np.random.default_rng(0)
    if space.startswith("R"):
        M = pmd.Euclidean(dim=int(space[1:]))
        mode = rng.normal(size=M.dim)
    elif space[0] == "S" and space[1:].isdigit():  # S<d>, radius 2.5
        M = pmd.Sphere(dim=int(space[1:]), radius=2.5)
        mode = (
            2.5
            * np.append(np.linspace(0.2, 0.5, M.dim), 1.0)
            / np.linalg.norm(np.append(np.linspace(0.2, 0.5, M.dim), 1.0))
        )
    elif space.startswith("H"):
        M = pmd.Hyperbolic(dim=int(space[1:]))
        mode = M.exp_coords(M.origin, np.linspace(0.3, 1.2, M.dim))
    elif space.startswith("K"):  # K<k>: planar shapes of k landmarks
        M = pmd.KendallShape(int(space[1:]))
        mode = M.validate(rng.normal(size=(M.k_landmarks, 2)))
    elif space.startswith("SPD"):
        M = pmd.SPD(int(space[3:]))
        mode = M.exp_coords(np.eye(M.k), np.linspace(-0.4, 0.6, M.dim))
    elif space == "SO3":
        M = pmd.Rotations()
        mode = M.exp_coords(np.eye(3), [0.4, -1.1, 0.7])
    else:  # pragma: no cover - a space of SPACES without a case
        raise ValueError(space)
    coords = 0.1 * rng.normal(size=(40, M.dim))
    return M, mode, M.exp_coords(mode, coords)


SPACES = ["R1", "R3", "S1", "S2", "S4", "H1", "H2", "H4", "SO3", "K3", "K5", "SPD2", "SPD3"]
LAWS = {
    "laplace": (ManifoldLaplace, {"normalized": False}),
    "kng": (KNG, {"domain": None}),
}


def _inputs(law, mode, data):
    return {"footpoint": mode} if law == "laplace" else {"data": data}


def _points(M, rng, k=15):
    d = M.dim
    if d == 1:
        pts = [rng.normal(size=1) * 3.0 for _ in range(k)]
        if np.isfinite(M.injectivity_radius):  # the linear chart winds round S^1 (2.5 pi)
            pts += [np.array([v]) for v in (40.0, -55.0, 101.0, -150.0)]
        return pts
    pts = []
    for s in np.linspace(-7.0, 2.5, k):
        pts.append(np.append(rng.normal(size=d), s))
    return pts


@pytest.mark.parametrize("law", sorted(LAWS))
@pytest.mark.parametrize("space", SPACES)
def test_fused_density_is_the_graphs(space, law):
    M, mode, data = _case(space)
    sigma = 0.2
    cls, kwargs = LAWS[law]
    assert mcmc.fused_law(M, cls, kwargs) == law
    graph = mcmc.polar_model(
        M, mode, sigma, cls, inputs=_inputs(law, mode, data), law_kwargs=kwargs
    )
    fused = mcmc.fused_model(M, mode, sigma, law, inputs=_inputs(law, mode, data))
    (gv,) = graph.value_vars
    (fv,) = fused.value_vars
    f_graph = graph.compile_logp(mode="FAST_COMPILE")
    df_graph = graph.compile_dlogp(mode="FAST_COMPILE")
    f_fused = fused.compile_logp(mode="FAST_COMPILE")
    df_fused = fused.compile_dlogp(mode="FAST_COMPILE")
    rng = np.random.default_rng(1)
    for u in _points(M, rng):
        want, got = f_graph({gv.name: u}), f_fused({fv.name: u})
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL)
        gwant, ggot = df_graph({gv.name: u}), df_fused({fv.name: u})
        np.testing.assert_allclose(ggot, gwant, rtol=RTOL, atol=RTOL * np.max(np.abs(gwant)))


@pytest.mark.parametrize("space", SPACES)
def test_expanded_draws_are_the_graphs_deterministics(space):
    import xarray as xr
    from arviz_base import from_dict

    M, mode, data = _case(space)
    sigma = 0.2
    graph = mcmc.polar_model(
        M, mode, sigma, KNG, inputs={"data": data}, law_kwargs={"domain": None}
    )
    (gv,) = graph.value_vars
    outs = graph.replace_rvs_by_values([graph["release"], graph["chart_coords"], graph["distance"]])
    fn = pytensor.function([gv], outs, mode="FAST_COMPILE")
    rng = np.random.default_rng(2)
    u = np.stack(_points(M, rng, 6)[:6]).reshape(2, 3, -1)
    idata = from_dict({"posterior": {"release" + mcmc.model.FUSED_SUFFIX: u}})
    assert isinstance(idata.posterior["release_polar"], xr.DataArray)
    mcmc.expand_fused(M, mode, sigma, idata)
    for i in range(2):
        for j in range(3):
            x, c, r = fn(u[i, j])
            np.testing.assert_allclose(idata.posterior["release"].values[i, j], x, atol=1e-12)
            np.testing.assert_allclose(idata.posterior["chart_coords"].values[i, j], c, atol=1e-12)
            np.testing.assert_allclose(idata.posterior["distance"].values[i, j], r, atol=1e-12)


def test_the_laplace_footpoint_must_be_the_mode():
    M, mode, _ = _case("R3")
    with pytest.raises(ValueError, match="footpoint must be the mode"):
        mcmc.fused_data(M, mode, 0.2, "laplace", {"footpoint": mode + 1e-9})


def test_laws_without_a_fused_density_keep_the_graph():
    M, _, _ = _case("R3")
    assert mcmc.fused_law(M, ManifoldLaplace, {"normalized": True}) is None
    assert mcmc.fused_law(M, KNG, {"domain": None, "statistic": "median"}) is None
    assert mcmc.fused_law(M, KNG, {"domain": None}, domain=object()) is None
    with pmd.options.context(nuts_density="graph"):
        assert mcmc.fused_law(M, KNG, {"domain": None}) is None


@given(
    st.sampled_from([1 / 3, 0.3333333333333333, 5e-324, 1e-300, 1e308, np.nan, np.inf, -0.0]),
    st.integers(0, 2),
)
def test_a_laplace_footpoint_off_the_mode_is_refused(value, index):
    """The fused Laplace measures distances from the chart's origin: a footpoint that is
    not the mode, by any amount (a sub-ulp change, a NaN), is refused, never sampled."""
    M, mode, _ = _case("R3")
    footpoint = mode.copy()
    footpoint[index] = value if value != -0.0 else np.nextafter(mode[index], np.inf)
    assert not np.array_equal(footpoint, mode)
    with pytest.raises(ValueError, match="footpoint must be the mode"):
        mcmc.fused_data(M, mode, 0.2, "laplace", {"footpoint": footpoint})
    values = mcmc.fused_data(M, mode, 0.2, "laplace", {"footpoint": mode.copy()})
    assert "footpoint" not in values and set(values) == {"scale", "chart_origin"}


def test_the_op_refuses_inputs_it_cannot_read():
    op = PolarLogDensity("euclidean", "kng", 1, np.inf)
    u, scale, origin, params = pt.dvector(), pt.dscalar(), pt.dvector(), pt.dvector()
    with pytest.raises(ValueError, match="expected 3 inputs after u and scale"):
        op(u, scale, origin, params)
    with pytest.raises(ValueError, match="u must be a vector and scale a scalar"):
        op(pt.dmatrix(), scale, origin, params, pt.dmatrix())
    with pytest.raises(ValueError, match="law must be one of"):
        PolarLogDensity("euclidean", "gauss", 1, np.inf)


@pytest.mark.parametrize("space", ["R3", "S2", "SO3", "K3"])
def test_the_chains_start_one_sigma_from_the_mode_as_the_graphs(space):
    """The fused model's start (NumPy) is the graph model's (PyTensor's polar chart
    applied to the point one sigma along the diagonal), to rounding."""
    M, mode, data = _case(space)
    sigma = 0.2
    graph = mcmc.polar_model(
        M, mode, sigma, KNG, inputs={"data": data}, law_kwargs={"domain": None}
    )
    fused = mcmc.fused_model(M, mode, sigma, "kng", inputs={"data": data})
    (gv,) = graph.value_vars
    (fv,) = fused.value_vars
    want = graph.initial_point()[gv.name]
    got = fused.initial_point()[fv.name]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# slow tier: the graph's first compile costs about 20 CPU s
@pytest.mark.slow
def test_a_seeded_nuts_release_draws_the_graphs_draws():
    """End to end: the same seeded NUTS release through the fused density and through
    the graph (``nuts_density="graph"``) runs the same chains, the two log-densities and
    gradients being the same numbers to rounding. Measured 2026-11-28: every one of the
    4,000 draws agrees to 1.2e-15 (4 x 1,000 then; now the release's short run, 4 x 500,
    which passes the gate for both). NUTS can amplify rounding into another trajectory,
    so the test asks the majority of the draws to agree to 1e-9 (a wrong gradient or
    chart leaves none) and the released values to be points of the same run."""
    S = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    rng = np.random.default_rng(5)
    data = S.exp_coords(north, rng.normal(size=(300, 2)) * 0.1)
    runs = []
    for density in ("auto", "graph"):
        with pmd.options.context(nuts_density=density):
            mech = pmd.KNGMechanism(S, epsilon=1.0, center=north, radius=0.5)
            rel = mech.release(data, sampler="nuts", random_seed=3)
        runs.append(rel.diagnostics.posterior)
    assert "release_polar" in runs[0] and "release_polar" not in runs[1]
    a, b = (np.asarray(p["release"].values) for p in runs)
    assert a.shape == b.shape == (4, 500, 3)  # the short run passed the gate in both
    assert np.mean(np.max(np.abs(a - b), axis=-1) < 1e-9) > 0.5
