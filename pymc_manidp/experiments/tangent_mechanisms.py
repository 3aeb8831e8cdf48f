r"""Issue 39 item 5: where each mechanism wins, the tangent ones against the papers'.

Four parts, one table (column ``part``); the error is always the geodesic distance
ρ(release, x̄) to the data's Fréchet mean, one row per simulated data set (the mean
over ``draws`` exact releases of that data set), then mean ± SE over data sets.

- ``pure``: ε = 1, n from 50 to 5,000, on S² (r = π/8), SPD(2), SPD(3), H² (r = 1.5),
  SO(3) (r = π/8) and Kendall(4) (r = 0.35), data uniform in radius in the ball:
  tangent Laplace (K-norm at the center, σ = L Δ/ε), manifold Laplace (2021,
  σ = 2Δ/ε) and KNG (2022), all by their exact samplers.
- ``k_release``: one budget (ε, δ) = (1, 10⁻⁶) spent on k = 1, 4, 16, 64 releases of
  the same data (n = 100). A pure mechanism gets the larger of ε/k (basic
  composition) and the largest ε_k whose plan of k pure charges fits the budget under
  optimal composition (the package's PLD accounting); a tangent Gaussian gets
  (ε_k, δ/k) with the largest ε_k whose plan of k Gaussian charges fits (GDP:
  μ_total = √k μ_k). Both searches ask ``PrivacyBudget(..., composition="optimal",
  plan=...)`` itself, so the shares are the ones the package would admit. Error of one
  release at that share (every release of the k has the same law).
- ``two_stage``: H², n records within 0.05 r of a point 0.8 r from the center, r from
  0.5 to 3: the tangent Gaussian at the center against ``TwoStageTangentMechanism``
  (split 0.2), (1, 10⁻⁶).
- ``iclr``: the ICLR 2026 setting, n = 40, r = 1.5, SPD (dimension 3, 10, 15: SPD(2),
  SPD(4), SPD(5)) and H^d (d = 3, 10, 15), ε ∈ {0.5, 1, 2, 5}: tangent Laplace against
  the manifold Laplace (their claim: a scale Δ/ε against 2Δ/ε, so about half the error)
  and KNG.
- ``iclr_gdp``: the same setting on the paper's GDP axis, μ ∈ {0.1, 0.5, 1, 2} (the
  grid's ends and the values the math note converts): the tangent Gaussian at
  σ = Δ_T/μ (μ-GDP, their "EWG"), and the pure mechanisms at ε = logit Φ(μ/2), the
  largest ε whose ε-DP implies μ-GDP: the tangent Laplace (their "EWL", Δ_T/ε), the
  **restricted** manifold Laplace (2021 Thm 3, 2Δ/ε: the baseline of their claim) and
  the unrestricted one (Δ/ε, where it is normalizable). Column ``mu``.
- ``jiang``: Jiang et al.'s comparison on S^d (d = 2, 3, 10; n = 100, r = π/8; their
  own n, r and grid could not be read, so ours), on the same GDP axis: the Riemannian
  Gaussian at the σ whose *estimated* μ (quadrature of the privacy profile, their
  accounting) is the target, the same at the *proved* pure ε = logit Φ(μ/2), the
  manifold Laplace (Δ/ε, homogeneous) and the tangent Gaussian and Laplace.

The restricted Laplace on H^d is drawn by :func:`ball_laplace_draws` (the package's
exact sampler, polar at the footpoint, accepts almost nothing on H^10 and H^15 when σ
is large); on SPD by the package's exact sampler.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from pymc_manidp.experiments import _common as C

__all__ = ["SETTINGS", "budget_shares", "tangent_mechanisms"]

SETTINGS = {
    "full": {
        "epsilon": 1.0,
        "delta": 1e-6,
        "n_grid": (50, 100, 200, 500, 1000, 2000, 5000),
        "k_grid": (1, 4, 16, 64),
        "k_n": 100,
        "radii": (0.5, 1.0, 1.5, 2.0, 3.0),
        "two_stage_n": (100, 1000),
        "split": 0.2,
        "iclr_dims": (3, 10, 15),
        "iclr_eps": (0.5, 1.0, 2.0, 5.0),
        "gdp_mus": (0.1, 0.5, 1.0, 2.0),
        "jiang_dims": (2, 3, 10),
        "jiang_n": 100,
        "replicates": 40,
        "draws": 25,
    },
    "quick": {
        "epsilon": 1.0,
        "delta": 1e-6,
        "n_grid": (50, 500),
        "k_grid": (1, 16),
        "k_n": 100,
        "radii": (0.5, 3.0),
        "two_stage_n": (100,),
        "split": 0.2,
        "iclr_dims": (3,),
        "iclr_eps": (1.0,),
        "gdp_mus": (0.5,),
        "jiang_dims": (2,),
        "jiang_n": 100,
        "replicates": 3,
        "draws": 4,
    },
}
SPACES = ("S2", "SPD(2)", "SPD(3)", "H2", "SO(3)", "Kendall(4)")
TLAP, LAP, KNG = "tangent Laplace", "manifold Laplace (2021)", "KNG (2022)"
TGAUSS, TWO = "tangent Gaussian", "two-stage (split 0.2)"
RLAP = "restricted Laplace (2Δ/ε)"
RG_EST, RG_PROVED = "Riemannian Gaussian (estimated μ)", "Riemannian Gaussian (proved)"
COLORS = {TLAP: "tab:red", LAP: "tab:blue", KNG: "tab:green", TGAUSS: "tab:purple", TWO: "k",
          RLAP: "tab:cyan", RG_EST: "tab:orange", RG_PROVED: "tab:brown"}  # fmt: skip
#: the methods of the GDP-axis parts (``iclr_gdp``, ``jiang``)
GDP_METHODS = {
    "iclr_gdp": (TGAUSS, TLAP, RLAP, LAP),
    "jiang": (RG_EST, RG_PROVED, LAP, TGAUSS, TLAP),
}


def gdp_epsilon_pure(mu: float) -> float:
    r"""The largest ε whose ε-DP implies μ-GDP: ``logit Φ(μ/2)``.

    ε-DP's trade-off function is max(0, 1 − e^ε α, e^{−ε}(1 − α)); G_μ is convex and
    equals it at α = 0, so G_μ ≤ f_ε everywhere iff G_μ(α*) ≤ α* at the kink
    α* = 1/(1 + e^ε), i.e. μ ≥ 2Φ⁻¹(e^ε/(1 + e^ε)) (the math note, §7).
    """
    from scipy.special import logit, ndtr

    return float(logit(ndtr(mu / 2)))


@cache
def _space(space: str):
    """``(M, center, radius)`` of a named space (``H3``, ``SPD(5)``: any size)."""
    import pymc_manidp as pmd

    if space.startswith("S") and space[1:].isdigit():
        d = int(space[1:])
        return pmd.Sphere(dim=d), np.eye(d + 1)[-1], np.pi / 8
    if space == "SO(3)":
        return pmd.Rotations(), np.eye(3), np.pi / 8
    if space == "Kendall(4)":
        M = pmd.KendallShape(k_landmarks=4)
        return M, M.validate(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])), 0.35
    if space.startswith("SPD("):
        k = int(space[4:-1])
        return pmd.SPD(k=k), np.eye(k), 1.5
    d = int(space[1:])
    return pmd.Hyperbolic(dim=d), np.eye(d + 1)[0], 1.5


@cache
def _mech(space: str, method: str, epsilon: float, delta: float, radius=None, split=0.2):
    import pymc_manidp as pmd

    M, center, r = _space(space)
    kw = dict(epsilon=epsilon, center=center, radius=r if radius is None else radius)
    if method == TLAP:
        return pmd.TangentLaplaceMechanism(M, **kw)
    if method == LAP:
        return pmd.LaplaceMechanism(M, **kw)
    if method == KNG:
        return pmd.KNGMechanism(M, **kw)
    if method == TGAUSS:
        return pmd.TangentGaussianMechanism(M, delta=delta, **kw)
    if method == RLAP:
        return pmd.LaplaceMechanism(M, restrict=True, **kw)
    if method in (RG_EST, RG_PROVED):
        return pmd.RiemannianGaussianMechanism(M, **kw)
    return pmd.TwoStageTangentMechanism(M, delta=delta, split=split, **kw)


@cache
def rg_sigma_for_mu(dim: int, sensitivity: float, mu: float) -> float:
    """The Riemannian Gaussian's σ whose **estimated** μ (``estimated_mu``, Jiang et
    al.'s accounting by quadrature) is ``mu``: bisection on log σ to 10⁻⁴ relative
    (μ̂ decreases in σ). Never a charge: the experiment's "their accounting" cell."""
    from pymc_manidp.mechanisms.riemannian_gaussian import estimated_mu

    def mu_hat(sigma):
        with np.errstate(over="ignore"):  # e^(eps - loss) overflows where it is clipped
            return estimated_mu(dim, sigma, sensitivity)

    lo, hi = 0.3 * sensitivity / mu, 3.0 * sensitivity / mu
    if not mu_hat(lo) > mu > mu_hat(hi):
        raise ValueError(f"mu = {mu} not bracketed for S^{dim} at Delta = {sensitivity}")
    while hi - lo > 1e-4 * hi:
        mid = float(np.sqrt(lo * hi))
        lo, hi = (mid, hi) if mu_hat(mid) > mu else (lo, mid)
    return hi


