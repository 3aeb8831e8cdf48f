"""Benchmark: releases per second of one KNG release, exact sampler against MH and NUTS.

Issue 5's goal: one exact release at least 1,000x faster than the 2021 supplement's
random-walk MH. Target in every case: KNG, epsilon = 1, n = 1,000, one release (a
single private value), on

- S^2 (``Sphere(dim=2)``), public ball B_{pi/8}(north pole), data from
  ``datasets.generators.sphere_cap`` (the supplement's generator: polar angle uniform
  on [0, pi/8], uniform azimuth);
- SPD(2), public ball B_{1.5}(I), data from ``datasets.generators.wishart_in_ball``
  (Wishart, df = 2, V = I/2, kept in the ball).

Samplers, all in this one process, same data, same law:

1. exact: ``KNGMechanism.release(data, sampler="exact", random_seed=i)``, the default
   path. Timed per call: data checks, Fréchet mean, rejection sampling, the Release
   record. Repeated for at least ``EXACT_MIN_RELEASES`` releases and ``EXACT_SECONDS``
   seconds; the first call of the process is timed apart (one-off warm-up). Acceptance
   rate = releases / envelope proposals summed over all releases (one release's
   ``sampler_info["acceptance_rate"]`` is 1 / (proposals it needed)).
2. supplement MH (``mcmc.random_walk.random_walk_mh``, §1.5): step = sigma, start
   at the data's Fréchet mean (the supplement starts at the footpoint; for KNG the mean
   is the mode), burn-in 10,000 steps, then one draw is the release. The supplement's
   thinning (every 100th state) only spaces out several draws of one chain, so it
   plays no part in a single release. One chain. Timed per release: data checks,
   Fréchet mean, 10,001 MH steps. The log-density is KNG's (``mech.logp``) with the
   data checks hoisted out of the loop (checked equal to ``mech.logp`` below), which
   only makes the MH faster. Its acceptance rate comes from a separate untimed run of
   ``MH_ACCEPT_STEPS`` steps (``random_walk_mh`` counts acceptances after burn-in only).
3. NUTS: ``release(data, sampler="nuts", random_seed=i)`` with its defaults (4 chains,
   1,000 tuning steps, 2,000 draws, diagnostics gate). Uses nutpie if importable,
   PyMC's NUTS otherwise (printed). Two releases on one mechanism object: the first
   compiles the model, the second reuses it (``mech.mcmc_cache``). "sampling only" is
   the sampler's own ``sampling_time`` (no compilation, no gate).

Run:  .venv/bin/python docs/benchmarks/bench_exact.py        (about 5 minutes on 2 cores)
"""

from __future__ import annotations

import datetime
import os
import platform
import signal
import time
import warnings

import numpy as np

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.datasets import generators
from pymc_manidp.mcmc.random_walk import random_walk_mh
from pymc_manidp.privacy import DiagnosticsError
from pymc_manidp.stats.frechet import frechet_mean

N = 1000
EPSILON = 1.0
EXACT_MIN_RELEASES = 200
EXACT_SECONDS = 10.0
MH_RELEASES = 3
MH_BURN_IN = 10_000
MH_ACCEPT_STEPS = 1000
NUTS_RELEASES = 2
NUTS_LIMIT = 150  # seconds per NUTS release; a longer one is stopped and reported as "> limit"


class Stopped(Exception):
    """Raised by the alarm when a NUTS release exceeds ``NUTS_LIMIT``."""


def _alarm(signum, frame):
    raise Stopped


def cases():
    """(label, manifold, mechanism, data) of both targets."""
    S2 = pmd.Sphere(dim=2)
    north = np.array([0.0, 0.0, 1.0])
    sphere = generators.sphere_cap(N, radius=np.pi / 8, center=north, random_seed=0)
    P = pmd.SPD(k=2)
    spd = generators.wishart_in_ball(N, k=2, df=2.0, scale=np.eye(2) / 2, radius=1.5, random_seed=0)
    return [
        (
            "S^2, B_{pi/8}(north)",
            S2,
            pmd.KNGMechanism(S2, epsilon=EPSILON, center=north, radius=np.pi / 8),
            sphere,
        ),
        (
            "SPD(2), B_1.5(I)",
            P,
            pmd.KNGMechanism(P, epsilon=EPSILON, center=np.eye(2), radius=1.5),
            spd,
        ),
    ]


