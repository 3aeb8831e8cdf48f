"""The Metropolis release path: PyMC's random-walk Metropolis on the polar model.

Law: the geodesic distance of the draws to the footpoint follows the exact radial law
of the Laplace on S^2 (tests/radial.py). KS with the bulk ESS as sample size, fixed
seed, α = 0.01, 2 chains x 12,000 draws (distance ESS about 5,000; the embedding
coordinates mix slower, ESS 600-1,000, which sets the run length for the gate).
The same statistic rejects a wrong rate and the missing volume Jacobian (flat radial
law). The diagnostics gate refuses a short run and records an explicit opt-out.

``sampler=`` is always passed: the default sampler of ``release`` may change.
"""

from __future__ import annotations

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp.privacy.diagnostics import DiagnosticsError, check_run
from tests.radial import mcmc_ks, radial_cdf

ALPHA = 0.01
S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])


def sphere_data(n, seed):
    """The 2021 supplement's sphere generator: polar angle uniform on [0, pi/8]."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.0, np.pi / 8, n)
    phi = rng.uniform(0.0, 2 * np.pi, n)
    return np.stack(
        [np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], axis=-1
    )


# n = 10, eps = 0.5: sigma ~ 0.24, wide enough for the curvature to shape the law
DATA = sphere_data(10, seed=0)
MECH = pmd.LaplaceMechanism(S2, epsilon=0.5, center=NORTH, radius=np.pi / 8)
# the chains in this process, one after the other: the same draws as PyMC's default
# processes for a seed, without starting two processes (each importing PyMC and
# compiling) while the other xdist worker is busy: the fixture took 140 s in the suite
INPROC = pmd.mcmc.MCMCSettings(cores=1)


@pytest.fixture(scope="module")
def released():
    return MECH.release(
        DATA,
        sampler="metropolis",
        settings=INPROC.with_overrides(draws=12_000, tune=1500, chains=2),
        random_seed=1,
    )


def distances(rel):
    return np.asarray(rel.diagnostics.posterior["distance"].values, float)


def test_release_passes_the_gate_and_is_recorded(released):
    assert released.sampler == "metropolis"
    assert released.delta is None and released.opt_outs == ()
    assert check_run(released.diagnostics).passed
    assert float(S2.dist(NORTH, released.value)) < np.pi
    draws = released.diagnostics.posterior["release"].values.reshape(-1, 3)
    # the value is one of the draws (projected onto the sphere: last-bit rounding)
    assert np.any(np.all(np.abs(draws - released.value) < 1e-12, axis=-1))


def test_recorded_distance_is_the_distance_to_the_footpoint(released):
    _, foot = MECH.footpoint(DATA)
    x = released.diagnostics.posterior["release"].values
    np.testing.assert_allclose(S2.dist(foot, x), distances(released), atol=1e-9)


def test_metropolis_samples_the_laplace_radial_law(released):
    """KS against the exact radial law (α = 0.01, n = bulk ESS)."""
    _, p, ess = mcmc_ks(distances(released), radial_cdf(S2, released.sigma, np.pi))
    assert ess > 400
    assert p > ALPHA


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda s: radial_cdf(S2, 1.15 * s, np.pi), id="sigma+15%"),
        pytest.param(lambda s: radial_cdf(pmd.Euclidean(dim=2), s, np.pi), id="no-jacobian"),
    ],
)
def test_ks_rejects_wrong_laws(released, wrong):
    _, p, _ = mcmc_ks(distances(released), wrong(released.sigma))
    assert p < ALPHA


def test_gate_refuses_a_short_metropolis_run():
    with pytest.raises(DiagnosticsError, match="convergence"):
        MECH.release(
            DATA,
            sampler="metropolis",
            settings=INPROC.with_overrides(draws=50, tune=50, chains=2),
            random_seed=2,
        )


def test_gate_opt_out_is_recorded():
    rel = MECH.release(
        DATA,
        sampler="metropolis",
        settings=INPROC.with_overrides(draws=50, tune=50, chains=2),
        random_seed=2,
        skip_diagnostics=True,
    )
    assert rel.opt_outs == ("skip_diagnostics",)  # the name only: no data-dependent numbers
    assert rel.public()["opt_outs"] == list(rel.opt_outs)
