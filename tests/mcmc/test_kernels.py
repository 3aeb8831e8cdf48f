"""Chains and kernels on batches (pymc_manidp.mcmc.kernels).

Oracles: PyMC's own compiled log-density and gradient (the batched target), the
Metropolis acceptance probability min(1, f'/f) in closed form, the closed-form meeting
probability of a maximal coupling, and the stationary law of a Gaussian target reached
by many independent chains from far away. Statistical tests fix the seed and use
α = 0.01; each acceptance is paired with a variant the same statistic rejects.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_manidp.mcmc import kernels as K

ALPHA = 0.01


# ------------------------------------------------------------------ the Metropolis step


def test_log_uniform_is_the_log_of_a_uniform_and_never_minus_infinity():
    # KS of exp(log U) against U(0, 1), n = 20,000, alpha = 0.01; the value at u = 0
    # (NumPy's uniforms include 0) is 0, not -inf
    u = np.exp(K.log_uniform(np.random.default_rng(0), 20_000))
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert stats.kstest(u**2, "uniform").pvalue < ALPHA

    class Zero:
        def random(self, size):
            return np.zeros(size)

    assert np.all(K.log_uniform(Zero(), 3) == 0.0)


def test_metropolis_accept_edge_cases():
    log_u = np.log(np.full(6, 0.5))
    new = np.array([0.0, -np.inf, np.nan, -np.inf, -0.5, -1.0])
    old = np.array([-1.0, 0.0, 0.0, -np.inf, 0.0, 0.0])
    # better, -inf proposal, NaN proposal, -inf from -inf, ratio 0.61 > 0.5, 0.37 < 0.5
    assert K.metropolis_accept(log_u, new, old).tolist() == [True, False, False, False, True, False]


def test_metropolis_step_accepts_with_probability_min_one_ratio():
    # a proposal one unit up with log f(x) = -x log 3: accepted with probability 1/3
    # (binomial test, n = 20,000 rows, alpha = 0.01); a wrong rule min(1, sqrt(ratio))
    # (0.577) is rejected by the same test. Rejected rows keep their state and lp.
    n = 20_000
    q, lp = np.zeros((n, 1)), np.zeros(n)

    def log_density(x):
        return -x[:, 0] * np.log(3.0)

    q2, lp2, acc = K.metropolis_step(
        log_density, q, lp, lambda x, rng: x + 1.0, np.random.default_rng(1)
    )
    k = int(acc.sum())
    assert stats.binomtest(k, n, 1 / 3).pvalue > ALPHA
    assert stats.binomtest(k, n, 3**-0.5).pvalue < ALPHA
    assert np.all(q2[acc] == 1.0) and np.all(q2[~acc] == 0.0)
    np.testing.assert_allclose(lp2, np.where(acc, -np.log(3.0), 0.0))


def test_metropolis_step_keeps_any_point_shape():
    # rows of 2 x 2 points: a row moves as a whole or not at all
    q = np.zeros((500, 2, 2))

    def log_density(x):
        return -np.abs(x).sum(axis=(1, 2))

    q2, _, acc = K.metropolis_step(
        log_density,
        q,
        log_density(q),
        lambda x, rng: x + rng.normal(size=x.shape),
        np.random.default_rng(2),
    )
    assert 0 < acc.sum() < 500
    assert np.all(q2[~acc] == 0.0) and np.all(q2[acc] != 0.0)


# ------------------------------------------------------------------ the chain loop


def test_run_chain_keeps_copies_at_the_asked_times_and_counts_acceptances():
    def in_place(q, lp, rng):  # mutates its input: kept states must not alias it
        q += 1.0
        acc = q[:, 0] % 2 == 0  # rows accept at even states
        return q, lp, acc

    q0 = np.zeros((3, 1))
    run = K.run_chain(in_place, q0, np.zeros(3), 6, None, keep=[6, 1, 3, 3])
    assert run.times.tolist() == [1, 3, 6]
    assert run.states[:, 0, 0].tolist() == [1.0, 3.0, 6.0]
    assert run.q[:, 0].tolist() == [6.0, 6.0, 6.0]
    assert run.accepted.tolist() == [0, 3, 0, 3, 0, 3]
    assert run.log_density.shape == (3, 3)
    with pytest.raises(ValueError, match=r"\[0, 6\]"):
        K.run_chain(in_place, q0, np.zeros(3), 6, None, keep=[7])
    with pytest.raises(TypeError, match="steps"):
        K.run_chain(in_place, q0, np.zeros(3), 2.5, None)


# ------------------------------------------------------------------ the batched target


def test_batch_target_matches_pymc_compiled_logp_and_gradient():
    # a model with a transform (log for HalfNormal) and a vector variable
    with pm.Model() as model:
        a = pm.Normal("a", 1.0, 2.0, shape=2)
        b = pm.HalfNormal("b", 1.5)
        pm.Normal("c", a.sum(), b, shape=3)
    target = K.BatchTarget(model)
    rng = np.random.default_rng(1)
    q = rng.normal(size=(7, target.dim))
    lp, grad = target.logp_grad(q)
    f, df = model.compile_logp(jacobian=True), model.compile_dlogp(jacobian=True)
    from pymc.blocking import DictToArrayBijection, RaveledVars

    info = DictToArrayBijection.map(model.initial_point()).point_map_info
    for i in range(len(q)):
        point = DictToArrayBijection.rmap(RaveledVars(q[i], info))
        assert np.isclose(lp[i], f(point), rtol=1e-10)
        np.testing.assert_allclose(grad[i], df(point), rtol=1e-10)
    np.testing.assert_allclose(target.logp(q), lp)
    # a deterministic of the free variables: b = exp(b_log__)
    with model:
        pm.Deterministic("b_again", b * 1.0)
    np.testing.assert_allclose(target.deterministic("b_again", q), np.exp(q[:, 2]))
    with pytest.raises(ValueError, match=r"\(batch, 6\)"):
        target.logp(q[:, :2])


# ------------------------------------------------------------------ kernels and their couplings


def test_reflection_maximal_coupling_marginals_and_meeting_probability():
    # N = 20,000 pairs, alpha = 0.01. Both marginals are N(mu, s^2 I) and the proposals
    # coincide with probability 1 - TV = 2 Phi(-|mu_x - mu_y| / (2 s)), the maximum.
    rng = np.random.default_rng(3)
    n, s = 20_000, 0.7
    mu_x = np.tile([0.3, -0.2, 0.5], (n, 1))
    mu_y = np.tile([0.9, 0.1, 0.2], (n, 1))
    x, y, same = K.reflection_maximal(mu_x, mu_y, s, rng)
    for draws, mu in ((x, mu_x), (y, mu_y)):
        for j in range(3):
            assert stats.kstest((draws[:, j] - mu[0, j]) / s, "norm").pvalue > ALPHA
    assert np.array_equal(same, np.all(x == y, axis=1))
    p = 2 * stats.norm.cdf(-np.linalg.norm(mu_x[0] - mu_y[0]) / (2 * s))
    assert stats.binomtest(int(same.sum()), n, p).pvalue > ALPHA
    # a coupling that is not maximal (independent proposals) never meets: caught
    indep = mu_y + s * rng.standard_normal(mu_y.shape)
    assert stats.binomtest(int(np.all(x == indep, axis=1).sum()), n, p).pvalue < ALPHA


@pytest.mark.parametrize("kernel", [K.RWMH(1.2), K.HMC(0.4, 4, mh_prob=0.2)], ids=["rwmh", "hmc"])
def test_kernels_leave_the_target_invariant_and_keep_met_pairs_together(kernel):
    # 2,000 independent chains of a N(1, 2^2) x N(0, 1) target from far away (x + 8):
    # KS of each coordinate against its law at t = 150 (alpha = 0.01), and at t = 2
    # the same test rejects (the transient is seen).
    with pm.Model() as model:
        pm.Normal("a", 1.0, 2.0)
        pm.Normal("b", 0.0, 1.0)
    target = K.BatchTarget(model)

    def init(size, rng):
        return rng.normal(size=(size, 2)) + 8.0

    out = K.draw_chain(target, kernel, 150, 2000, init=init, random_seed=4, record=[2, 500])
    assert sorted(out) == [2, 150]  # a time past t is not a state of this run
    assert stats.kstest((out[150][:, 0] - 1.0) / 2.0, "norm").pvalue > ALPHA
    assert stats.kstest(out[150][:, 1], "norm").pvalue > ALPHA
    assert stats.kstest(out[2][:, 1], "norm").pvalue < ALPHA
    # coupled steps: equal pairs stay equal, unequal pairs meet eventually
    rng = np.random.default_rng(5)
    q = rng.normal(size=(50, 2))
    lp = target.logp(q)
    qx, _, qy, _ = kernel.coupled_step(target, q, lp, q.copy(), lp.copy(), rng)
    assert np.array_equal(qx, qy)
    tau = K.meeting_times(target, kernel, lag=5, reps=50, random_seed=6, max_iter=5000)
    assert np.all(tau > 5)


def test_draw_chain_is_reproducible_and_starts_from_the_initial_law():
    with pm.Model() as model:
        pm.Normal("a", 0.0, 1.0, shape=2)
    target = K.BatchTarget(model)
    a = K.draw_chain(target, K.RWMH(0.5), 20, 10, random_seed=7)
    b = K.draw_chain(target, K.RWMH(0.5), 20, 10, random_seed=7)
    np.testing.assert_array_equal(a, b)
    # t = 0 returns draws of the initial law: PyMC's start jittered by U(-1, 1)
    start = K.draw_chain(target, K.RWMH(0.5), 0, 4000, random_seed=8)
    assert stats.kstest(start[:, 0], stats.uniform(-1, 2).cdf).pvalue > ALPHA


def test_unmet_pairs_raise_instead_of_giving_a_bound():
    with pm.Model() as model:
        pm.Normal("a", 0.0, 1.0, shape=3)
    target = K.BatchTarget(model)
    with pytest.raises(K.CouplingError, match="did not meet"):
        K.meeting_times(target, K.RWMH(0.01), lag=1, reps=20, max_iter=3, random_seed=0)


def test_tune_kernel_reaches_its_acceptance_goal():
    # RWMH tuned to 0.3 on a 3-d standard normal: the tuned kernel's acceptance over
    # 200 chains x 200 steps lies within 0.2-0.4 (the optimum 2.38/sqrt(d) gives ~0.35);
    # an untuned tiny step (0.05) accepts almost always and is outside
    with pm.Model() as model:
        pm.Normal("a", 0.0, 1.0, shape=3)
    target = K.BatchTarget(model)
    kernel = K.tune_kernel(target, "rwmh", random_seed=9)

    def rate(k):
        rng = np.random.default_rng(10)
        q = rng.normal(size=(200, 3))
        run = K.run_chain(lambda q, lp, r: k.step(target, q, lp, r), q, target.logp(q), 200, rng)
        return run.accepted.sum() / (200 * 200)

    assert 0.2 < rate(kernel) < 0.4
    assert rate(K.RWMH(0.05)) > 0.9
    with pytest.raises(ValueError, match="'rwmh' or 'hmc'"):
        K.tune_kernel(target, "nuts")