def ball_laplace_draws(M, center, radius, footpoint, sigma, size, rng, max_batches=2000):
    r"""Exact draws of the Laplace restricted to ``B_r(m0)``, in polar coordinates at m0.

    Density ∝ e^{−ρ(η, y)/σ} w.r.t. volume on the ball. With y = Exp_{m0}(t ω), the
    volume is t^{d−1} J(t) dt dω (a space whose volume density is radial,
    ``M.volume_is_radial``, with t^{d−1} J(t) nondecreasing on [0, r]: H^d, checked on
    the grid), and ρ(η, y) ≥ |t − a|, a = ρ(m0, η) (triangle inequality). So propose
    t from g(t) ∝ e^{−|t−a|/σ} t^{d−1} J(t) on [0, r], ω uniform, and accept with
    e^{−(ρ(η, y) − |t − a|)/σ} ≤ 1: exact. g is drawn by rejection from a piecewise
    constant envelope on 4,096 cells (on each, e^{−dist(a, cell)/σ} times the volume
    factor at the cell's right end: an upper bound, since the factor is nondecreasing).

    The package's sampler (polar at η, truncated at a + r, then kept in the ball)
    accepts almost nothing on H^10 and H^15 at large σ, where the law sits on the
    ball's far edge; this one does not depend on the unrestricted law existing.
    """
    d = M.dim
    if not M.volume_is_radial:
        raise ValueError(f"ball_laplace_draws needs a radial volume density, not {M}")
    a = float(M.dist(center, footpoint))
    edges = np.linspace(0.0, radius, 4097)
    coords = np.zeros((len(edges), d))
    coords[:, 0] = edges
    with np.errstate(divide="ignore"):
        logvol = (d - 1) * np.log(edges) + M.log_volume_density(coords)
    if np.any(np.diff(logvol[1:]) < 0):
        raise ValueError(f"t^(d-1) J(t) is not nondecreasing on [0, r] on {M}")
    lo, hi = edges[:-1], edges[1:]
    near = np.where((lo <= a) & (a <= hi), 0.0, np.minimum(np.abs(lo - a), np.abs(hi - a)))
    log_env = logvol[1:] - near / sigma
    w = np.exp(log_env - log_env.max()) * (hi - lo)
    cdf = np.cumsum(w) / w.sum()
    out, batch = [], max(1000, 50 * size)
    for _ in range(max_batches):
        cell = np.minimum(np.searchsorted(cdf, rng.random(batch)), len(w) - 1)
        t = lo[cell] + (hi[cell] - lo[cell]) * rng.random(batch)
        ct = np.zeros((batch, d))
        ct[:, 0] = t
        with np.errstate(divide="ignore"):
            lg = (d - 1) * np.log(t) + M.log_volume_density(ct) - np.abs(t - a) / sigma
        keep = rng.random(batch) < np.exp(lg - log_env[cell])
        t = t[keep]
        omega = rng.standard_normal((len(t), d))
        omega /= np.linalg.norm(omega, axis=1, keepdims=True)
        y = M.exp_coords(center, t[:, None] * omega)
        rho = M.dist(footpoint, y)
        keep = rng.random(len(t)) < np.exp(-(rho - np.abs(t - a)) / sigma)
        out.extend(y[keep])
        if len(out) >= size:
            return np.asarray(out[:size])
    raise RuntimeError(f"ball_laplace_draws: fewer than {size} draws in {max_batches} batches")


