r"""Checks of the utility theorems: the rate of E ρ² (Thm 3 of both papers) and Thm 4 (2021).

**Rate.** 2021 Thm 3 (Laplace restricted to the ball, ``sigma = 2 Delta/eps``) and
2022 Thm 3 (KNG) give

.. math:: \mathbb E\,\rho(\tilde x, \bar x)^2 = O\Big(\frac{d^2 r^2}{n^2\epsilon^2}\Big),

so :math:`\log \mathbb E\rho^2` against :math:`\log n` has slope −2. We estimate
:math:`\mathbb E\rho^2` by replicates (a fresh dataset each, one exact draw) on S²
(``r = pi/8``) and SPD(2) (``r = 1.5``), ``eps = 1``, and fit the slope by weighted
least squares (weights ``1/SE²`` of the log means) over ``n >= 100``: the theorems
assume ``sigma -> 0``, and at small ``n`` the ball truncates the law (the fit over all
``n`` is reported as well).

**Scaling in d and ε.** The same theorems give ``O(d²/(n² ε²))``. At fixed ``n``
we estimate E ρ² on S², S⁴, S⁸ (ε = 1) and for ε = 0.5, 1, 2 (S²), divide by the
σ → 0 value :math:`\sigma^2 d(d+1)` (``rho ~ Gamma(d, sigma)`` in normal
coordinates), and fit the exponents of E ρ² in ε (theory −2) and in ``d(d+1)``
(theory 1).

**Inflation (2021 Thm 4).** On a ``d``-dimensional linear subspace of
:math:`\mathbb R^D` the ambient K-norm Laplace with scale ``sigma``, projected onto the
subspace, has :math:`\mathbb E\|P\tilde x_D - \bar x\|^2 = \sigma^2 d (D+1)` (the
theorem's proof), against :math:`\sigma^2 d(d+1)` for the Laplace built on the
subspace: a ratio :math:`(D+1)/(d+1)` ("D/d"). Without the projection the ratio is
:math:`D(D+1)/(d(d+1))`. Both mechanisms have the same ``sigma = 2r/(n eps)`` here
(data in a ball of radius ``r`` of the subspace).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from pymc_manidp.experiments import _common as C

__all__ = ["SETTINGS", "fit_slope", "theorems"]

SETTINGS = {
    "full": {
        "epsilon": 1.0,
        "n_grid": (20, 50, 100, 200, 500, 1000, 2000, 5000),
        "replicates": 500,
        "inflation": {
            "d": 2,
            "D": (2, 3, 4, 6, 10, 20),
            "n": 100,
            "radius": 1.0,
            "replicates": 20_000,
        },
        "scaling": {"n": 1000, "dims": (2, 4, 8), "epsilons": (0.5, 1.0, 2.0), "replicates": 500},
    },
    "quick": {
        "epsilon": 1.0,
        "n_grid": (50, 100, 200, 500, 1000),
        "replicates": 100,
        "inflation": {"d": 2, "D": (2, 3, 5, 10), "n": 100, "radius": 1.0, "replicates": 2000},
        "scaling": {"n": 500, "dims": (2, 4, 8), "epsilons": (0.5, 1.0, 2.0), "replicates": 60},
    },
}
SPACES = ("S2", "SPD(2)")
ASYMPTOTIC_N = 100  # smallest n of the slope fit (see theorems())
METHODS = ("Laplace restricted to the ball (2021 Thm 3)", "KNG (2022 Thm 3)")


@cache
def _setup(space, epsilon):
    import pymc_manidp as pmd
    from pymc_manidp.datasets import sphere_cap, wishart_in_ball

    if space == "SPD(2)":
        M, center, r = pmd.SPD(k=2), np.eye(2), 1.5

        def gen(n, rng):
            return wishart_in_ball(n, k=2, df=2.0, radius=r, random_seed=rng)
    else:  # "S2", "S4", "S8": the 2021 supplement's cap data on S^d
        M, r = pmd.Sphere(dim=int(space[1:])), np.pi / 8
        center = np.zeros(M.dim + 1)
        center[-1] = 1.0

        def gen(n, rng):
            return sphere_cap(n, radius=r, sphere=M, random_seed=rng)

    kw = dict(epsilon=epsilon, center=center, radius=r)
    mechs = {
        METHODS[0]: pmd.LaplaceMechanism(M, restrict=True, **kw),
        METHODS[1]: pmd.KNGMechanism(M, **kw),
    }
    return M, gen, mechs


def _refuse_budget():
    from pymc_manidp.privacy.budget import current_budget

    if current_budget() is not None:  # as Mechanism.sample refused before release_many
        raise ValueError(
            "the experiments release simulated replicates, not charged to a privacy "
            "budget: run them outside 'with budget:'"
        )


def _rate_chunk(space, n, epsilon, jobs):
    """One replicate per seed: a dataset, its Fréchet mean, one release per mechanism.

    The chunk's means are one batched descent and each mechanism releases the chunk's
    data sets in one call (``release_many``, issue 26), each replicate from its own
    generator, drawn from in the order of the per-replicate loop this replaced.
    """
    from pymc_manidp.stats.frechet import frechet_means

    _refuse_budget()
    M, gen, mechs = _setup(space, epsilon)
    rngs = [np.random.default_rng(ss) for _, ss in jobs]
    stack = np.stack([gen(n, rng) for rng in rngs])
    fms = frechet_means(M, stack, tol=1e-12).means
    rho2 = {
        name: M.dist(fms, mech.release_many(stack, random_seed=rngs).values) ** 2
        for name, mech in mechs.items()
    }
    rows = []
    for j, (rep, _) in enumerate(jobs):
        for name, mech in mechs.items():
            rows.append(
                {
                    "space": space,
                    "method": name,
                    "n": n,
                    "epsilon": epsilon,
                    "rep": rep,
                    "rho2": float(rho2[name][j]),
                    # the asymptotic (sigma -> 0) value: rho ~ Gamma(d, sigma)
                    "gamma_rho2": mech.sigma(n) ** 2 * M.dim * (M.dim + 1),
                }
            )
    return rows


def _inflation_chunk(d, D, n, radius, epsilon, jobs):
    """One replicate per seed: data in R^d, the intrinsic and the ambient Laplace.

    Both mechanisms release the chunk's data sets in one call (``release_many``),
    each replicate from its own generator (data, intrinsic, ambient, in that order).
    """
    import pymc_manidp as pmd
    from pymc_manidp.datasets import uniform_radius_ball
    from pymc_manidp.mechanisms.baselines import EuclideanLaplace

    _refuse_budget()
    Md, MD = pmd.Euclidean(dim=d), pmd.Euclidean(dim=D)
    intrinsic = pmd.LaplaceMechanism(Md, epsilon=epsilon, center=np.zeros(d), radius=radius)
    ambient = EuclideanLaplace(MD, epsilon=epsilon, center=np.zeros(D), radius=radius)
    rngs = [np.random.default_rng(ss) for _, ss in jobs]
    x = np.stack(
        [
            uniform_radius_ball(Md, n, center=np.zeros(d), radius=radius, random_seed=rng)
            for rng in rngs
        ]
    )
    xbar = x.mean(axis=1)
    xd = np.concatenate([x, np.zeros((len(x), n, D - d))], axis=2)  # the subspace R^d x {0}
    a = intrinsic.release_many(x, random_seed=rngs).values
    b = ambient.release_many(xd, random_seed=rngs).values
    intr = np.sum((a - xbar) ** 2, axis=1)
    proj = np.sum((b[:, :d] - xbar) ** 2, axis=1)
    amb = proj + np.sum(b[:, d:] ** 2, axis=1)
    return [
        {
            "D": D,
            "rep": rep,
            "intrinsic": float(intr[j]),
            "projected": float(proj[j]),
            "ambient": float(amb[j]),
        }
        for j, (rep, _) in enumerate(jobs)
    ]


def fit_slope(n, mean, se):
    """Weighted least-squares slope of ``log mean`` on ``log n`` and its standard error.

    Weights are ``1/var(log mean) = (mean/se)²`` (delta method).

    Examples
    --------
    >>> n = np.array([10.0, 100.0, 1000.0])
    >>> s, s_se = fit_slope(n, 5.0 / n**2, 0.01 * 5.0 / n**2)
    >>> round(s, 6), bool(s_se < 0.05)
    (-2.0, True)
    """
    x, y = np.log(np.asarray(n, float)), np.log(np.asarray(mean, float))
    w = (np.asarray(mean, float) / np.asarray(se, float)) ** 2
    X = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    beta = cov @ X.T @ (w * y)
    return float(beta[1]), float(np.sqrt(cov[1, 1]))


def theorems(
    *, quick=False, replicates=None, out=None, seed=3, progress=False, workers=None, scheduler=None
):
    """Check the rate of E ρ² (slope −2) and Theorem 4's inflation; returns the table.

    Parameters
    ----------
    quick : bool
    replicates : int, optional
        Replicates per ``n`` of the rate check (default 500; quick 100); the
        inflation check uses ``max(20 * replicates, 1000)``.
    out : path, optional
        Writes ``theorems/`` with ``rate.png``, ``inflation.png``, ``table.csv``
        and ``summary.json`` (fitted slopes).
    seed : int
    progress : bool
    workers : int, optional
    scheduler : None, str or distributed.Client, optional
        Where the replicates run: None, the current ``distributed`` client if there is
        one, else Dask's local scheduler; a client, its address, or ``"threads"`` /
        ``"processes"`` / ``"sync"`` (``experiments._common.cluster``). Results do not
        depend on it.

    Returns
    -------
    pandas.DataFrame
        Columns ``check, space, method, x, mean, se, count, theory``: for
        ``check == "rate"`` ``x`` is ``n`` and ``mean`` is E ρ²; for
        ``"inflation"`` ``x`` is ``D`` and ``mean`` the ratio to the intrinsic
        mechanism, ``theory`` its exact value; for ``"scaling"`` ``x`` is ``d``
        (rows with ε = 1) or ε (S², other ε) and ``mean`` is E ρ² / (σ² d(d+1)).
    """
    import pandas as pd

    cfg = dict(SETTINGS["quick" if quick else "full"])
    infl = dict(cfg["inflation"])
    if replicates is not None:
        cfg["replicates"] = int(replicates)
        infl["replicates"] = max(20 * int(replicates), 1000)
    cfg["inflation"] = infl
    workers = C.default_workers() if workers is None else int(workers)
    eps, grid, reps = cfg["epsilon"], cfg["n_grid"], cfg["replicates"]

    jobs = []
    for s, space in enumerate(SPACES):
        for i, n in enumerate(grid):
            seeds = C.child_seeds(seed, 0, s, i, count=reps)
            size = max(1, min(25, reps // 4))
            jobs += [(space, n, eps, [(j, seeds[j]) for j in p]) for p in C.chunks(reps, size)]
    d, n_inf, rad, r_inf = infl["d"], infl["n"], infl["radius"], infl["replicates"]
    for k, D in enumerate(infl["D"]):
        seeds = C.child_seeds(seed, 1, k, count=r_inf)
        jobs += [
            ("inflation", d, D, n_inf, rad, eps, [(j, seeds[j]) for j in p])
            for p in C.chunks(r_inf, max(1, r_inf // 4))
        ]
    sc = dict(cfg["scaling"])
    if replicates is not None:
        sc["replicates"] = int(replicates)
    cfg["scaling"] = sc
    # d at eps = 1 and eps on S^2: five settings, each with its own seed node
    combos = [(f"S{d}", 1.0) for d in sc["dims"]]
    combos += [("S2", float(e)) for e in sc["epsilons"] if e != 1.0]
    for k, (space, e) in enumerate(combos):
        seeds = C.child_seeds(seed, 2, k, count=sc["replicates"])
        size = max(1, min(25, sc["replicates"] // 4))
        jobs += [
            ("scaling", space, sc["n"], e, [(j, seeds[j]) for j in p])
            for p in C.chunks(sc["replicates"], size)
        ]
    results = C.parallel_map(
        _dispatch,
        jobs,
        workers=workers,
        progress=progress,
        scheduler=scheduler,
        description="Theorems 3 and 4",
    )

    def rows_of(kind):
        return [
            r
            for res, job in zip(results, jobs, strict=True)
            if (job[0] if job[0] in ("inflation", "scaling") else "rate") == kind
            for r in res
        ]

    rate_rows, inf_rows, scale_rows = rows_of("rate"), rows_of("inflation"), rows_of("scaling")

    rate = C.summarize(rate_rows, ["space", "method", "n"], "rho2").rename(columns={"n": "x"})
    rate["check"], rate["theory"] = "rate", np.nan
    slopes = []
    for (space, method), g in rate.groupby(["space", "method"], sort=False):
        # the theorems are asymptotic (sigma -> 0): at small n the ball truncates the
        # law and flattens the curve, so the headline slope uses n >= ASYMPTOTIC_N
        big = g[g.x >= ASYMPTOTIC_N]
        s, s_se = fit_slope(big.x, big["mean"], big.se)
        s_all, s_all_se = fit_slope(g.x, g["mean"], g.se)
        slopes.append(
            {"space": space, "method": method, "slope": s, "slope_se": s_se}
            | {"slope_all_n": s_all, "slope_all_n_se": s_all_se, "from_n": ASYMPTOTIC_N}
        )

    idf = pd.DataFrame(inf_rows)
    parts = []
    for D, g in idf.groupby("D", sort=True):
        base = g["intrinsic"].mean()
        for col, theory in (
            ("projected", (D + 1) / (d + 1)),
            ("ambient", D * (D + 1) / (d * (d + 1))),
        ):
            ratio = g[col].mean() / base
            # delta-method SE of a ratio of means (paired replicates)
            cov = np.cov(g[col], g["intrinsic"])
            se = (
                ratio
                * np.sqrt(
                    cov[0, 0] / g[col].mean() ** 2
                    + cov[1, 1] / base**2
                    - 2 * cov[0, 1] / (g[col].mean() * base)
                )
                / np.sqrt(len(g))
            )
            parts.append(
                {
                    "check": "inflation",
                    "space": f"R^{D} ⊃ R^{d}",
                    "method": f"ambient Laplace, {col}",
                    "x": D,
                    "mean": ratio,
                    "se": se,
                    "count": len(g),
                    "theory": theory,
                }
            )
        sigma = 2 * rad / (n_inf * eps)
        parts.append(
            {
                "check": "inflation",
                "space": f"R^{D} ⊃ R^{d}",
                "method": "E‖P x̃_D − x̄‖² / σ²",
                "x": D,
                "mean": g["projected"].mean() / sigma**2,
                "se": g["projected"].std() / np.sqrt(len(g)) / sigma**2,
                "count": len(g),
                "theory": d * (D + 1),
            }
        )
    scaling, scale_fits = _scaling_table(scale_rows)
    cols = ["check", "space", "method", "x", "mean", "se", "count", "theory"]
    table = pd.concat([rate[cols], pd.DataFrame(parts)[cols], scaling[cols]], ignore_index=True)

    path = C.prepare_out(out, "theorems")
    C.write_table(table, path, "table")
    C.write_json(
        {
            "experiment": "theorems",
            "quick": quick,
            "seed": seed,
            "settings": cfg,
            "slopes": slopes,
            "scaling_fits": scale_fits,
            "statements": statements(table, slopes, scale_fits),
        },
        path,
        "summary",
    )
    _plot(table, slopes, path)
    _plot_scaling(table, path)
    return table


def _dispatch(*job):
    if job[0] == "inflation":
        return _inflation_chunk(*job[1:])
    if job[0] == "scaling":
        return _rate_chunk(*job[1:])
    return _rate_chunk(*job)


def _scaling_table(rows):
    """E ρ² at fixed n over d (ε = 1) and over ε (S²), with its σ → 0 value σ² d(d+1).

    ``mean`` is E ρ² / (σ² d(d+1)): flat in d and ε when E ρ² = O(d²/(n²ε²)) holds with
    the Gamma law's constant (1 for the Laplace as σ → 0; KNG's ‖∇F‖ is a little
    smaller than ρ away from the mean on a positively curved space, so slightly above
    1). Also returns the fitted exponents of E ρ² in ε (theory −2) and in d(d+1)
    (theory 1), per mechanism.
    """
    import pandas as pd

    df = pd.DataFrame(rows)
    df["ratio"] = df["rho2"] / df["gamma_rho2"]
    out, fits = [], []
    for (space, method, e), g in df.groupby(["space", "method", "epsilon"], sort=False):
        d = int(space[1:])
        out.append(
            {
                "check": "scaling",
                "space": f"{space}, ε = {e:g}",
                "method": method,
                "x": d if e == 1.0 else e,
                "mean": g["ratio"].mean(),
                "se": g["ratio"].std(ddof=1) / np.sqrt(len(g)),
                "count": len(g),
                "theory": 1.0,
                "rho2": g["rho2"].mean(),
                "rho2_se": g["rho2"].std(ddof=1) / np.sqrt(len(g)),
                "d": d,
                "epsilon": e,
            }
        )
    t = pd.DataFrame(out)
    for method, g in t.groupby("method", sort=False):
        by_eps = g[g.d == 2].sort_values("epsilon")
        by_dim = g[g.epsilon == 1.0].sort_values("d")
        s_eps, s_eps_se = fit_slope(by_eps.epsilon, by_eps.rho2, by_eps.rho2_se)
        dd = by_dim.d * (by_dim.d + 1)
        s_dim, s_dim_se = fit_slope(dd, by_dim.rho2, by_dim.rho2_se)
        fits.append(
            {"method": method, "eps_exponent": s_eps, "eps_exponent_se": s_eps_se}
            | {"d_d1_exponent": s_dim, "d_d1_exponent_se": s_dim_se}
        )
    return t, fits


def statements(table, slopes, scale_fits=()):
    out = [
        {
            "paper": "E ρ(x̃, x̄)² = O(n⁻²): slope −2 on a log–log plot (2021 Thm 3, 2022 Thm 3)",
            "ours": f"{s['space']}, {s['method']}: slope {s['slope']:.3f} "
            f"± {2 * s['slope_se']:.3f} (2 SE) for n >= {s['from_n']}; "
            f"{s['slope_all_n']:.3f} ± {2 * s['slope_all_n_se']:.3f} over all n",
        }
        for s in slopes
    ]
    sc = table[table.check == "scaling"]
    for f in scale_fits:
        g = sc[sc.method == f["method"]]
        out.append(
            {
                "paper": "E ρ(x̃, x̄)² = O(d²/(n²ε²)) (2021 Thm 3, 2022 Thm 3): scaling in d "
                "(S², S⁴, S⁸) and ε (0.5, 1, 2)",
                "ours": f"{f['method']}: E ρ² ∝ ε^{f['eps_exponent']:.2f} "
                f"(± {2 * f['eps_exponent_se']:.2f}; theory −2), ∝ (d(d+1))^"
                f"{f['d_d1_exponent']:.2f} (± {2 * f['d_d1_exponent_se']:.2f}; theory 1); "
                "E ρ² / (σ² d(d+1)) = "
                + ", ".join(f"{r.space}: {r['mean']:.3f}" for _, r in g.iterrows()),
            }
        )
    t = table[(table.check == "inflation") & table.method.str.endswith("projected")]
    out.append(
        {
            "paper": "2021 Thm 4: projecting an ambient Laplace inflates E‖·‖² by "
            "(D+1)/(d+1) ≈ D/d",
            "ours": "; ".join(
                f"D = {int(r.x)}: {r['mean']:.3f} ± {2 * r.se:.3f} (theory {r.theory:.3f})"
                for _, r in t.iterrows()
            ),
        }
    )
    return out


def _plot(table, slopes, path):
    rate = table[table.check == "rate"]
    fig, axes = C.figure(1, 2, width=5.6, height=5.0)
    colors = {METHODS[0]: "tab:blue", METHODS[1]: "tab:green"}
    for ax, space in zip(axes[0], SPACES, strict=True):
        for meth, g in rate[rate.space == space].groupby("method", sort=False):
            s = next(x for x in slopes if x["space"] == space and x["method"] == meth)
            C.band(
                ax,
                g.x,
                g["mean"],
                g.se,
                label=f"{meth}: slope {s['slope']:.2f} ± {2 * s['slope_se']:.2f} "
                f"(n ≥ {s['from_n']})",
                color=colors[meth],
            )
            x = np.asarray(g.x, float)
            anchor = g[g.x >= ASYMPTOTIC_N].iloc[0]
            ref = anchor["mean"] * (x / anchor.x) ** -2.0
        ax.plot(x, ref, color="k", ls=":", label="slope −2 (theory)")
        ax.set(xscale="log", yscale="log", xlabel="sample size n", ylabel="E ρ(x̃, x̄)²")
        ax.set_title(
            ("S², r = π/8" if space == "S2" else "SPD(2), r = 1.5") + ", ε = 1: mean ± 2 SE"
        )
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    C.save_figure(fig, path, "rate")

    inf = table[table.check == "inflation"]
    fig, axes = C.figure(1, 1, width=5.6, height=4.2)
    ax = axes[0, 0]
    for meth, c in (
        ("ambient Laplace, projected", "tab:red"),
        ("ambient Laplace, ambient", "tab:orange"),
    ):
        g = inf[inf.method == meth]
        C.band(
            ax,
            g.x,
            g["mean"],
            g.se,
            label=meth.replace("ambient Laplace, ", "Monte Carlo: "),
            color=c,
        )
        ax.plot(
            g.x,
            g.theory,
            color=c,
            ls=":",
            marker="x",
            label="theory: " + ("(D+1)/(d+1)" if meth.endswith("projected") else "D(D+1)/(d(d+1))"),
        )
    ax.set(xscale="log", yscale="log", xlabel="ambient dimension D (manifold: d = 2)")
    ds = sorted(inf.x.unique())
    ax.set_xticks(ds, labels=[str(int(v)) for v in ds])
    ax.minorticks_off()
    ax.set_ylabel("E‖x̃ − x̄‖², ambient / intrinsic")
    ax.set_title("2021 Thm 4: inflation of an ambient Laplace, mean ± 2 SE")
    ax.legend(fontsize=8)
    C.save_figure(fig, path, "inflation")


def _plot_scaling(table, path):
    sc = table[table.check == "scaling"].copy()
    # labels are "S<d>, ε = <eps>": the d panel holds ε = 1, the ε panel S²
    sc["d"] = sc.space.str.extract(r"^S(\d+),", expand=False).astype(int)
    sc["eps"] = sc.space.str.extract(r"ε = ([\d.]+)$", expand=False).astype(float)
    fig, axes = C.figure(1, 2, width=5.0, height=4.0)
    colors = {METHODS[0]: "tab:blue", METHODS[1]: "tab:green"}
    for ax, (label, key, pick) in zip(
        axes[0],
        (
            ("dimension d of S^d (ε = 1)", "d", sc.eps == 1.0),
            ("ε (S²)", "eps", sc.d == 2),
        ),
        strict=True,
    ):
        for meth, g in sc[pick].groupby("method", sort=False):
            g = g.sort_values(key)
            C.band(ax, g[key], g["mean"], g.se, label=meth, color=colors[meth])
        ax.axhline(1.0, color="k", ls=":", label="σ → 0 value: σ² d(d+1)")
        ax.set(xscale="log", xlabel=label, ylabel="E ρ² / (σ² d(d+1))", ylim=(0, 1.6))
        xs = sorted(sc[pick][key].unique())
        ax.set_xticks(xs, labels=[f"{v:g}" for v in xs])
        ax.minorticks_off()
        ax.legend(fontsize=8)
    fig.suptitle("Thm 3 (both papers): E ρ² = O(d²/(n²ε²)), mean ± 2 SE")
    C.save_figure(fig, path, "scaling")
