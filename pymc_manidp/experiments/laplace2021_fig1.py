r"""2021 paper, Figure 1 (§5.1 SPD(2), §5.2 S²): sensitivity and utility of the manifold Laplace.

Panels (rows SPD(2) and S²):

1. **Sensitivity.** For neighbouring datasets ``D = (x_1..x_n)`` and
   ``D' = (x_1..x_{n-1}, x_n')`` the distance :math:`\rho(\bar x, \bar x')` between
   their Fréchet means (dots), its average (line) and the bound of Theorem 2,

   .. math:: \Delta = \frac{2r\,(2 - H)}{nH}, \qquad H = h(r, \kappa)

   (``2r/n`` on SPD); on S² also the supplement's empirical bound (§2.1).
2. **Utility.** Mean Euclidean (ambient) distance between a mechanism's non-private
   summary and its release ± 2 SE over replicates (a fresh dataset per replicate,
   one draw per mechanism): manifold Laplace (``sigma = Delta/eps``, exact sampler)
   versus the Euclidean K-norm Laplace in ``vech`` coordinates (SPD) or
   :math:`\mathbb R^3` (sphere) with the supplement's ambient radius ``r_E``.
3. **SPD:** the share of Euclidean releases that are not positive definite, for
   ``eps`` in 0.5, 1, 2 (the paper does not print its ε), with the noise on the
   ambient mean (our baseline) and on the Fréchet mean (the paper's protocol). **S²:**
   the error reduction :math:`1 - \text{Laplace}/\text{Euclidean}` in percent.

Settings (2021 §5, supplement §1): ``eps = 1``, SPD(2) data ``W(I/2, 2)`` kept in
``B_1.5(I)``, S² data with polar angle uniform on ``[0, pi/8]``, 1,000 replicates per
``n``. The paper does not print its grid of ``n``; we use 10 to 1,000.

Differences from the paper, by design (see ``docs/reproduction.md``):

- The Euclidean baseline perturbs the *ambient* mean, whose sensitivity ``2 r_E/n``
  is proven (``docs/baselines.md``); the paper adds the same noise to the Fréchet
  mean. The distance from the summary to the release is the noise's norm either way,
  so the utility curves are comparable; the non-PD share is reported for both.
- The library's Laplace uses Theorem 2's bound; the paper's sphere simulations use
  the supplement's smaller empirical bound (§2.1). Both are shown on S².
"""

from __future__ import annotations

from functools import cache

import numpy as np

from pymc_manidp.experiments import _common as C

__all__ = ["SETTINGS", "laplace2021_fig1"]

#: Full and quick settings (``replicates`` may be overridden by the caller).
SETTINGS = {
    "full": {
        "epsilon": 1.0,
        "n_grid": (10, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500, 750, 1000),
        "replicates": 1000,
        "pairs": 100,
        "non_pd_epsilons": (0.5, 1.0, 2.0),
    },
    "quick": {
        "epsilon": 1.0,
        "n_grid": (10, 20, 40, 100, 300, 1000),
        "replicates": 100,
        "pairs": 20,
        "non_pd_epsilons": (0.5, 1.0, 2.0),
    },
}
SPD_RADIUS = 1.5
SPHERE_RADIUS = np.pi / 8
SPACES = ("SPD(2)", "S2")
LAPLACE = "manifold Laplace"
LAPLACE_EMP = "manifold Laplace, empirical Δ (paper's choice)"
EUCLID = "Euclidean Laplace"
COLUMNS = ["panel", "space", "method", "epsilon", "n", "mean", "se", "count"]
NON_PD_AMBIENT = "Euclidean Laplace on the ambient mean (our baseline)"
NON_PD_FRECHET = "Euclidean Laplace on the Fréchet mean (paper's protocol)"


@cache
def _setup(space: str, epsilon: float):
    """Manifold, data generator and mechanisms of one panel row (cached per process)."""
    import pymc_manidp as pmd
    from pymc_manidp.datasets import sphere_cap, wishart_in_ball
    from pymc_manidp.mechanisms.baselines import EuclideanLaplace

    if space == "SPD(2)":
        M, center, r = pmd.SPD(k=2), np.eye(2), SPD_RADIUS

        def gen(n, rng):
            return wishart_in_ball(n, k=2, df=2.0, radius=r, random_seed=rng)
    else:
        M, center, r = pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), SPHERE_RADIUS

        def gen(n, rng):
            return sphere_cap(n, radius=r, random_seed=rng)

    lap = pmd.LaplaceMechanism(M, epsilon=epsilon, center=center, radius=r)
    euc = EuclideanLaplace(M, epsilon=epsilon, center=center, radius=r)
    return M, gen, lap, euc


