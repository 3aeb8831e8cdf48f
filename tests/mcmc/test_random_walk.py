"""The supplement's random-walk Metropolis–Hastings (§1.5) samples the manifold Laplace.

Oracles: the exact radial law of the Laplace on S^2 (tests/radial.py, written
independently of the library) and the law of the proposal's step length. Statistical
tests use fixed seeds and α = 0.01; KS p-values of MCMC draws use the bulk ESS as the
sample size (tests.radial.mcmc_ks). Each test that accepts is paired with a wrong
variant the same statistic rejects.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.mcmc.random_walk import propose, random_walk_mh
from tests.radial import mcmc_ks, radial_cdf

ALPHA = 0.01
S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
SIGMA = 0.3  # large enough for the sphere's curvature to shape the radial law


def laplace_logp(x, sigma=SIGMA):
    return -S2.dist(NORTH, x) / sigma


def run(step, seed, logp=laplace_logp, draws=1000):
    # burn-in and thinning reduced from the supplement's 10,000 / 100 to keep the
    # default test run short; the law does not depend on them
    return random_walk_mh(
        logp, NORTH, manifold=S2, step=step, draws=draws, burn_in=1000, thin=10, chains=4, rng=seed
    )


@pytest.fixture(scope="module")
def faithful():
    """4 chains x 1,000 draws with the supplement's step = sigma."""
    return run(SIGMA, seed=1)