def _fits(plan, epsilon, delta) -> bool:
    from pymc_manidp.privacy.budget import PrivacyBudget

    try:
        PrivacyBudget(epsilon, delta, composition="optimal", plan=plan)
    except ValueError:
        return False
    return True


def _largest(charge, k, epsilon, delta, lo) -> float:
    """The largest per-release ε (to 10⁻⁶ relative) whose plan of k ``charge(ε)`` fits."""
    hi = epsilon
    if _fits([charge(hi)] * k, epsilon, delta):
        return hi
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _fits([charge(mid)] * k, epsilon, delta) else (lo, mid)
        if hi - lo < 1e-6 * lo:
            break
    return float(f"{lo:.6g}") if _fits([charge(float(f"{lo:.6g}"))] * k, epsilon, delta) else lo


@cache
def budget_shares(k: int, epsilon: float = 1.0, delta: float = 1e-6) -> dict:
    """Per-release charges of k releases under one (ε, δ) budget, by the package's ledger.

    Returns
    -------
    dict
        ``pure_epsilon`` (the better of ε/k by basic composition and the optimal plan's),
        ``pure_rule``, ``gauss_epsilon``, ``gauss_delta`` (δ/k), ``gauss_mu`` (μ of one
        release), ``mu_total`` (√k μ) and ``planned_epsilon``/``planned_rule`` of the
        Gaussian plan as ``PrivacyBudget.planned`` states it.
    """
    from pymc_manidp.privacy.budget import PrivacyBudget
    from pymc_manidp.stats.gaussian import compose_mu, gaussian_mu

    basic = epsilon / k
    opt = _largest(lambda e: (e, 0.0), k, epsilon, delta, basic)
    g_delta = delta / k

    def gcharge(e):
        return (e, g_delta, gaussian_mu(e, g_delta))

    g_eps = _largest(gcharge, k, epsilon, delta, 1e-3 / k)
    mu = gaussian_mu(g_eps, g_delta)
    planned = PrivacyBudget(
        epsilon, delta, composition="optimal", plan=[gcharge(g_eps)] * k
    ).planned
    return {
        "k": k,
        "pure_epsilon": max(basic, opt),
        "pure_rule": "basic (ε/k)" if basic >= opt else "optimal plan (PLD)",
        "gauss_epsilon": g_eps,
        "gauss_delta": g_delta,
        "gauss_mu": mu,
        "mu_total": compose_mu([mu] * k),
        "planned_epsilon": planned.epsilon,
        "planned_delta": planned.delta,
        "planned_rule": planned.rule,
    }


