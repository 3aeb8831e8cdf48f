"""Benchmark: time to a Fréchet mean with relative gradient norm <= 1e-10.

Side by side in one process, same data:
- SPD(2), SPD(3), SPD(8), n = 10^4: pymc_manidp.frechet_mean against pyRiemann's
  ``mean_riemann`` at the same accuracy (its loosest tolerance on a decade grid whose
  mean has a relative gradient norm <= 1e-10, found before the timing);
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

REPEATS = 7


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


def _matched_pyriemann(X, P, target=1e-10):
    """pyRiemann's loosest tolerance (a decade grid) whose mean reaches ``target``."""
    from pyriemann.utils.mean import mean_riemann

    for tol in (1e-8, 1e-9, 1e-10, 1e-11, 1e-12):
        if _rel_grad(P, mean_riemann(X, tol=tol, maxiter=500), X) <= target:
            return tol
    return 1e-14


def _side_by_side(ours, baseline):
    """Interleaved runs, ``REPEATS`` pairs: medians of each and the spread of the
    per-pair ratio ``ours / baseline`` (the machine's load moves both alike)."""
    t_o, t_b, ratios = [], [], []
    out_o = out_b = None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        out_o = ours()
        t1 = time.perf_counter()
        out_b = baseline()
        t2 = time.perf_counter()
        t_o.append(t1 - t0)
        t_b.append(t2 - t1)
        ratios.append((t1 - t0) / (t2 - t1))
    return float(np.median(t_o)), float(np.median(t_b)), ratios, out_o, out_b


def main():
    from pyriemann.utils.mean import mean_riemann

    warnings.simplefilter("ignore", DeprecationWarning)
    rng = np.random.default_rng(2021)
    rows = []
    for k in (2, 3, 8):
        P = pmd.SPD(k=k)
        X = _spd_data(k, 10_000, rng)
        pmd.frechet_mean(P, X)  # compile (or load) the kernels outside the timing
        tol = _matched_pyriemann(X, P)
        t_o, t_b, ratios, res, m_pr = _side_by_side(
            lambda X=X, P=P: pmd.frechet_mean(P, X),
            lambda X=X, tol=tol: mean_riemann(X, tol=tol, maxiter=500),
        )
        label = f"SPD({k}), n=10^4"
        rows.append((label, "pymc_manidp.frechet_mean", t_o, _rel_grad(P, res.mean, X), ratios))
        rows.append(("", f"pyRiemann mean_riemann (tol={tol:g})", t_b, _rel_grad(P, m_pr, X), None))
    S = pmd.Sphere(dim=2)
    for n in (100_000, 1_000_000):
        Y = _sphere_data(n, rng)
        pmd.frechet_mean(S, Y)
        t_o, t_b, ratios, res, m_pl = _side_by_side(
            lambda Y=Y: pmd.frechet_mean(S, Y), lambda Y=Y: plain_karcher_sphere(Y)
        )
        label = f"S^2, n=10^{int(np.log10(n))}"
        rows.append((label, "pymc_manidp.frechet_mean", t_o, _rel_grad(S, res.mean, Y), ratios))
        rows.append(("", "plain Karcher flow", t_b, _rel_grad(S, m_pl, Y), None))

    print(
        f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, "
        f"{REPEATS} interleaved pairs\n"
    )
    print(
        "| data | method | seconds (median) | relative gradient norm "
        "| ours / baseline: median (min-max) |"
    )
    print("|---|---|---|---|---|")
    for data, method, t, g, ratios in rows:
        ratio = (
            ""
            if ratios is None
            else (f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        )
        print(f"| {data} | {method} | {t:.4f} | {g:.1e} | {ratio} |")


if __name__ == "__main__":
    main()
