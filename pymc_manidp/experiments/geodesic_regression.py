r"""Issue 41: private geodesic regression on S², the design of Kulkarni & Soto (2025).

The design: footpoint ``p = (1, 0, 0)``, slope ``v = (0, pi/4, 0)``, covariates on the
grid ``x_i = -1 + 2i/n`` of ``[-1, 1)``, responses ``Exp_p(x_i v)`` plus Gaussian noise of
variance 0.001 per coordinate, renormalized onto the sphere. For each ``(n, eps)`` and
replicate: the least-squares fit ``(p_hat, v_hat)`` (``geodesic_regression``) and one
exact release ``(p_tilde, v_tilde)`` of ``RegressionKNGMechanism``; the errors
``rho(p_tilde, p_hat)`` and ``|Gamma v_tilde - v_hat|`` (the slope transported from
``p_tilde`` to ``p_hat`` along their geodesic); and, side by side, the paper's
data-dependent footpoint sensitivity ``2 tau_hat / n`` (``tau_hat = max_i rho(y_hat_i,
y_i)`` at the fit, which breaks DP) against ours, ``Delta_p`` from public bounds.

Public bounds (chosen from the design, never from the data): center ``m = p`` (the
design's midpoint), data radius ``r = 0.78`` (below ``r* = pi/4``; the noise-free design
reaches ``pi/4`` at ``x = -1``, so it cannot be held by a ball below ``r*``: responses
beyond ``r`` are projected onto the ball along the geodesic from ``m``, a per-record map
fixed in advance, which keeps ε-DP with respect to the raw responses; the share projected
is in the table), covariate bound ``X = 1``, slope bound ``V = 0.9 > pi/4``, footpoint
radius ``R = 0.1``.

The exact sampler (rejection from the uniform law of the domain) accepts a share that
falls like ``sigma^4``: measured 0.04 at ``n eps = 100``, 0.0014 at 500 and below
1/3,000 at 1,000 (2026-11-28). Cells with ``n eps`` above :data:`MAX_N_EPSILON` are
refused from these public facts before any data are drawn, and listed as such in the
table (``status = "beyond the exact sampler"``).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from pymc_manidp.experiments import _common as C

__all__ = ["MAX_N_EPSILON", "SETTINGS", "geodesic_regression"]

SETTINGS = {
    "full": {
        "n_grid": (20, 50, 100, 200, 500, 1000),
        "epsilons": (0.5, 1.0, 2.0, 5.0),
        "replicates": 20,
    },
    "quick": {"n_grid": (20, 100), "epsilons": (1.0, 5.0), "replicates": 3},
}
#: the paper's design
FOOTPOINT = np.array([1.0, 0.0, 0.0])
SLOPE = np.array([0.0, np.pi / 4, 0.0])
NOISE_VARIANCE = 0.001
#: public bounds (module docstring)
RADIUS, COVARIATE_BOUND, SLOPE_BOUND, FOOTPOINT_RADIUS = 0.78, 1.0, 0.9, 0.1
#: largest n * eps the exact sampler is run at (acceptance about 1/700 there)
MAX_N_EPSILON = 500.0
BEYOND = "beyond the exact sampler"


def design(n, rng):
    """``(x, y_raw)``: the paper's covariates and noisy responses (``y_raw`` unclipped)."""
    import pymc_manidp as pmd

    S = pmd.Sphere(dim=2)
    x = -1.0 + 2.0 * np.arange(n) / n
    y = S.exp(np.broadcast_to(FOOTPOINT, (n, 3)), x[:, None] * SLOPE[None])
    y = y + rng.normal(0.0, np.sqrt(NOISE_VARIANCE), y.shape)
    return x, y / np.linalg.norm(y, axis=1, keepdims=True)


def project_onto_ball(y):
    """Responses beyond ``RADIUS`` from the center moved onto the ball's edge along the
    geodesic from the center: ``(y, number moved)``."""
    import pymc_manidp as pmd

    S = pmd.Sphere(dim=2)
    d = S.dist(FOOTPOINT, y)
    far = d > RADIUS
    y = y.copy()
    if np.any(far):
        base = np.broadcast_to(FOOTPOINT, (int(far.sum()), 3))
        # a hair inside, so that rounding in the ball's check never sees them outside
        y[far] = S.exp(base, S.log(base, y[far]) * (RADIUS * (1 - 1e-12) / d[far])[:, None])
    return y, int(far.sum())


@cache
def mechanism(epsilon: float):
    import pymc_manidp as pmd

    return pmd.RegressionKNGMechanism(
        pmd.Sphere(dim=2),
        epsilon=epsilon,
        center=FOOTPOINT,
        radius=RADIUS,
        covariate_bound=COVARIATE_BOUND,
        slope_bound=SLOPE_BOUND,
        footpoint_radius=FOOTPOINT_RADIUS,
    )