def kng_log_density(M, mech, data):
    """KNG's log-density for the MH: ``mech.logp`` without re-checking data each step."""
    data = mech.domain.check(data)
    n, nd = len(data), len(M.point_shape)
    sigma, radius = mech.sigma(n), mech.domain.radius

    def logp(x):
        g = np.sum(M.log(np.expand_dims(x, -nd - 1), data), axis=-nd - 1)
        lp = -M.norm(x, g) / (sigma * n)
        return np.where(mech.domain.distances(x) <= radius, lp, -np.inf)

    mode = frechet_mean(M, data).mean
    rng = np.random.default_rng(5)
    pts = M.exp_coords(mode, 3 * sigma * rng.normal(size=(5, M.dim)))
    np.testing.assert_allclose(logp(pts), mech.logp(pts, data), rtol=1e-12, atol=1e-12)
    return logp


def bench_exact(mech, data):
    t0 = time.perf_counter()
    mech.release(data, sampler="exact", random_seed=10**6)
    first = time.perf_counter() - t0
    times, proposals = [], 0
    start = time.perf_counter()
    while len(times) < EXACT_MIN_RELEASES or time.perf_counter() - start < EXACT_SECONDS:
        t0 = time.perf_counter()
        rel = mech.release(data, sampler="exact", random_seed=len(times))
        times.append(time.perf_counter() - t0)
        proposals += rel.sampler_info["proposals"]
    total = time.perf_counter() - start
    return {
        "times": np.array(times),
        "first": first,
        "throughput": len(times) / total,
        "acceptance": len(times) / proposals,
    }


def mh_release(M, mech, data, logp, seed):
    """One release as the supplement prescribes: burn-in 10,000 steps, keep the next state."""
    data = mech.domain.check(data)
    start = frechet_mean(M, data).mean
    res = random_walk_mh(
        logp,
        start,
        manifold=M,
        step=mech.sigma(len(data)),
        draws=1,
        burn_in=MH_BURN_IN,
        thin=1,
        chains=1,
        rng=seed,
    )
    return res.draws[0, 0]


def bench_mh(M, mech, data):
    logp = kng_log_density(M, mech, data)
    times = []
    for i in range(MH_RELEASES):
        t0 = time.perf_counter()
        mh_release(M, mech, data, logp, seed=100 + i)
        times.append(time.perf_counter() - t0)
        print(f"    MH release {i + 1}/{MH_RELEASES}: {times[-1]:.2f} s", flush=True)
    acc = random_walk_mh(
        logp,
        frechet_mean(M, data).mean,
        manifold=M,
        step=mech.sigma(len(data)),
        draws=MH_ACCEPT_STEPS,
        burn_in=0,
        thin=1,
        chains=1,
        rng=99,
    ).acceptance_rate
    return {"times": np.array(times), "acceptance": acc}


def bench_nuts(mech, data):
    """Two releases; each is stopped by SIGALRM after ``NUTS_LIMIT`` s (nutpie cancels its
    run on any exception other than KeyboardInterrupt, so nothing is released)."""
    runs = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(NUTS_RELEASES):
            t0 = time.perf_counter()
            gate, idata, stopped = "passed", None, False
            signal.alarm(NUTS_LIMIT)
            try:
                rel = mech.release(data, sampler="nuts", random_seed=200 + i)
                idata = rel.diagnostics
            except DiagnosticsError as err:  # the time is still spent; nothing released
                gate = f"failed: {err}"[:120]
            except Stopped:
                gate, stopped = f"stopped at the {NUTS_LIMIT} s limit", True
            finally:
                signal.alarm(0)
            wall = time.perf_counter() - t0
            sampling = np.nan
            if idata is not None:
                sampling = float(idata.posterior.attrs.get("sampling_time", np.nan))
            runs.append({"wall": wall, "sampling": sampling, "gate": gate, "stopped": stopped})
            print(
                f"    NUTS release {i + 1}/{NUTS_RELEASES}: {wall:.1f} s wall, "
                f"{sampling:.1f} s sampling only, {gate}",
                flush=True,
            )
            if stopped:
                break  # a second release would be stopped too: keep the run short
    finally:
        signal.signal(signal.SIGALRM, previous)
    backend = ",".join(sorted({key[2] for key in mech.mcmc_cache.keys()}))
    return {"runs": runs, "backend": backend or ("nutpie" if mcmc.has_nutpie() else "pymc")}


