"""Benchmark (issue 26): one exact KNG release on S² against an efficient NumPy MH.

Target: KNG on the Fréchet mean, ε = 1, n = 1,000, public ball B_{π/8}(north pole), data
from ``datasets.sphere_cap(1000, radius=π/8, random_seed=0)``; one release (a single
private value).

1. exact: ``KNGMechanism(Sphere(dim=2), epsilon=1, center=north, radius=π/8)
   .release(data, random_seed=i)``, the default path, timed call by call (data check,
   calibration, Fréchet mean, envelope, rejection, the Release record).
2. an *efficient NumPy* version of the 2021 supplement's random-walk MH (§1.5): start at
   the data's Fréchet mean (the supplement's gradient descent §1.1, step 0.5, in NumPy),
   step σ (the supplement's proposal: a Gaussian in R³ rescaled to length σ, projected on
   the tangent plane, then the exponential map), burn-in 10,000 steps, the next state is
   the release. KNG's log-density ``-|(1/n) Σ Log_x(x_i)| / σ`` (``-inf`` outside the
   ball) is written directly in vectorized NumPy on the n × 3 array: no PyTensor, no
   ``mech.logp``, no data check inside the loop (the data are checked once per release,
   by the cheap norm test a NumPy user would write); all the chain's random numbers are
   drawn in one call. Its log-density is checked against ``mech.logp`` (equal up to a
   constant) at a few points before timing.

3. the arithmetic floor: the passes over the n records one exact release makes, called
   directly with the same arrays and nothing else (the data's check ``Sphere.validate``,
   the distances to the center, the Fréchet gradient at the center fused with that scan,
   the two Newton passes of the Fréchet mean, one pass for a round of 4 proposals). No
   release that keeps this arithmetic can be faster, so MH / floor bounds the ratio any
   rewrite of the Python around it could reach.

Rounds are interleaved (the machine may be loaded): each round times ``EXACT_PER_ROUND``
exact releases and as many floors, then one MH release. Medians over all rounds; the
ratio is MH median / exact median, and also the median of the per-round ratios (each
round's two medians measured within a second of each other).

Run:  PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/bench_release_overhead.py
      (about 15 s; ``--rounds R`` to change the number of rounds, default 12)
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
import warnings

import numpy as np

import pymc_manidp as pmd
from pymc_manidp.datasets import sphere_cap

N = 1000
EPSILON = 1.0
RADIUS = np.pi / 8
NORTH = np.array([0.0, 0.0, 1.0])
BURN_IN = 10_000
EXACT_PER_ROUND = 40
WARMUP = 30


# --- the efficient NumPy MH -----------------------------------------------------------------
def np_log_density(x, data, sigma, center, radius):
    """KNG's log-density at one point ``x`` (3,) for data (n, 3) on the unit S².

    ``Log_x(y) = θ/|u| u`` with ``u = y - <x, y> x``, ``θ = atan2(|u|, <x, y>)``.
    """
    c = data @ x
    u = data - c[:, None] * x
    su = np.sqrt(np.einsum("ij,ij->i", u, u))
    theta = np.arctan2(su, c)
    fac = np.divide(theta, su, out=np.ones_like(su), where=su > 0)
    g = (fac @ u) / len(data)
    # the ball: the same atan2 angle from the center
    cc = center @ x
    inside = np.arctan2(np.linalg.norm(x - cc * center), cc) <= radius
    return -np.sqrt(g @ g) / sigma if inside else -np.inf


def np_frechet_mean(data, tol=1e-5, max_iter=500):
    """The 2021 supplement's gradient descent (§1.1): step 0.5, stop when a step moves less
    than ``tol``; started at the normalized ambient mean."""
    x = data.mean(axis=0)
    x /= np.linalg.norm(x)
    for _ in range(max_iter):
        c = data @ x
        u = data - c[:, None] * x
        su = np.sqrt(np.einsum("ij,ij->i", u, u))
        fac = np.divide(np.arctan2(su, c), su, out=np.ones_like(su), where=su > 0)
        v = 0.5 * (fac @ u) / len(data)
        t = np.linalg.norm(v)
        x = np.cos(t) * x + (np.sin(t) / t if t > 0 else 1.0) * v
        x /= np.linalg.norm(x)
        if t < tol:
            break
    return x


def np_mh_release(data, sigma, center, radius, seed, burn_in=BURN_IN):
    """One release by the supplement's MH: ``burn_in`` steps, the next state is released."""
    # the data check a NumPy user would write: finite, on the sphere, in the ball
    norms = np.linalg.norm(data, axis=1)
    if not (np.all(np.isfinite(data)) and np.all(np.abs(norms - 1.0) < 1e-6)):
        raise ValueError("records off the sphere")
    data = data / norms[:, None]
    cc = data @ center
    if not np.all(np.arctan2(np.linalg.norm(data - cc[:, None] * center, axis=1), cc) <= radius):
        raise ValueError("records outside the ball")
    rng = np.random.default_rng(seed)
    x = np_frechet_mean(data)
    lp = np_log_density(x, data, sigma, center, radius)
    steps = burn_in + 1
    gauss = rng.standard_normal((steps, 3))
    gauss *= sigma / np.linalg.norm(gauss, axis=1, keepdims=True)
    log_u = np.log(rng.random(steps))
    for k in range(steps):
        v = gauss[k] - (gauss[k] @ x) * x  # |v| <= sigma: the supplement's projection
        t = np.sqrt(v @ v)
        y = np.cos(t) * x + (np.sin(t) / t) * v
        y /= np.sqrt(y @ y)
        lp_y = np_log_density(y, data, sigma, center, radius)
        if log_u[k] < lp_y - lp:
            x, lp = y, lp_y
    return x