def _errors(mech, M, x, target, draws, rng, mu=None, method=None) -> float:
    """Mean ρ(release, x̄) over ``draws`` releases. ``mu``: the GDP-axis cells whose σ
    is set by μ, not by the mechanism's (ε, δ): the tangent Gaussian at Δ_T/μ and the
    Riemannian Gaussian at the σ of estimated μ."""
    data = mech.domain.check(x)
    n = len(x)
    sigma = mech.calibrate(n).sigma
    if mu is not None and method == TGAUSS:
        sigma = mech.sensitivity(n) / mu
    if mu is not None and method == RG_EST:
        sigma = rg_sigma_for_mu(M.dim, mech.sensitivity(n), mu)
    if method == RLAP and M.volume_is_radial:
        pts = ball_laplace_draws(M, mech.domain.center, mech.domain.radius, target, sigma,
                                 draws, rng)  # fmt: skip
    else:
        pts = np.asarray(mech.exact_draws(data, sigma, draws, rng).points)
    return float(np.mean([M.dist(target, p) for p in pts]))


def _uniform(space, n, rng):
    from pymc_manidp.datasets import uniform_radius_ball

    M, center, r = _space(space)
    return uniform_radius_ball(M, n, center=center, radius=r, random_seed=rng)


#: cells of this process whose mechanism has no exact draw (skipped after the first try)
_NO_EXACT: dict = {}