def empirical_delta_factor() -> float:
    """``n * Delta`` of the 2021 supplement's empirical sphere bound: spread / H."""
    from pymc_manidp.stats.sensitivity import curvature_factor, empirical_sphere_log_spread

    r = SPHERE_RADIUS
    return empirical_sphere_log_spread(r) / curvature_factor(r, 1.0)


def theorem2_bound(space: str, n) -> np.ndarray:
    """Theorem 2's sensitivity bound ``2r(2-H)/(nH)`` for the panel's ball."""
    from pymc_manidp.stats.sensitivity import curvature_factor

    n = np.asarray(n, float)
    if space == "SPD(2)":
        return 2.0 * SPD_RADIUS / n
    h = curvature_factor(SPHERE_RADIUS, 1.0)
    return 2.0 * SPHERE_RADIUS * (2.0 - h) / (n * h)


def _sensitivity_chunk(space, n, epsilon, jobs):
    """ρ(x̄, x̄') for neighbouring datasets (one fresh pair per seed).

    The pairs' Fréchet means are computed in one batched descent over the chunk
    (``pymc_manidp.stats.frechet.frechet_means``, issue 26): the same means as
    one ``frechet_mean`` each, to the tolerance.
    """
    from pymc_manidp.stats.frechet import frechet_means

    M, gen, _, _ = _setup(space, epsilon)
    xs, ys = [], []
    for _, ss in jobs:
        rng = np.random.default_rng(ss)
        x = gen(n, rng)
        y = x.copy()
        y[-1] = gen(1, rng)[0]
        xs.append(x)
        ys.append(y)
    means = frechet_means(M, np.stack(xs + ys), tol=1e-12).means
    rho = M.dist(means[: len(xs)], means[len(xs) :])
    return [
        {"space": space, "n": n, "pair": pair, "rho": float(r)}
        for (pair, _), r in zip(jobs, rho, strict=True)
    ]


def _utility_chunk(space, n, epsilon, non_pd_epsilons, jobs):
    """One replicate per seed: a dataset, its Fréchet mean, one release per mechanism.

    Each mechanism releases the chunk's data sets in one call (``release_many``, issue
    26), each replicate from its own generator, which every step of the replicate
    draws from in the order of the per-replicate loop this replaced (data, Laplace,
    empirical-Δ Laplace, Euclidean, non-PD noise): a replicate's numbers do not depend
    on the chunking.
    """
    from pymc_manidp.laws import exact
    from pymc_manidp.mechanisms.baselines import knorm_noise, unvech, vech
    from pymc_manidp.privacy.budget import current_budget
    from pymc_manidp.stats.frechet import frechet_means

    if current_budget() is not None:  # as Mechanism.sample refused before release_many
        raise ValueError(
            "the experiments release simulated replicates, not charged to a privacy "
            "budget: run them outside 'with budget:'"
        )
    M, gen, lap, euc = _setup(space, epsilon)
    spd = space == "SPD(2)"
    amb = vech if spd else np.asarray
    rngs = [np.random.default_rng(ss) for _, ss in jobs]
    stack = np.stack([gen(n, rng) for rng in rngs])
    fms = frechet_means(M, stack, tol=1e-12).means
    released = {LAPLACE: lap.release_many(stack, random_seed=rngs).values}
    if not spd:
        sigma = empirical_delta_factor() / (n * epsilon)
        released[LAPLACE_EMP] = exact.sample_laplace_stack(M, fms, sigma, rngs)[0]
    released[EUCLID] = euc.release_many(stack, random_seed=rngs).values
    # the Euclidean baseline's summary, the ambient mean, for the whole stack at once
    # (its summary() would check each data set again: the data are in the ball)
    ambient = M.from_ambient(np.mean(M.to_ambient(stack), axis=1))
    rows = []
    for j, ((rep, _), rng, fm) in enumerate(zip(jobs, rngs, fms, strict=True)):
        base = {"space": space, "n": n, "rep": rep}

        def dist(a, b):
            return float(np.linalg.norm(amb(a) - amb(b)))

        rows.append({**base, "method": LAPLACE, "dist": dist(released[LAPLACE][j], fm)})
        if not spd:
            rows.append({**base, "method": LAPLACE_EMP, "dist": dist(released[LAPLACE_EMP][j], fm)})
        summary = ambient[j]
        rows.append({**base, "method": EUCLID, "dist": dist(released[EUCLID][j], summary)})
        if spd:
            # Non-PD share over the epsilon sweep: one noise draw per epsilon, added to
            # the ambient mean (our baseline) and, as in the paper, to the Fréchet mean
            for e in non_pd_epsilons:
                noise = knorm_noise(rng, 3, euc.sensitivity(n) / e, ())
                for where, center in ((NON_PD_AMBIENT, summary), (NON_PD_FRECHET, fm)):
                    y = unvech(vech(center) + noise, 2)
                    rows.append(
                        {**base, "method": where, "epsilon": e}
                        | {"non_pd": bool(np.linalg.eigvalsh(y)[0] <= 0)}
                    )
    return rows


