"""The experiments on ``release_many`` against their per-replicate loops (issue 26, item 2).

For each experiment named on the command line (``name`` or ``name@commit``), the
module as it was at that commit (default ``--base``; read with ``git show`` and
imported under another name, on today's library: only the experiment's own code is
old) and the module of the working tree run the same reduced settings (the full run's
grid, ``replicates=R``, seed 20211206, in one process: ``workers=1``), alternating,
``--rounds`` times; the best time of each is printed with their ratio, and how far the
two tables are apart (``max |Δ mean|`` over the difference's SE: about 0 where the
draws are the same, a few units over many rows where they are new draws of the same
law; rows without an SE, e.g. bounds, by their relative difference).

Run:  .venv/bin/python docs/benchmarks/bench_experiments_release_many.py --base 7c63eb7 \\
          --replicates 40 laplace2021_fig1 theorems kng2022_fig1@9d1baa0 kng2022_shapes

The "before" arm draws ``wishart_in_ball``'s matrices with ``scipy.stats.wishart.rvs``,
as the library did before (the same law; equal to the batched draw up to the last bit
of the scale's Cholesky factor), so that the ratio covers that change too.

With ``--wishart``: ``scipy.stats.wishart.rvs`` against the batched Bartlett draw of
``wishart_in_ball`` (the same matrices), 2,000 draws on SPD(2), interleaved, best of 7.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def old_module(name: str, base: str):
    """The experiment's module at commit ``base``, imported as ``_old_<name>``."""
    src = subprocess.run(
        ["git", "show", f"{base}:pymc_manidp/experiments/{name}.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / f"_old_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"_old_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # worker processes are not used (workers=1)
    spec.loader.exec_module(mod)
    return mod


def compare(old, new):
    """The largest relative difference of rows without a standard error and the
    largest ``|Δ mean|`` over the SE of the difference of the others (both tables in
    one order)."""
    import numpy as np

    value, se = ("mean", "se") if "mean" in new else ("mean_rho", "se_rho")
    # the rows in the same order (labels may be renamed: "KNG (exact)" was "(random-walk MH)")
    assert len(old) == len(new), "the tables have different rows"
    d = (old[value] - new[value]).abs().to_numpy()
    s = np.hypot(old[se].to_numpy(), new[se].to_numpy())  # the SE of the difference
    # rows without a standard error (bounds, maxima) by their relative difference
    rel = d / np.maximum(np.abs(new[value].to_numpy()), 1e-300)
    z = np.where(s > 0, d / np.where(s > 0, s, 1), 0.0)
    return float(rel[s == 0].max(initial=0.0)), float(z.max())


def wishart():
    import numpy as np
    from scipy import linalg, stats

    from pymc_manidp.datasets.generators import _wishart_rvs

    V = np.eye(2) / 2
    law, chol = stats.wishart(df=2.0, scale=V), linalg.cholesky(V, lower=True)
    times = {"scipy": [], "batched": []}
    for r in range(7):
        for which in times:
            rng = np.random.default_rng(r)
            t = time.perf_counter()
            if which == "scipy":
                a = law.rvs(size=2000, random_state=rng)
            else:
                b = _wishart_rvs(2000, 2, 2.0, chol, rng)
            times[which].append(time.perf_counter() - t)
        assert np.array_equal(a, b)
    s, b = min(times["scipy"]), min(times["batched"])
    print(f"| 2,000 Wishart draws, SPD(2) | {1e3 * s:.2f} ms | {1e3 * b:.2f} ms | {s / b:.1f}× |")


def scipy_wishart():
    """A context in which ``wishart_in_ball`` draws through ``scipy.stats.wishart.rvs``."""
    import contextlib

    import numpy as np
    from scipy import stats

    from pymc_manidp.datasets import generators

    def rvs(m, k, df, chol, rng):
        law = stats.wishart(df=df, scale=chol @ chol.T)
        return np.asarray(law.rvs(size=m, random_state=rng), float).reshape(m, k, k)

    @contextlib.contextmanager
    def patched():
        batched = generators._wishart_rvs
        generators._wishart_rvs = rvs
        try:
            yield
        finally:
            generators._wishart_rvs = batched

    return patched()


def main():
    if "--wishart" in sys.argv[1:]:
        return wishart()
    p = argparse.ArgumentParser()
    p.add_argument("names", nargs="+")
    p.add_argument("--base", required=True)
    p.add_argument("--replicates", type=int, default=40)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    import importlib

    print("| experiment | R | before (s) | after (s) | ratio | max abs Δ / SE (rows without SE) |")
    print("|---|---|---|---|---|---|")
    for spec in a.names:
        name, _, base = spec.partition("@")
        old = old_module(name, base or a.base)
        new = importlib.import_module(f"pymc_manidp.experiments.{name}")
        kw = dict(replicates=a.replicates, out=None, seed=20211206, workers=1, progress=False)
        times = {"old": [], "new": []}
        tables = {}
        fns = {"old": getattr(old, name), "new": getattr(new, name)}
        fns["new"](**{**kw, "replicates": max(2, a.replicates // 10)})  # warm caches
        for _ in range(a.rounds):
            for which in ("old", "new"):
                with scipy_wishart() if which == "old" else contextlib.nullcontext():
                    t = time.perf_counter()
                    tables[which] = fns[which](**kw)
                    times[which].append(time.perf_counter() - t)
        t_old, t_new = min(times["old"]), min(times["new"])
        dmax, zmax = compare(tables["old"], tables["new"])
        print(
            f"| {spec} | {a.replicates} | {t_old:.1f} | {t_new:.1f} | {t_old / t_new:.1f}× "
            f"| {zmax:.2g} ({dmax:.1g} relative) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