def _chunk(part, space, n, cells, draws, jobs):
    """Rows of one (part, space, n) for each ``(rep, seed)``; ``cells`` are
    ``(method, keys, mechanism arguments)``: each replicate's data serve all cells."""
    from pymc_manidp.laws.exact.rejection import ExactSamplingError
    from pymc_manidp.stats.frechet import frechet_mean

    M = _space(space)[0]
    rows = []
    for rep, ss in jobs:
        # one stream for the data and one per cell: a cell skipped after a failure in
        # this process (or retried in another) leaves the other cells' draws unchanged,
        # so the table does not depend on the number of workers
        # (the children of ss.spawn on a fresh ss, built without mutating ss: a second
        # call gives the same streams)
        rng, *cell_rngs = (
            np.random.default_rng(
                np.random.SeedSequence(
                    ss.entropy, spawn_key=(*ss.spawn_key, j), pool_size=ss.pool_size
                )
            )
            for j in range(len(cells) + 1)
        )
        if part == "two_stage":
            r = cells[0][1]["r"]
            m0 = _space(space)[1]
            target = M.exp_coords(m0, np.r_[0.8 * r, np.zeros(M.dim - 1)])
            x = M.exp_coords(target, rng.uniform(-0.05 * r, 0.05 * r, size=(n, M.dim)))
        else:
            x = _uniform(space, n, rng)
        fm = frechet_mean(M, x, tol=1e-12).mean
        for (method, keys, args), crng in zip(cells, cell_rngs, strict=True):
            cell = (space, n, method, *args)
            err = np.nan
            if cell not in _NO_EXACT:
                try:
                    mu = keys.get("mu") if part in GDP_METHODS else None
                    mech = _mech(space, method, *args)
                    err = _errors(mech, M, x, fm, draws, crng, mu=mu, method=method)
                except (ValueError, ExactSamplingError) as e:
                    # a law that is not normalizable (the unrestricted Laplace on H^d at
                    # sigma >= 1/(d - 1)) or whose exact sampler accepts nothing within
                    # its cap: the cell has no exact draw; recorded as an empty cell
                    _NO_EXACT[cell] = str(e).split(":")[0]
            rows.append({"part": part, "space": space, "n": n, **keys, "method": method,
                         "rep": rep, "dist": err})  # fmt: skip
    return rows


