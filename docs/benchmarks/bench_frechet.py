"""Benchmark: time to a Fréchet mean with relative gradient norm <= 1e-10.

Side by side in one process, same data:
- SPD(2), SPD(8), n = 10^4: pymc_manidp.frechet_mean against pyRiemann's
  ``mean_riemann`` (default settings, and asked for a tight tolerance);
- S^2, n = 10^5 and 10^6: against a plain gradient-descent Karcher flow written here
  (unit step, arccos-based log, start at the first point).

The achieved accuracy of every method is measured the same way: the Riemannian norm
of the mean log vector at the returned point divided by the RMS distance to the data.

Run:  .venv/bin/pip install -e ".[bench]" && .venv/bin/python docs/benchmarks/bench_frechet.py
"""

from __future__ import annotations

import platform
import time
import warnings

import numpy as np

import pymc_manidp as pmd

REPEATS = 5


def _timed(fn):
    best, out = np.inf, None
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    best = float(np.median(times))
    return best, out


def _rel_grad(M, x, data):
    g = M.log(x, data).mean(axis=0)
    return float(M.norm(x, g) / np.sqrt(np.mean(M.dist(x, data) ** 2)))


def _spd_data(k, n, rng):
    a = rng.normal(size=(n, k, k)) * 0.3
    w, u = np.linalg.eigh(0.5 * (a + np.swapaxes(a, -1, -2)))
    return (u * np.exp(w)[..., None, :]) @ np.swapaxes(u, -1, -2)


def _sphere_data(n, rng):
    # the supplement's generator: polar angle uniform on [0, pi/8] around the north pole
    th = rng.uniform(0, np.pi / 8, n)
    ph = rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


def plain_karcher_sphere(data, tol=1e-10, max_iter=1000):
    """Textbook Karcher flow on the unit sphere: x <- exp_x(mean_i log_x(x_i))."""
    x = data[0]
    for _ in range(max_iter):
        c = np.clip(data @ x, -1.0, 1.0)
        th = np.arccos(c)
        u = data - c[:, None] * x
        nu = np.linalg.norm(u, axis=1)
        fac = np.where(nu > 0, th / np.where(nu > 0, nu, 1.0), 0.0)
        g = (fac[:, None] * u).mean(axis=0)
        gn = np.linalg.norm(g)
        if gn <= tol * np.sqrt(np.mean(th**2)):
            break
        x = np.cos(gn) * x + np.sin(gn) * g / gn
    return x


def main():
    from pyriemann.utils.mean import mean_riemann

    warnings.simplefilter("ignore", DeprecationWarning)
    rng = np.random.default_rng(2021)
    rows = []
    for k in (2, 8):
        P = pmd.SPD(k=k)
        X = _spd_data(k, 10_000, rng)
        t_ours, res = _timed(lambda X=X, P=P: pmd.frechet_mean(P, X))
        t_pr, m_pr = _timed(lambda X=X: mean_riemann(X))
        t_pt, m_pt = _timed(lambda X=X: mean_riemann(X, tol=1e-14, maxiter=500))
        rows.append(
            (
                f"SPD({k}), n=10^4",
                "pymc_manidp.frechet_mean",
                t_ours,
                _rel_grad(P, res.mean, X),
                1.0,
            )
        )
        rows.append(
            ("", "pyRiemann mean_riemann (defaults)", t_pr, _rel_grad(P, m_pr, X), t_pr / t_ours)
        )
        rows.append(
            ("", "pyRiemann mean_riemann (tol=1e-14)", t_pt, _rel_grad(P, m_pt, X), t_pt / t_ours)
        )
    S = pmd.Sphere(dim=2)
    for n in (100_000, 1_000_000):
        Y = _sphere_data(n, rng)
        t_ours, res = _timed(lambda Y=Y: pmd.frechet_mean(S, Y))
        t_pl, m_pl = _timed(lambda Y=Y: plain_karcher_sphere(Y))
        label = f"S^2, n=10^{int(np.log10(n))}"
        rows.append((label, "pymc_manidp.frechet_mean", t_ours, _rel_grad(S, res.mean, Y), 1.0))
        rows.append(("", "plain Karcher flow", t_pl, _rel_grad(S, m_pl, Y), t_pl / t_ours))

    print(
        f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, "
        f"median of {REPEATS} runs\n"
    )
    print("| data | method | seconds | relative gradient norm | time / ours |")
    print("|---|---|---|---|---|")
    for data, method, t, g, ratio in rows:
        print(f"| {data} | {method} | {t:.4f} | {g:.1e} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