def laplace2021_fig1(
    *,
    quick=False,
    replicates=None,
    out=None,
    seed=20211206,
    progress=False,
    workers=None,
    scheduler=None,
):
    """Reproduce Figure 1 of the 2021 paper; returns the table of every plotted number.

    Parameters
    ----------
    quick : bool
        Smaller grid and fewer replicates (``SETTINGS["quick"]``).
    replicates : int, optional
        Replicates per ``n`` for the utility panels (default 1,000; quick 100).
    out : path, optional
        Folder; writes ``laplace2021_fig1/`` with ``laplace2021_fig1.png``,
        ``table.csv`` (every plotted number), ``sensitivity_pairs.csv`` (the dots)
        and ``summary.json`` (settings and the paper's statements next to ours).
    seed : int
    progress : bool
        Show progress bars.
    workers : int, optional
        Processes for the replicates (default 2). Results do not depend on it.
    scheduler : None, str or distributed.Client, optional
        Where the replicates run: None, the current ``distributed`` client if there is
        one, else Dask's local scheduler; a client, its address, or ``"threads"`` /
        ``"processes"`` / ``"sync"`` (``experiments._common.cluster``). Results do not
        depend on it.

    Returns
    -------
    pandas.DataFrame
        Columns ``panel, space, method, epsilon, n, mean, se, count`` (``epsilon``:
        the non-PD sweep's ε; the experiment's ε elsewhere).

    Examples
    --------
    The red line of the sensitivity panels (Theorem 2), at ``n = 10``:

    >>> float(theorem2_bound("SPD(2)", 10)), round(float(theorem2_bound("S2", 10)), 6)
    (0.3, 0.12146)
    """
    import pandas as pd

    cfg = dict(SETTINGS["quick" if quick else "full"])
    if replicates is not None:
        cfg["replicates"] = int(replicates)
    workers = C.default_workers() if workers is None else int(workers)
    eps, grid, reps = cfg["epsilon"], cfg["n_grid"], cfg["replicates"]
    size = max(1, min(50, reps // 4))

    jobs = []
    for s, space in enumerate(SPACES):
        for i, n in enumerate(grid):
            seeds = C.child_seeds(seed, 0, s, i, count=cfg["pairs"])
            jobs += [
                (space, n, eps, [(j, seeds[j]) for j in part])
                for part in C.chunks(cfg["pairs"], size)
            ]
    pairs = pd.DataFrame(
        [
            row
            for rows in C.parallel_map(
                _sensitivity_chunk,
                jobs,
                workers=workers,
                scheduler=scheduler,
                progress=progress,
                description="2021 Fig. 1: sensitivity",
            )
            for row in rows
        ]
    )
    jobs = []
    for s, space in enumerate(SPACES):
        for i, n in enumerate(grid):
            seeds = C.child_seeds(seed, 1, s, i, count=reps)
            jobs += [
                (space, n, eps, cfg["non_pd_epsilons"], [(j, seeds[j]) for j in part])
                for part in C.chunks(reps, size)
            ]
    reps_rows = [
        row
        for rows in C.parallel_map(
            _utility_chunk,
            jobs,
            workers=workers,
            scheduler=scheduler,
            progress=progress,
            description="2021 Fig. 1: utility",
        )
        for row in rows
    ]
    table = _tables(pairs, pd.DataFrame(reps_rows), grid, eps)
    path = C.prepare_out(out, "laplace2021_fig1")
    C.write_table(table, path, "table")
    C.write_table(pairs, path, "sensitivity_pairs")
    C.write_json(
        {"experiment": "laplace2021_fig1", "quick": quick, "seed": seed, "settings": cfg}
        | {"statements": statements(table)},
        path,
        "summary",
    )
    _plot(table, pairs, path)
    return table


def _tables(pairs, reps, grid, epsilon):
    import pandas as pd

    parts = []
    sens = pairs.groupby(["space", "n"], sort=False)["rho"].agg(["mean", "std", "count", "max"])
    sens = sens.reset_index()
    sens["se"] = sens["std"] / np.sqrt(sens["count"])
    parts.append(sens.assign(panel="sensitivity", method="empirical ρ(x̄, x̄')"))
    parts.append(sens.assign(panel="sensitivity", method="empirical max", mean=sens["max"], se=0.0))
    for space in SPACES:
        g = np.asarray(grid, float)
        bound = pd.DataFrame({"space": space, "n": grid, "mean": theorem2_bound(space, g)})
        parts.append(bound.assign(panel="sensitivity", method="Theorem 2 bound", se=0.0, count=0))
    g = np.asarray(grid, float)
    emp = pd.DataFrame({"space": "S2", "n": grid, "mean": empirical_delta_factor() / g})
    parts.append(
        emp.assign(panel="sensitivity", method="empirical bound (supplement §2.1)", se=0.0, count=0)
    )
    parts = [p.assign(epsilon=epsilon) for p in parts]

    pd_rows = reps[reps.method.isin((NON_PD_AMBIENT, NON_PD_FRECHET))]
    reps = reps[~reps.method.isin((NON_PD_AMBIENT, NON_PD_FRECHET))]
    util = C.summarize(reps.to_dict("records"), ["space", "method", "n"], "dist")
    parts.append(util.assign(panel="utility", epsilon=epsilon))

    share = (
        pd_rows.astype({"non_pd": float})
        .groupby(["method", "epsilon", "n"], sort=False)["non_pd"]
        .agg(["mean", "count"])
        .reset_index()
    )
    share["se"] = np.sqrt(share["mean"] * (1 - share["mean"]) / share["count"])
    parts.append(share.assign(panel="non_pd_share", space="SPD(2)"))

    for space in SPACES:
        wide = reps[reps.space == space].pivot(index=["n", "rep"], columns="method", values="dist")
        for m in (LAPLACE, LAPLACE_EMP):
            if m not in wide:
                continue
            for n, g in wide.groupby(level="n", sort=False):
                red, se = _reduction(g[m].to_numpy(), g[EUCLID].to_numpy())
                parts.append(
                    pd.DataFrame(
                        {"panel": "reduction", "space": space, "method": m, "n": [n]}
                        | {"mean": [red], "se": [se], "count": [len(g)], "epsilon": epsilon}
                    )
                )
    out = pd.concat([p[COLUMNS] for p in parts], ignore_index=True)
    out["count"] = out["count"].astype(int)
    return out


def _reduction(a, b):
    """``100 (1 - mean(a)/mean(b))`` and its delta-method SE (paired replicates)."""
    ma, mb = a.mean(), b.mean()
    ratio = ma / mb
    cov = np.cov(a, b) / len(a)
    var = ratio**2 * (cov[0, 0] / ma**2 + cov[1, 1] / mb**2 - 2 * cov[0, 1] / (ma * mb))
    return 100.0 * (1.0 - ratio), 100.0 * float(np.sqrt(max(var, 0.0)))


def statements(table) -> list[dict]:
    """The paper's §5 statements next to our numbers from ``table``."""
    red = table[(table.panel == "reduction") & (table.space == "S2")]
    share = table[(table.panel == "non_pd_share")]
    sens = table[table.panel == "sensitivity"]
    out = []
    for space in SPACES:
        s = sens[sens.space == space].pivot(index="n", columns="method", values="mean")
        top = s["empirical max"] / s["Theorem 2 bound"]
        avg = s["empirical ρ(x̄, x̄')"] / s["Theorem 2 bound"]
        out.append(
            {
                "paper": "empirical sensitivity quite close to the theoretical bound (2021 §6)",
                "ours": f"{space}: largest pair / Theorem 2 bound {top.min():.2f}-{top.max():.2f}, "
                f"average / bound {avg.min():.2f}-{avg.max():.2f} over n",
            }
        )
    for m in (LAPLACE_EMP, LAPLACE):
        r = red[red.method == m].sort_values("n")
        if len(r):
            half = len(r) // 2
            out.append(
                {
                    "paper": "S²: manifold Laplace about 15% less error than Euclidean "
                    "(16.8% at small n, 12% at large n), 2021 §5.2",
                    "ours": f"{m}: {r['mean'].mean():.1f}% on average; "
                    f"{r['mean'].iloc[:half].mean():.1f}% for n <= {r['n'].iloc[half - 1]}, "
                    f"{r['mean'].iloc[half:].mean():.1f}% for n >= {r['n'].iloc[half]}",
                }
            )
    for (m, e), g in share.groupby(["method", "epsilon"], sort=False):
        s = g[g.n.between(20, 40)]
        if len(s):
            out.append(
                {
                    "paper": "about 25% of Euclidean SPD releases not PD at n = 20-40, 2021 §5.1",
                    "ours": f"{m}, ε = {e:g}: {100 * s['mean'].mean():.1f}% averaged over "
                    f"n in {[int(v) for v in s.n]}",
                }
            )
    return out


def _plot(table, pairs, path):
    fig, axes = C.figure(2, 3)
    colors = {LAPLACE: "tab:blue", LAPLACE_EMP: "tab:cyan", EUCLID: "tab:red"}
    for row, space in enumerate(SPACES):
        label = "SPD(2), r = 1.5" if space == "SPD(2)" else "S², r = π/8"
        ax = axes[row, 0]
        p = pairs[pairs.space == space]
        jitter = np.exp(np.random.default_rng(0).uniform(-0.06, 0.06, len(p)))
        ax.scatter(p.n * jitter, p.rho, s=5, alpha=0.35, color="tab:blue", label="ρ(x̄, x̄') pairs")
        t = table[(table.panel == "sensitivity") & (table.space == space)]
        m = t[t.method == "empirical ρ(x̄, x̄')"]
        ax.plot(m.n, m["mean"], color="tab:blue", label="average")
        top = t[t.method == "empirical max"]
        ax.plot(top.n, top["mean"], color="tab:blue", ls="--", label="largest pair")
        b = t[t.method == "Theorem 2 bound"]
        ax.plot(b.n, b["mean"], color="tab:red", label="Theorem 2 bound")
        e = t[t.method.str.startswith("empirical bound")]
        if len(e):
            ax.plot(
                e.n, e["mean"], color="tab:orange", ls="--", label="empirical bound (suppl. §2.1)"
            )
        ax.set(xscale="log", yscale="log", xlabel="sample size n", ylabel="ρ(x̄, x̄')")
        ax.set_title(f"{label}: sensitivity of the Fréchet mean")
        ax.legend(fontsize=8)

        ax = axes[row, 1]
        u = table[(table.panel == "utility") & (table.space == space)]
        for meth, g in u.groupby("method", sort=False):
            # n x distance: the curves are O(1/n), so this keeps their gaps visible
            C.band(ax, g.n, g.n * g["mean"], g.n * g.se, label=meth, color=colors.get(meth))
        ax.set(xscale="log", xlabel="sample size n", ylim=(0, None))
        coords = "vech" if space == "SPD(2)" else "ℝ³"
        ax.set_ylabel(f"n × mean ‖summary − release‖ ({coords})")
        ax.set_title(f"{label}: utility × n, mean ± 2 SE (ε = 1)")
        ax.legend(fontsize=8)

        ax = axes[row, 2]
        if space == "SPD(2)":
            s = table[table.panel == "non_pd_share"]
            shades = {0.5: "tab:orange", 1.0: "tab:red", 2.0: "tab:purple"}
            for (meth, e), g in s.groupby(["method", "epsilon"], sort=False):
                paper = meth == NON_PD_FRECHET
                C.band(
                    ax,
                    g.n,
                    100 * g["mean"],
                    100 * g.se,
                    label=f"ε = {e:g}, " + ("Fréchet mean (paper)" if paper else "ambient mean"),
                    color=shades.get(e),
                    linestyle="-" if paper else "--",
                    marker="o" if paper else "s",
                )
            ax.axhline(25, color="k", lw=0.8, ls=":", label="paper: about 25% at n = 20–40")
            ax.set(
                xscale="log", xlabel="sample size n", ylabel="releases not positive definite (%)"
            )
            ax.set_title("SPD(2): Euclidean releases outside SPD")
        else:
            r = table[(table.panel == "reduction") & (table.space == space)]
            for meth, g in r.groupby("method", sort=False):
                C.band(ax, g.n, g["mean"], g.se, label=meth, color=colors.get(meth))
            ax.axhline(0, color="k", lw=0.8)
            ax.axhline(15, color="k", lw=0.8, ls=":", label="paper: about 15%")
            ax.set(xscale="log", xlabel="sample size n", ylabel="error reduction vs Euclidean (%)")
            ax.set_title("S²: error reduction vs Euclidean, ± 2 SE")
        ax.legend(fontsize=8)
    C.save_figure(fig, path, "laplace2021_fig1")