def _chunk(n, epsilon, jobs):
    import pymc_manidp as pmd
    from pymc_manidp.geometry.jacobi import transport

    S = pmd.Sphere(dim=2)
    mech = mechanism(epsilon)
    rows = []
    for rep, ss in jobs:
        rng = np.random.default_rng(ss)
        x, y = design(n, rng)
        y, moved = project_onto_ball(y)
        fit = pmd.geodesic_regression(S, x, y)
        p_hat, v_hat = fit.footpoint, fit.slope
        yhat = S.exp(np.broadcast_to(p_hat, (n, 3)), x[:, None] * v_hat[None])
        tau_hat = float(np.max(S.dist(yhat, y)))
        base = {"n": n, "epsilon": epsilon, "rep": rep, "projected": moved / n}
        base |= {"tau_hat": tau_hat, "paper_delta_p": 2 * tau_hat / n}
        base["delta_p"] = mech.sensitivities(n)[0]
        if n * epsilon > MAX_N_EPSILON:
            rows.append({**base, "status": BEYOND, "dist_p": np.nan, "dist_v": np.nan})
            continue
        theta = mech.sample(x, y, 1, random_seed=rng)[0]
        p_t, v_t = theta[0], theta[1]
        moved_v = transport(S, p_t, S.log(p_t, p_hat), v_t)
        rows.append(
            {
                **base,
                "status": "released",
                "dist_p": float(S.dist(p_t, p_hat)),
                "dist_v": float(np.linalg.norm(moved_v - v_hat)),
            }
        )
    return rows


def geodesic_regression(
    *,
    quick=False,
    replicates=None,
    out=None,
    seed=20211206,
    progress=False,
    workers=None,
    scheduler=None,
):
    """Errors of the private geodesic regression on the paper's S² design (issue 41).

    Parameters
    ----------
    quick : bool
        ``n`` in {20, 100}, ε in {1, 5}, 3 replicates.
    replicates : int, optional
        Replicates per cell (default 20).
    out : path, optional
        Writes ``geodesic_regression/`` with ``geodesic_regression.png``, ``table.csv``
        and ``summary.json``.
    seed : int
    progress : bool
    workers : int, optional
    scheduler : None, str or distributed.Client, optional

    Returns
    -------
    pandas.DataFrame
        One row per ``(n, epsilon, quantity)``: ``quantity`` is ``dist_p``, ``dist_v``
        (NaN where ``n eps > MAX_N_EPSILON``), ``tau_hat``, ``paper_delta_p``,
        ``delta_p`` or ``projected``; columns ``mean, sd, count, se``.
    """
    import pandas as pd

    cfg = dict(SETTINGS["quick" if quick else "full"])
    if replicates is not None:
        cfg["replicates"] = int(replicates)
    reps = cfg["replicates"]
    workers = C.default_workers() if workers is None else int(workers)
    jobs = []
    for i, n in enumerate(cfg["n_grid"]):
        for k, eps in enumerate(cfg["epsilons"]):
            seeds = C.child_seeds(seed, i, k, count=reps)
            jobs += [
                (n, eps, [(j, seeds[j]) for j in part])
                for part in C.chunks(reps, max(1, min(10, reps // 2)))
            ]
    rows = [
        r
        for rows in C.parallel_map(
            _chunk,
            jobs,
            workers=workers,
            progress=progress,
            scheduler=scheduler,
            description="geodesic regression",
        )
        for r in rows
    ]
    long = pd.DataFrame(rows).melt(
        id_vars=["n", "epsilon", "rep", "status"],
        value_vars=["dist_p", "dist_v", "tau_hat", "paper_delta_p", "delta_p", "projected"],
        var_name="quantity",
    )
    long = long.dropna(subset=["value"])
    table = C.summarize(long.to_dict("records"), ["n", "epsilon", "quantity", "status"], "value")
    path = C.prepare_out(out, "geodesic_regression")
    C.write_table(table, path, "table")
    C.write_json(
        {
            "experiment": "geodesic_regression",
            "quick": quick,
            "seed": seed,
            "settings": cfg,
            "bounds": {
                "center": FOOTPOINT,
                "radius": RADIUS,
                "covariate_bound": COVARIATE_BOUND,
                "slope_bound": SLOPE_BOUND,
                "footpoint_radius": FOOTPOINT_RADIUS,
                "max_n_epsilon": MAX_N_EPSILON,
            },
        },
        path,
        "summary",
    )
    _plot(table, cfg, path)
    return table


def _plot(table, cfg, path):
    fig, axes = C.figure(1, 3, width=3.6, height=3.0)
    # a fifth epsilon (--replicates only changes counts) would take matplotlib's next colour
    palette = ("tab:blue", "tab:green", "tab:orange", "tab:red")
    colors = dict(zip(cfg["epsilons"], palette, strict=False))
    for ax, q, label in zip(
        axes[0][:2], ("dist_p", "dist_v"), ("ρ(p̃, p̂)", "‖Γṽ − v̂‖"), strict=True
    ):
        t = table[table.quantity == q]
        for eps, g in t.groupby("epsilon"):
            C.band(ax, g.n, g["mean"], g.se, label=f"ε = {eps:g}", color=colors.get(eps))
        ax.set(xscale="log", yscale="log", xlabel="n", title=f"mean {label} ± 2 SE")
    axes[0][0].legend(fontsize=7)
    ax = axes[0][2]
    for q, label, style in (("delta_p", "ours (public)", "-"), ("paper_delta_p", "2τ̂/n", "--")):
        t = table[(table.quantity == q) & (table.epsilon == cfg["epsilons"][0])]
        C.band(ax, t.n, t["mean"], t.se, label=label, color="k", linestyle=style)
    ax.set(xscale="log", yscale="log", xlabel="n", title="footpoint sensitivity Δ_p")
    ax.legend(fontsize=7)
    C.save_figure(fig, path, "geodesic_regression")