def _jobs(cfg, seed):
    eps, delta, reps = cfg["epsilon"], cfg["delta"], cfg["replicates"]
    tasks = []  # (part, space, n, cells)
    pure = [TLAP, LAP, KNG]
    for space in SPACES:
        r = _space(space)[2]
        for n in cfg["n_grid"]:
            cells = [(m, {"k": 1, "r": r, "epsilon": eps}, (eps, delta)) for m in pure]
            tasks.append(("pure", space, n, cells))
    for space in SPACES:
        r = _space(space)[2]
        cells = []
        for k in cfg["k_grid"]:
            sh = budget_shares(k, eps, delta)
            pe, ge, gd = sh["pure_epsilon"], sh["gauss_epsilon"], sh["gauss_delta"]
            cells += [(m, {"k": k, "r": r, "epsilon": pe}, (pe, delta)) for m in pure]
            cells.append((TGAUSS, {"k": k, "r": r, "epsilon": ge}, (ge, gd)))
        tasks.append(("k_release", space, cfg["k_n"], cells))
    for r in cfg["radii"]:
        for n in cfg["two_stage_n"]:
            cells = [
                (m, {"k": 1, "r": r, "epsilon": eps}, (eps, delta, r, cfg["split"]))
                for m in (TGAUSS, TWO)
            ]
            tasks.append(("two_stage", "H2", n, cells))
    for d in cfg["iclr_dims"]:
        spd_k = {3: 2, 10: 4, 15: 5}[d]
        for space in (f"SPD({spd_k})", f"H{d}"):
            cells = [
                (m, {"k": 1, "r": 1.5, "epsilon": e}, (e, delta))
                for e in cfg["iclr_eps"]
                for m in pure
            ]
            tasks.append(("iclr", space, 40, cells))
    spd_of = {3: 2, 10: 4, 15: 5}
    iclr_spaces = [s for d in cfg["iclr_dims"] for s in (f"SPD({spd_of[d]})", f"H{d}")]
    for part, spaces, n in (
        ("iclr_gdp", iclr_spaces, 40),
        ("jiang", [f"S{d}" for d in cfg["jiang_dims"]], cfg["jiang_n"]),
    ):
        for space in spaces:
            r = _space(space)[2]
            cells = []
            for mu in cfg["gdp_mus"]:
                e = gdp_epsilon_pure(mu)
                for m in GDP_METHODS[part]:
                    # the Gaussians' (eps, delta) only build the mechanism: their sigma
                    # is set from mu (_errors); the pure ones run at eps(mu)
                    args = (1.0, 1e-6) if m in (TGAUSS, RG_EST) else (e, delta)
                    cells.append((m, {"k": 1, "r": r, "epsilon": e, "mu": mu}, args))
            tasks.append((part, space, n, cells))
    jobs = []
    for t, (part, space, n, cells) in enumerate(tasks):
        seeds = C.child_seeds(seed, t, count=reps)
        jobs += [
            (part, space, n, cells, cfg["draws"], [(j, seeds[j]) for j in part_])
            for part_ in C.chunks(reps, max(1, min(10, reps // 2)))
        ]
    return jobs


def tangent_mechanisms(
    *,
    quick=False,
    replicates=None,
    out=None,
    seed=20211206,
    progress=False,
    workers=None,
    scheduler=None,
):
    """Tangent mechanisms against the manifold Laplace and KNG (issue 39 item 5).

    Parameters
    ----------
    quick : bool
        Two sample sizes, two k, two radii, one ICLR dimension, one μ, S² only for
        Jiang et al., 3 data sets of 4 releases per cell (the docs build runs it for
        the gallery).
    replicates : int, optional
        Data sets per cell (default 40, each with 25 releases).
    out : path, optional
        Writes ``tangent_mechanisms/`` with ``pure.png``, ``k_release.png``,
        ``two_stage.png``, ``iclr.png``, ``iclr_gdp.png``, ``jiang.png``, ``table.csv``
        and ``summary.json`` (with the per-release budget shares).
    seed : int
    progress : bool
    workers : int, optional
    scheduler : None, str or distributed.Client, optional
        Where the replicates run (``experiments._common.cluster``); results do not
        depend on it.

    Returns
    -------
    pandas.DataFrame
        Columns ``part, space, n, k, r, epsilon, method, mean, sd, count, se, mu``: the
        mean geodesic error ρ(release, x̄) (``epsilon`` is the per-release ε of the pure
        mechanisms; ``mu`` the GDP μ of the parts ``iclr_gdp`` and ``jiang``, NaN
        elsewhere); ``count`` 0
        (mean NaN) where the mechanism has no exact draw (not normalizable, or its
        exact sampler accepts nothing within its cap).
    """
    cfg = dict(SETTINGS["quick" if quick else "full"])
    if replicates is not None:
        cfg["replicates"] = int(replicates)
    workers = C.default_workers() if workers is None else int(workers)
    shares = [budget_shares(k, cfg["epsilon"], cfg["delta"]) for k in cfg["k_grid"]]
    rows = [
        r
        for rows in C.parallel_map(
            _chunk,
            _jobs(cfg, seed),
            workers=workers,
            progress=progress,
            scheduler=scheduler,
            description="tangent mechanisms",
        )
        for r in rows
    ]
    import pandas as pd

    keys = ["part", "space", "n", "k", "r", "epsilon", "method"]
    # the GDP-axis parts have a column mu (NaN elsewhere: groupby drops NaN keys, so
    # each kind of part is summarized on its own keys)
    gdp = [r for r in rows if r["part"] in GDP_METHODS]
    rest = [r for r in rows if r["part"] not in GDP_METHODS]
    table = pd.concat(
        [C.summarize(rest, keys, "dist"), C.summarize(gdp, [*keys[:-1], "mu", "method"], "dist")],
        ignore_index=True,
    )
    path = C.prepare_out(out, "tangent_mechanisms")
    C.write_table(table, path, "table")
    C.write_json(
        {
            "experiment": "tangent_mechanisms",
            "quick": quick,
            "seed": seed,
            "settings": cfg,
            "shares": shares,
        },
        path,
        "summary",
    )
    if path is not None:
        _plot(table, cfg, path)
    return table


def _plot(table, cfg, path):
    _plot_pure(table[table.part == "pure"], cfg, path)
    _plot_k(table[table.part == "k_release"], path)
    _plot_two(table[table.part == "two_stage"], path)
    _plot_iclr(table[table.part == "iclr"], path)
    for part in GDP_METHODS:
        _plot_gdp(table[table.part == part], part, path)


def _lines(ax, t, x, xscale="log"):
    for meth, g in t.groupby("method", sort=False):
        g = g.sort_values(x)
        C.band(ax, g[x], g["mean"], g.se, label=meth, color=COLORS[meth], marker="o")
    ax.set(xscale=xscale, yscale="log")


def _plot_pure(t, cfg, path):
    fig, axes = C.figure(2, 3, width=3.2, height=2.6)
    for ax, space in zip(np.ravel(axes), SPACES, strict=True):
        _lines(ax, t[t.space == space], "n")
        ax.set_title(f"{space}, ε = {cfg['epsilon']:g}", fontsize=9)
        ax.set_xlabel("n")
    axes[0][0].set_ylabel("mean ρ(release, x̄) ± 2 SE", fontsize=8)
    axes[0][0].legend(fontsize=7)
    C.save_figure(fig, path, "pure")


def _plot_k(t, path):
    fig, axes = C.figure(2, 3, width=3.2, height=2.6)
    for ax, space in zip(np.ravel(axes), SPACES, strict=True):
        _lines(ax, t[t.space == space], "k")
        ax.set_xticks(sorted(set(t.k)), [str(k) for k in sorted(set(t.k))])
        ax.set_title(f"{space}, n = {int(t.n.iloc[0])}", fontsize=9)
        ax.set_xlabel("k releases under (1, 1e-6)")
    axes[0][0].set_ylabel("per-release error ± 2 SE", fontsize=8)
    axes[0][0].legend(fontsize=7)
    C.save_figure(fig, path, "k_release")


def _plot_two(t, path):
    ns = sorted(set(t.n))
    fig, axes = C.figure(1, len(ns), width=3.6, height=2.8)
    for ax, n in zip(np.ravel(axes), ns, strict=True):
        _lines(ax, t[t.n == n], "r", xscale="linear")
        ax.set(xlabel="r (mean at 0.8 r from m0)", title=f"H², n = {n}, (1, 1e-6)")
    np.ravel(axes)[0].set_ylabel("mean ρ(release, x̄) ± 2 SE", fontsize=8)
    np.ravel(axes)[0].legend(fontsize=7)
    C.save_figure(fig, path, "two_stage")


def _plot_iclr(t, path):
    spaces = list(dict.fromkeys(t.space))
    fig, axes = C.figure(1, len(spaces), width=2.8, height=2.6)
    for ax, space in zip(np.ravel(axes), spaces, strict=True):
        _lines(ax, t[t.space == space], "epsilon")
        ax.set(xlabel="ε", title=f"{space}, n = 40, r = 1.5")
    np.ravel(axes)[0].set_ylabel("mean ρ(release, x̄) ± 2 SE", fontsize=8)
    np.ravel(axes)[0].legend(fontsize=7)
    C.save_figure(fig, path, "iclr")


def _plot_gdp(t, part, path):
    spaces = list(dict.fromkeys(t.space))
    if not spaces:
        return
    ncols = min(3, len(spaces))
    nrows = -(-len(spaces) // ncols)
    fig, axes = C.figure(nrows, ncols, width=3.2, height=2.6)
    axes = np.ravel(axes)
    for ax, space in zip(axes, spaces, strict=False):
        _lines(ax, t[t.space == space], "mu")
        n = int(t[t.space == space].n.iloc[0])
        ax.set(xlabel="μ (GDP); pure mechanisms at ε = logit Φ(μ/2)", title=f"{space}, n = {n}")
        ax.xaxis.label.set_size(7)
    for ax in axes[len(spaces) :]:
        ax.set_visible(False)
    axes[0].set_ylabel("mean ρ(release, x̄) ± 2 SE", fontsize=8)
    axes[0].legend(fontsize=6)
    C.save_figure(fig, path, part)
