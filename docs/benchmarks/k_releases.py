"""One (epsilon = 1, delta = 1e-6) budget spent on k releases of the same data (issue 39).

For k = 1, 4, 16, 64 releases of the Fréchet mean of one public synthetic data set
(n = 1000 records in the public ball), the per-release budget is the largest every
mechanism may take so that the k releases fit the budget under the best valid
composition the package offers, checked by ``pmd.PrivacyBudget(1, delta=1e-6,
composition="optimal", plan=[...] * k)`` (which refuses a plan that does not fit):

- pure ε (tangent Laplace, manifold Laplace): the largest ε_k whose k-fold composition
  (privacy loss distributions, dp_accounting; at k = 1 the budget's ε itself) is within
  (1, 1e-6), found by bisection; ``1/k`` (basic composition) is printed beside it;
- tangent Gaussian: μ_k = μ(1, 1e-6)/sqrt(k) (μ-GDP composes as sqrt(sum μ_i^2)), as the
  charge (ε_k, δ_k = 1e-6/k) with gaussian_mu(ε_k, δ_k) <= μ_k.

It prints the mean geodesic error rho(y, x_bar) of a release over ``reps`` draws (exact
samplers, no MCMC) on S^2 (r = pi/8) and SPD(2) (affine-invariant, r = 1). Run:
``python docs/benchmarks/k_releases.py [reps]`` (default 400 draws).
"""

from __future__ import annotations

import math
import sys

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.mechanisms.base import converged_mean
from pymc_manidp.stats.gaussian import gaussian_mu, gdp_epsilon

EPSILON, DELTA, N = 1.0, 1e-6, 1000
KS = (1, 4, 16, 64)


def pure_epsilon(k: int) -> float:
    """The largest ε whose k-fold optimal composition is (1, 1e-6)-DP (bisection on
    dp_accounting's PLD, then checked by the package's budget)."""
    if k == 1:
        return EPSILON
    from dp_accounting.pld import common, privacy_loss_distribution

    def total(eps):
        pld = privacy_loss_distribution.from_privacy_parameters(
            common.DifferentialPrivacyParameters(eps, 0.0)
        )
        return pld.self_compose(k).get_epsilon_for_delta(DELTA)

    lo, hi = EPSILON / k, EPSILON
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) <= EPSILON else (lo, mid)
    eps = float(f"{lo:.6g}")
    while True:  # the package's own check (its PLD composes one by one)
        try:
            pmd.PrivacyBudget(EPSILON, delta=DELTA, composition="optimal", plan=[(eps, 0.0)] * k)
            return eps
        except ValueError:
            eps = float(f"{eps * 0.999:.6g}")


def gaussian_charge(k: int) -> tuple[float, float]:
    """``(epsilon_k, delta_k)`` of a per-release μ ≤ μ(1, 1e-6)/sqrt(k)."""
    mu_k = gaussian_mu(EPSILON, DELTA) / math.sqrt(k)
    delta_k = DELTA / k
    eps_k = float(f"{gdp_epsilon(mu_k, delta_k):.6g}")
    while gaussian_mu(eps_k, delta_k) > mu_k:
        eps_k = float(f"{eps_k * 0.9999:.6g}")
    return eps_k, delta_k


def error(mech, data, mean, reps) -> float:
    M = mech.manifold
    values = mech.release_many([data] * reps, random_seed=list(range(reps))).values
    return float(np.mean([M.dist(v, mean) for v in values]))


def main(reps: int = 400) -> None:
    spaces = {
        "S2": (pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8),
        "SPD(2)": (pmd.SPD(k=2), np.eye(2), 1.0),
    }
    print(
        f"budget (eps, delta) = ({EPSILON:g}, {DELTA:g}), n = {N}, {reps} releases per cell; "
        "mean geodesic error per release"
    )
    header = (
        "| space | k | eps_k pure (basic 1/k) | tangent Laplace | manifold Laplace "
        "| (eps_k, delta_k) Gaussian, mu_k | tangent Gaussian |"
    )
    print(header)
    print("|" + "---|" * 7)
    for name, (M, c, r) in spaces.items():
        rng = np.random.default_rng(0)
        data = M.exp_coords(c, rng.uniform(-0.5, 0.5, (N, M.dim)) * r / math.sqrt(M.dim))
        for k in KS:
            eps_k = pure_epsilon(k)
            g_eps, g_delta = gaussian_charge(k)
            gauss = pmd.TangentGaussianMechanism(
                M, epsilon=g_eps, delta=g_delta, center=c, radius=r
            )
            pmd.PrivacyBudget(
                EPSILON, delta=DELTA, composition="optimal", plan=[gauss.planned_charge] * k
            )  # refuses a plan that does not fit
            tl = pmd.TangentLaplaceMechanism(M, epsilon=eps_k, center=c, radius=r)
            ml = pmd.LaplaceMechanism(M, epsilon=eps_k, center=c, radius=r)
            mean = converged_mean(M, tl.domain, tl.domain.check(data), tl.grad_tol)
            row = [error(m, data, mean, reps) for m in (tl, ml, gauss)]
            print(
                f"| {name} | {k} | {eps_k:.4g} ({1 / k:.4g}) | {row[0]:.4f} | {row[1]:.4f} "
                f"| ({g_eps:.4g}, {g_delta:.3g}), {gauss.planned_charge[2]:.4f} | {row[2]:.4f} |"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