def accepted_only(step, n_keep, *, chains=4, thin=5, seed=2):
    """Wrong variant: the supplement's step 4 read literally, keeping only accepted moves."""
    rng = np.random.default_rng(seed)
    x = np.broadcast_to(NORTH, (chains, 3)).copy()
    lp = laplace_logp(x)
    out = np.empty((chains, n_keep, 3))
    count = np.zeros(chains, int)
    while count.min() < n_keep * thin:
        prop = propose(S2, x, step, rng)
        lp_prop = laplace_logp(prop)
        acc = np.log1p(-rng.random(chains)) < lp_prop - lp
        x[acc] = prop[acc]
        lp = np.where(acc, lp_prop, lp)
        count += acc
        keep = acc & (count % thin == 0) & (count <= n_keep * thin)
        out[keep, count[keep] // thin - 1] = x[keep]
    return out


def projected_length_cdf(s):
    # |v|/step for a uniform point of the radius-step sphere of R^3 projected onto a
    # plane: sin(theta) with cos(theta) uniform on [-1, 1]
    s = np.clip(s, 0.0, 1.0)
    return 1.0 - np.sqrt(1.0 - s**2)


def test_proposal_is_the_supplements_projected_uniform_vector():
    """Step lengths follow the projection law (KS, 20,000 proposals, α = 0.01), the
    proposal stays on the sphere, and a uniform-in-the-disc step is rejected."""
    rng = np.random.default_rng(3)
    g = rng.normal(size=(20_000, 3))
    x = g / np.linalg.norm(g, axis=-1, keepdims=True)
    step = 0.4
    prop = propose(S2, x, step, rng)
    np.testing.assert_allclose(np.linalg.norm(prop, axis=-1), 1.0, atol=1e-12)
    lengths = S2.dist(x, prop) / step
    assert lengths.max() <= 1.0 + 1e-9
    assert stats.kstest(lengths, projected_length_cdf).pvalue > ALPHA
    uniform_disc = np.sqrt(rng.random(20_000))  # |v|/step of a uniform point of the disc
    assert stats.kstest(uniform_disc, projected_length_cdf).pvalue < ALPHA


def test_samples_the_laplace_radial_law_on_s2(faithful):
    """KS of the geodesic distance against the exact radial law, 4 x 1,000 draws,
    α = 0.01, n = bulk ESS."""
    dist = S2.dist(NORTH, faithful.draws)
    _, p, ess = mcmc_ks(dist, radial_cdf(S2, SIGMA, np.pi))
    assert ess > 500
    assert p > ALPHA
    assert 0.5 < faithful.acceptance_rate < 0.95


def test_direction_is_uniform(faithful):
    """The azimuth of the draws is uniform (KS, α = 0.01, n = bulk ESS)."""
    az = np.arctan2(faithful.draws[..., 1], faithful.draws[..., 0])
    _, p, _ = mcmc_ks(az, stats.uniform(-np.pi, 2 * np.pi).cdf)
    assert p > ALPHA


def test_ks_rejects_a_wrong_rate(faithful):
    """The same statistic rejects the radial law of a 15% larger sigma."""
    dist = S2.dist(NORTH, faithful.draws)
    _, p, _ = mcmc_ks(dist, radial_cdf(S2, 1.15 * SIGMA, np.pi))
    assert p < ALPHA


def test_recording_only_accepted_moves_is_caught():
    """With step = 2 sigma (acceptance ~0.6) the correct chain passes and the
    accepted-moves-only chain fails the radial KS test (4 x 1,000 draws, α = 0.01)."""
    cdf = radial_cdf(S2, SIGMA, np.pi)
    good = random_walk_mh(
        laplace_logp, NORTH, manifold=S2, step=2 * SIGMA, draws=1000, burn_in=1000, thin=5, rng=2
    )
    assert mcmc_ks(S2.dist(NORTH, good.draws), cdf)[1] > ALPHA
    bad = accepted_only(2 * SIGMA, 1000)
    assert mcmc_ks(S2.dist(NORTH, bad), cdf)[1] < ALPHA


def test_restricted_support_is_never_left():
    """A -inf log-density outside a ball keeps every draw inside it."""
    radius = 0.2

    def restricted(x):
        d = S2.dist(NORTH, x)
        return np.where(d <= radius, -d / SIGMA, -np.inf)

    res = run(SIGMA, seed=4, logp=restricted, draws=200)
    assert np.all(S2.dist(NORTH, res.draws) <= radius)
    assert np.all(np.isfinite(res.log_density))


def test_shapes_and_thinning_bookkeeping():
    res = random_walk_mh(
        laplace_logp, NORTH, manifold=S2, step=0.1, draws=7, burn_in=3, thin=4, chains=3, rng=0
    )
    assert res.draws.shape == (3, 7, 3)
    assert res.log_density.shape == (3, 7)
    assert res.steps == 3 + 7 * 4
    np.testing.assert_allclose(res.log_density, laplace_logp(res.draws))


def reference_chain(log_density, step, *, draws, burn_in, thin, chains, seed):
    """The supplement's algorithm as a plain loop, one chain at a time (independent of
    the library's kernels; only the frame ``S2.tangent_basis`` is the library's, since
    it fixes which tangent vector a pair of coordinates is).

    Random numbers per step, as ``random_walk_mh`` consumes them: a ``(chains, 3)``
    block of normals, then one uniform ``u`` per chain; a move is accepted when
    ``log(1 - u) < log f(x') - log f(x)`` (``1 - u`` is uniform on (0, 1]).
    """
    rng = np.random.default_rng(seed)
    x = [NORTH.copy() for _ in range(chains)]
    lp = [float(log_density(NORTH[None])[0])] * chains
    kept, kept_lp, accepted = [], [], 0
    for i in range(burn_in + draws * thin):
        g = rng.standard_normal((chains, 3))
        u = rng.random(chains)
        for c in range(chains):
            coords = step * g[c, :2] / np.linalg.norm(g[c])
            v = coords @ S2.tangent_basis(x[c])  # (2,) @ (2, 3): a tangent vector at x
            theta = np.linalg.norm(v)
            prop = np.cos(theta) * x[c] + np.sin(theta) * v / theta  # exp_x(v) on S^2
            lp_prop = float(log_density(prop[None])[0])
            if np.log(1.0 - u[c]) < lp_prop - lp[c]:
                x[c], lp[c] = prop, lp_prop
                accepted += i >= burn_in
        if i >= burn_in and (i - burn_in + 1) % thin == 0:
            kept.append(np.array(x))
            kept_lp.append(list(lp))
    rate = accepted / (chains * draws * thin)
    return np.swapaxes(np.array(kept), 0, 1), np.array(kept_lp).T, rate


@pytest.mark.parametrize("restricted_radius", [None, 0.25], ids=["whole", "restricted"])
def test_a_short_chain_equals_the_plain_loop(restricted_radius):
    """3 chains, burn-in 5, thin 3, 20 draws (seed 11) equal the reference loop up to
    rounding: the same states, log-densities and acceptance rate. The restricted case
    (-inf outside a ball of radius 0.25, step 0.3) exercises rejections of -inf."""

    def logp(x):
        d = S2.dist(NORTH, x)
        if restricted_radius is None:
            return -d / SIGMA
        return np.where(d <= restricted_radius, -d / SIGMA, -np.inf)

    settings = {"draws": 20, "burn_in": 5, "thin": 3, "chains": 3}
    res = random_walk_mh(logp, NORTH, manifold=S2, step=SIGMA, rng=11, **settings)
    draws, lp, rate = reference_chain(logp, SIGMA, seed=11, **settings)
    assert 0.2 < rate < 0.95  # both accepted and rejected moves are compared
    np.testing.assert_allclose(res.draws, draws, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.log_density, lp, rtol=0, atol=1e-12)
    assert res.acceptance_rate == rate
    # the pin is sharp: another seed gives another chain
    other = random_walk_mh(logp, NORTH, manifold=S2, step=SIGMA, rng=12, **settings)
    assert not np.allclose(other.draws, draws)


def test_same_seed_same_chain():
    a = run(SIGMA, seed=5, draws=20)
    b = run(SIGMA, seed=5, draws=20)
    np.testing.assert_array_equal(a.draws, b.draws)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"step": np.pi}, ValueError, "injectivity"),
        ({"step": 0.0}, ValueError, "step"),
        ({"draws": 0}, ValueError, "draws"),
        ({"thin": 1.5}, TypeError, "thin"),
        ({"start": np.zeros((2, 3)) + NORTH}, ValueError, "shape"),
        ({"log_density": "not callable"}, TypeError, "callable"),
        ({"log_density": lambda x: np.full(len(x), -np.inf)}, ValueError, "start"),
    ],
)
def test_argument_errors(kwargs, error, match):
    args = {"log_density": laplace_logp, "start": NORTH, "step": 0.1, "draws": 5, "chains": 4}
    args.update(kwargs)
    logp, start = args.pop("log_density"), args.pop("start")
    with pytest.raises(error, match=match):
        random_walk_mh(logp, start, manifold=S2, **args)
