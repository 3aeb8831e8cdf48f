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

**Inflation (2021 Thm 4).** On a ``d``-dimensional linear subspace of
:math:`\mathbb R^D` the ambient K-norm Laplace with rate ``sigma``, projected onto the
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
    },
    "quick": {
        "epsilon": 1.0,
        "n_grid": (50, 100, 200, 500, 1000),
        "replicates": 100,
        "inflation": {"d": 2, "D": (2, 3, 5, 10), "n": 100, "radius": 1.0, "replicates": 2000},
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
    else:
        M, center, r = pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), np.pi / 8

        def gen(n, rng):
            return sphere_cap(n, radius=r, random_seed=rng)

    kw = dict(epsilon=epsilon, center=center, radius=r)
    mechs = {
        METHODS[0]: pmd.LaplaceMechanism(M, restrict=True, **kw),
        METHODS[1]: pmd.KNGMechanism(M, **kw),
    }
    return M, gen, mechs


def _rate_chunk(space, n, epsilon, jobs):
    from pymc_manidp.stats.frechet import frechet_mean

    M, gen, mechs = _setup(space, epsilon)
    rows = []
    for rep, ss in jobs:
        rng = np.random.default_rng(ss)
        x = gen(n, rng)
        fm = frechet_mean(M, x, tol=1e-12).mean
        for name, mech in mechs.items():
            rel = mech.sample(x, 1, random_seed=rng)[0]
            rows.append(
                {
                    "space": space,
                    "method": name,
                    "n": n,
                    "rep": rep,
                    "rho2": float(M.dist(fm, rel)) ** 2,
                }
            )
    return rows


def _inflation_chunk(d, D, n, radius, epsilon, jobs):
    import pymc_manidp as pmd
    from pymc_manidp.baselines import EuclideanLaplace
    from pymc_manidp.datasets import uniform_radius_ball

    Md, MD = pmd.Euclidean(dim=d), pmd.Euclidean(dim=D)
    intrinsic = pmd.LaplaceMechanism(Md, epsilon=epsilon, center=np.zeros(d), radius=radius)
    ambient = EuclideanLaplace(MD, epsilon=epsilon, center=np.zeros(D), radius=radius)
    rows = []
    for rep, ss in jobs:
        rng = np.random.default_rng(ss)
        x = uniform_radius_ball(Md, n, center=np.zeros(d), radius=radius, random_seed=rng)
        xbar = x.mean(axis=0)
        xd = np.concatenate([x, np.zeros((n, D - d))], axis=1)  # the subspace R^d x {0}
        a = intrinsic.sample(x, 1, random_seed=rng)[0]
        b = ambient.sample(xd, 1, random_seed=rng)[0]
        rows.append(
            {
                "D": D,
                "rep": rep,
                "intrinsic": float(np.sum((a - xbar) ** 2)),
                "projected": float(np.sum((b[:d] - xbar) ** 2)),
                "ambient": float(np.sum((b[:d] - xbar) ** 2) + np.sum(b[d:] ** 2)),
            }
        )
    return rows


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


def theorems(*, quick=False, replicates=None, out=None, seed=3, progress=False, workers=None):
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

    Returns
    -------
    pandas.DataFrame
        Columns ``check, space, method, x, mean, se, count, theory``: for
        ``check == "rate"`` ``x`` is ``n`` and ``mean`` is E ρ²; for
        ``"inflation"`` ``x`` is ``D`` and ``mean`` the ratio to the intrinsic
        mechanism, ``theory`` its exact value.
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
    results = C.parallel_map(
        _dispatch, jobs, workers=workers, progress=progress, description="Theorems 3 and 4"
    )
    rate_rows = [
        r for res, job in zip(results, jobs, strict=True) if job[0] != "inflation" for r in res
    ]
    inf_rows = [
        r for res, job in zip(results, jobs, strict=True) if job[0] == "inflation" for r in res
    ]

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
    cols = ["check", "space", "method", "x", "mean", "se", "count", "theory"]
    table = pd.concat([rate[cols], pd.DataFrame(parts)[cols]], ignore_index=True)

    path = C.prepare_out(out, "theorems")
    C.write_table(table, path, "table")
    C.write_json(
        {
            "experiment": "theorems",
            "quick": quick,
            "seed": seed,
            "settings": cfg,
            "slopes": slopes,
            "statements": statements(table, slopes),
        },
        path,
        "summary",
    )
    _plot(table, slopes, path)
    return table


def _dispatch(*job):
    if job[0] == "inflation":
        return _inflation_chunk(*job[1:])
    return _rate_chunk(*job)


def statements(table, slopes):
    out = [
        {
            "paper": "E ρ(x̃, x̄)² = O(n⁻²): slope −2 on a log–log plot (2021 Thm 3, 2022 Thm 3)",
            "ours": f"{s['space']}, {s['method']}: slope {s['slope']:.3f} "
            f"± {2 * s['slope_se']:.3f} (2 SE) for n >= {s['from_n']}; "
            f"{s['slope_all_n']:.3f} ± {2 * s['slope_all_n_se']:.3f} over all n",
        }
        for s in slopes
    ]
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