def fmt_rate(r):
    return f"{r:,.0f}" if r >= 10 else f"{r:.3g}"


def main():
    warnings.filterwarnings("ignore")
    load0 = os.getloadavg()
    print(
        f"date {datetime.date.today()}, machine {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        flush=True,
    )
    print(f"load average at start (1, 5, 15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    nuts_backend = "nutpie" if mcmc.has_nutpie() else "PyMC NUTS (nutpie not importable)"
    print(f"sampler='nuts' will use: {nuts_backend}", flush=True)

    results = []
    for label, M, mech, data in cases():
        print(f"\n{label}: n={len(data)}, sigma={mech.sigma(len(data)):.4g}", flush=True)
        print("  exact ...", flush=True)
        ex = bench_exact(mech, data)
        print(
            f"    {len(ex['times'])} releases, median {np.median(ex['times']) * 1e3:.2f} ms, "
            f"first call {ex['first'] * 1e3:.1f} ms, acceptance {ex['acceptance']:.3f}",
            flush=True,
        )
        print("  supplement MH ...", flush=True)
        mh = bench_mh(M, mech, data)
        print("  NUTS ...", flush=True)
        nu = bench_nuts(mech, data)
        results.append((label, ex, mh, nu))

    load1 = os.getloadavg()
    print(
        "\n| manifold | sampler | releases timed | s / release (median) | releases/s "
        "| exact ÷ MH | exact ÷ NUTS |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, ex, mh, nu in results:
        s_ex = float(np.median(ex["times"]))
        s_mh = float(np.median(mh["times"]))
        s_nu = float(np.median([r["wall"] for r in nu["runs"]]))
        bound = ">= " if any(r["stopped"] for r in nu["runs"]) else ""  # a lower bound
        print(
            f"| {label} | exact (acceptance {ex['acceptance']:.2f}) | {len(ex['times'])} | "
            f"{s_ex:.4f} | {fmt_rate(1 / s_ex)} | **{s_mh / s_ex:,.0f}** | "
            f"{bound}{s_nu / s_ex:,.0f} |"
        )
        print(
            f"|  | supplement MH (burn-in {MH_BURN_IN:,}, acceptance {mh['acceptance']:.2f}) "
            f"| {len(mh['times'])} | {s_mh:.2f} | {fmt_rate(1 / s_mh)} | 1 | |"
        )
        upper = "<= " if bound else ""
        print(
            f"|  | NUTS ({nu['backend']}, defaults) | {len(nu['runs'])} | {bound}{s_nu:.1f} | "
            f"{upper}{fmt_rate(1 / s_nu)} | | 1 |"
        )
    print("\nNUTS releases one by one (release 2 reuses the compiled model):")
    print(
        "| manifold | release | wall s | sampling-only s | gate | exact ÷ wall "
        "| exact ÷ sampling only |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, ex, _, nu in results:
        s_ex = float(np.median(ex["times"]))
        for i, r in enumerate(nu["runs"]):
            bound = ">= " if r["stopped"] else ""
            print(
                f"| {label} | {i + 1} | {bound}{r['wall']:.1f} | {r['sampling']:.1f} | "
                f"{r['gate']} | {bound}{r['wall'] / s_ex:,.0f} | {r['sampling'] / s_ex:,.0f} |"
            )
    print("\nexact, other statistics:")
    for label, ex, _, _ in results:
        t = ex["times"]
        print(
            f"  {label}: throughput {ex['throughput']:.0f} releases/s (count / total time), "
            f"quartiles {np.percentile(t, 25) * 1e3:.2f} / {np.percentile(t, 75) * 1e3:.2f} ms, "
            f"first call of the process {ex['first'] * 1e3:.1f} ms"
        )
    print(f"\nload average at end (1, 5, 15 min): {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