def check_log_density(mech, data, sigma):
    """The NumPy log-density equals ``mech.logp`` up to a constant (here: exactly 0)."""
    rng = np.random.default_rng(5)
    mode = np_frechet_mean(data)
    S = mech.manifold
    pts = S.exp_coords(mode, 3 * sigma * rng.normal(size=(6, 2)))
    ours = np.array([np_log_density(p, data, sigma, NORTH, RADIUS) for p in pts])
    ref = mech.logp(pts, data)
    diff = ours - ref
    np.testing.assert_allclose(diff, diff[0], atol=1e-9)
    far = S.exp_coords(NORTH, np.array([[0.5, 0.0]]))[0]  # outside B_{pi/8}
    assert np_log_density(far, data, sigma, NORTH, RADIUS) == -np.inf == mech.logp(far, data)
    return float(np.max(np.abs(diff - diff[0])))


def arithmetic_floor(mech, data):
    """The passes over ``data`` one exact release makes, as a function of no arguments."""
    S, domain = mech.manifold, mech.domain
    ones = np.ones(len(data))
    x_hat = pmd.frechet_mean(S, data).mean
    xs = S.exp_coords(
        x_hat, mech.sigma(len(data)) * np.eye(2)[[0, 1, 0, 1]] * [[1], [1], [-1], [-1]]
    )

    def passes():
        checked = S.validate(data)
        domain.distances(checked)
        S.frechet_gradient(domain.center, checked, ones)
        S._log_mean(x_hat, checked, ones, True)
        S._log_mean(x_hat, checked, ones, True)
        S.frechet_gradients(xs, checked, ones)

    return passes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    load0 = os.getloadavg()
    print(f"date {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, numpy {np.__version__}")
    print(f"pymc_manidp from {os.path.dirname(pmd.__file__)}")
    print(f"load average at start (1, 5, 15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    S = pmd.Sphere(dim=2)
    mech = pmd.KNGMechanism(S, epsilon=EPSILON, center=NORTH, radius=RADIUS)
    data = sphere_cap(N, radius=RADIUS, random_seed=0)
    sigma = mech.sigma(N)
    dev = check_log_density(mech, data, sigma)
    print(f"sigma = {sigma:.6g}; NumPy log-density - mech.logp: constant (spread {dev:.1e})")

    for i in range(WARMUP):
        mech.release(data, random_seed=10**6 + i)
    np_mh_release(data, sigma, NORTH, RADIUS, seed=0, burn_in=200)

    floor = arithmetic_floor(mech, data)
    for _ in range(WARMUP):
        floor()
    ex_times, mh_times, ratios, proposals, floor_times = [], [], [], 0, []
    for r in range(args.rounds):
        ts = []
        for _ in range(EXACT_PER_ROUND):
            seed = len(ex_times) + len(ts)
            t0 = time.perf_counter()
            rel = mech.release(data, random_seed=seed)
            ts.append(time.perf_counter() - t0)
            proposals += rel.sampler_info["proposals"]
        for _ in range(EXACT_PER_ROUND):
            t0 = time.perf_counter()
            floor()
            floor_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np_mh_release(data, sigma, NORTH, RADIUS, seed=100 + r)
        mh = time.perf_counter() - t0
        ex_times += ts
        mh_times.append(mh)
        ratios.append(mh / np.median(ts))
        print(
            f"  round {r + 1}: exact median {np.median(ts) * 1e3:.3f} ms, MH {mh:.3f} s, "
            f"ratio {ratios[-1]:,.0f}",
            flush=True,
        )
    load1 = os.getloadavg()
    ex, mh = float(np.median(ex_times)), float(np.median(mh_times))
    print(
        f"\nexact: {len(ex_times)} releases, median {ex * 1e3:.3f} ms (quartiles "
        f"{np.percentile(ex_times, 25) * 1e3:.3f} / {np.percentile(ex_times, 75) * 1e3:.3f}), "
        f"acceptance {len(ex_times) / proposals:.2f}"
    )
    fl = float(np.median(floor_times))
    print(
        f"arithmetic floor (the release's passes over the records alone): median "
        f"{fl * 1e3:.3f} ms, {fl / ex:.0%} of a release; MH / floor {mh / fl:,.0f}"
    )
    print(f"NumPy MH (burn-in {BURN_IN:,}): {len(mh_times)} releases, median {mh:.3f} s")
    print(
        f"ratio MH / exact: {mh / ex:,.0f} (medians); per round: median "
        f"{np.median(ratios):,.0f}, range {min(ratios):,.0f}-{max(ratios):,.0f}"
    )
    print(f"load average at end (1, 5, 15 min): {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
