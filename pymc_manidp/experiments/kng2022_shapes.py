r"""2022 paper, Figures 2 and 3 (§4.3) on planar shapes: private mean shapes of cell contours.

The corpus callosum data of the paper are not public; the mouse osteosarcoma cell
contours shipped with the package stand in (``pymc_manidp.datasets.load_cells``).

Setting (every choice the paper leaves open is a parameter, see ``SETTINGS``):

- shapes: ``k`` landmarks per contour in Kendall's shape space ``CP^{k-2}``;
- public ball: center ``m0`` the Fréchet mean shape of the *dlm8 control* cells
  (treated as a public pilot study), radius ``r < pi/8``;
- private data: the *dunn control* cells; the few outside the ball are moved onto
  its boundary (``clip=True``, a per-record map that keeps the guarantee);
- mechanisms: KNG, drawn by its exact rejection sampler (pure ε-DP; the paper ran
  random-walk Metropolis–Hastings, an approximation of the same law: the figures
  show the mechanism's releases, not the chain, so the exact draws stand in for it),
  the landmark-wise Laplace with and without rotational alignment
  (``pymc_manidp.mechanisms.baselines.LandmarkLaplace``, budget split over landmarks)
  and, for the table only, the exact manifold Laplace;
- smoothing (Fig. 3): first-order local linear regression of each coordinate on
  the landmark index along the closed contour (:func:`local_linear_smooth`), then
  re-normalized to a pre-shape (post-processing).

Outputs: ``figure2.png`` (sample shapes, Fréchet mean, six releases per mechanism),
``figure3.png`` (smoothed releases), ``table.csv`` (mean shape distance
:math:`\rho(\bar x, \tilde x)` ± SE and the share of self-intersecting contours per
mechanism, raw and smoothed), ``releases.json`` (the plotted shapes) and
``summary.json``.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.experiments import _common as C

__all__ = ["SETTINGS", "kng2022_shapes", "local_linear_smooth", "self_intersects"]

SETTINGS = {
    "full": {
        "k_landmarks": 24,
        "epsilon": 2.0,
        "radius": 0.3,
        "shown": 6,
        "replicates": 96,
        "bandwidth": 1.0,
        "samples_shown": 10,
    },
    "quick": {
        "k_landmarks": 24,
        "epsilon": 2.0,
        "radius": 0.3,
        "shown": 6,
        "replicates": 24,
        "bandwidth": 1.0,
        "samples_shown": 10,
    },
}
KNG = "KNG (exact)"
LL_ALIGNED = "landmark-wise Laplace, aligned"
LL_RAW = "landmark-wise Laplace, not aligned"
LAPLACE = "manifold Laplace (exact)"
#: KNG releases per Dask task, each task from its own seed (a draw costs about 600
#: proposals in d = 44, ~0.3 s: the full run's 96 make 16 tasks for the workers)
DRAWS_PER_JOB = 6


def local_linear_smooth(z, bandwidth: float = 1.0) -> np.ndarray:
    r"""First-order local linear regression along closed contours ``(..., k, 2)``.

    Each coordinate is regressed on the landmark index ``t`` around every landmark
    ``j`` with Gaussian weights :math:`w_i = \exp\{-\delta_{ij}^2/(2h^2)\}`, where
    :math:`\delta_{ij}` is the periodic index offset in ``[-k/2, k/2)``; the fitted
    intercept is the smoothed point:

    .. math:: \hat z_j = \arg\min_a \min_b \sum_i w_i\,(z_i - a - b\,\delta_{ij})^2.

    Parameters
    ----------
    z : array, shape ``(..., k, 2)``
        Closed contours of ``k`` planar landmarks each.
    bandwidth : float
        ``h`` in units of landmark spacing (``> 0``).

    Returns
    -------
    ndarray, shape ``(..., k, 2)``
        The smoothed contours.

    Examples
    --------
    A regular polygon is shrunk by the kernel average of ``cos`` (the design is
    symmetric, so the local slope drops out):

    >>> k = 11  # odd: the periodic offsets -5..5 are symmetric
    >>> t = 2 * np.pi * np.arange(k) / k
    >>> z = np.stack([np.cos(t), np.sin(t)], -1)
    >>> s = local_linear_smooth(z, 1.0)
    >>> delta = (np.arange(k) + k // 2) % k - k // 2
    >>> w = np.exp(-delta**2 / 2)
    >>> bool(np.allclose(s, z * (w @ np.cos(2 * np.pi * delta / k)) / w.sum()))
    True
    """
    from pymc_manidp._validation import check_positive_real

    h = check_positive_real(bandwidth, "bandwidth")
    z = np.asarray(z, float)
    k = z.shape[-2]
    idx = np.arange(k)
    delta = (idx[None, :] - idx[:, None] + k // 2) % k - k // 2  # (j, i)
    w = np.exp(-0.5 * (delta / h) ** 2)
    s0, s1, s2 = w.sum(1), (w * delta).sum(1), (w * delta**2).sum(1)
    wz = np.einsum("ji,...ic->...jc", w, z)
    wdz = np.einsum("ji,...ic->...jc", w * delta, z)
    return (s2[:, None] * wz - s1[:, None] * wdz) / (s0 * s2 - s1**2)[:, None]


def self_intersects(z) -> np.ndarray:
    """Whether closed polygons ``(..., k, 2)`` cross themselves (non-adjacent edges meet).

    Parameters
    ----------
    z : array_like, shape ``(..., k, 2)``
        Closed polygons of ``k`` vertices each (the last joins the first).

    Returns
    -------
    ndarray of bool, shape ``(...)``
        True where the polygon crosses itself.

    Examples
    --------
    >>> square = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1]])
    >>> bow = square[[0, 2, 1, 3]]
    >>> self_intersects(np.stack([square, bow])).tolist()
    [False, True]
    """
    z = np.asarray(z, float)
    k = z.shape[-2]
    a, b = z, np.roll(z, -1, axis=-2)  # edge i: a[i] -> b[i]
    i, j = np.triu_indices(k, 2)
    keep = ~((i == 0) & (j == k - 1))  # the first and last edges share a vertex
    i, j = i[keep], j[keep]

    def orient(p, q, r):
        return np.sign(
            (q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1])
            - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0])
        )

    p1, p2, q1, q2 = a[..., i, :], b[..., i, :], a[..., j, :], b[..., j, :]
    cross = (orient(p1, p2, q1) * orient(p1, p2, q2) < 0) & (
        orient(q1, q2, p1) * orient(q1, q2, p2) < 0
    )
    return cross.any(axis=-1)


def _align(z, m):
    """Rotate pre-shapes ``z (..., k, 2)`` optimally onto ``m (k, 2)`` (for display)."""
    zc = z[..., 0] + 1j * z[..., 1]
    mc = m[..., 0] + 1j * m[..., 1]
    a = np.sum(np.conj(zc) * mc, axis=-1)
    w = zc * (a / np.abs(a))[..., None]
    return np.stack([w.real, w.imag], -1)


def _problem(cfg):
    import pymc_manidp as pmd
    from pymc_manidp.datasets import load_cells

    K = pmd.KendallShape(k_landmarks=cfg["k_landmarks"])
    cells = load_cells(k_landmarks=cfg["k_landmarks"])
    z = K.validate(cells.landmarks)
    control = cells.treatment == "control"
    public = z[control & (cells.cell_line == "dlm8")]
    private = z[control & (cells.cell_line == "dunn")]
    m0 = pmd.frechet_mean(K, public).mean
    return K, m0, private


def _kng_draws(cfg, size, ss):
    """``size`` exact KNG releases of the private cells (i.i.d., from the seed ``ss``).

    Returns the draws ``(size, k, 2)`` and the rejection sampler's acceptance rate.
    """
    import pymc_manidp as pmd

    K, m0, private = _problem(cfg)
    mech = pmd.KNGMechanism(K, epsilon=cfg["epsilon"], center=m0, radius=cfg["radius"])
    # the exact sampler of the mechanism's own law (pure ε-DP); each draw alone is one
    # release of the data, as each chain's last state was under the paper's MH
    draws, info = mech.sample(
        private, size, random_seed=np.random.default_rng(ss), clip=True, return_info=True
    )
    return draws, info["acceptance_rate"]


def kng2022_shapes(
    *,
    quick=False,
    replicates=None,
    out=None,
    seed=409,
    progress=False,
    workers=None,
    scheduler=None,
):
    """Reproduce Figures 2 and 3 of the 2022 paper on the cell shapes; returns the table.

    Parameters
    ----------
    quick : bool
        Fewer replicates for the table.
    replicates : int, optional
        Private releases per mechanism for the table (default 96; quick 24); at
        least the six shown.
    out : path, optional
        Writes ``kng2022_shapes/`` (``figure2.png``, ``figure3.png``, ``table.csv``,
        ``releases.json``, ``summary.json``).
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
        Columns ``method, smoothed, mean_rho, se_rho, crossing_share, count``.
    """
    import pandas as pd

    import pymc_manidp as pmd
    from pymc_manidp.mechanisms.baselines import LandmarkLaplace

    cfg = dict(SETTINGS["quick" if quick else "full"])
    if replicates is not None:
        cfg["replicates"] = int(replicates)
    reps = max(cfg["replicates"], cfg["shown"])
    reps = DRAWS_PER_JOB * -(-reps // DRAWS_PER_JOB)  # whole jobs of draws
    cfg["replicates"] = reps
    workers = C.default_workers() if workers is None else int(workers)

    K, m0, private = _problem(cfg)
    kw = dict(epsilon=cfg["epsilon"], center=m0, radius=cfg["radius"])
    kng = pmd.KNGMechanism(K, **kw)
    outside = int(np.sum(kng.domain.distances(private) > cfg["radius"]))
    data = kng.domain.check(private, clip=True)
    fm = pmd.frechet_mean(K, data).mean

    seeds = C.child_seeds(seed, count=2 + reps // DRAWS_PER_JOB)
    jobs = [(cfg, DRAWS_PER_JOB, ss) for ss in seeds[2:]]
    res = C.parallel_map(
        _kng_draws,
        jobs,
        workers=workers,
        progress=progress,
        scheduler=scheduler,
        description="2022 Figs. 2-3: KNG (exact)",
    )
    releases = {KNG: np.concatenate([r[0] for r in res])}
    acceptance = float(np.mean([r[1] for r in res]))
    rng = np.random.default_rng(seeds[0])
    releases[LL_ALIGNED] = LandmarkLaplace(K, align=True, **kw).sample(data, reps, random_seed=rng)
    releases[LL_RAW] = LandmarkLaplace(K, align=False, **kw).sample(data, reps, random_seed=rng)
    releases[LAPLACE] = pmd.LaplaceMechanism(K, **kw).sample(data, reps, random_seed=rng)
    releases = {m: _align(K.validate(v), fm) for m, v in releases.items()}
    smoothed = {
        m: _align(K.validate(local_linear_smooth(v, cfg["bandwidth"])), fm)
        for m, v in releases.items()
    }

    rows = []
    for label, group in (("no", releases), ("yes", smoothed)):
        for m, v in group.items():
            rho = K.dist(fm, v)
            rows.append(
                {
                    "method": m,
                    "smoothed": label,
                    "mean_rho": float(rho.mean()),
                    "se_rho": float(rho.std(ddof=1) / np.sqrt(len(rho))),
                    "crossing_share": float(self_intersects(v).mean()),
                    "count": len(v),
                }
            )
    table = pd.DataFrame(rows)
    h = kng.domain.curvature_factor
    info = {
        "n": len(data),
        "clipped": outside,
        "d": K.dim,
        "kng_sigma": kng.sigma(len(data)),
        "kng_exact_acceptance": acceptance,
        "curvature_factor_H": h,
        "landmark_laplace_sigma_per_landmark": LandmarkLaplace(K, **kw).sigma(len(data)),
    }
    path = C.prepare_out(out, "kng2022_shapes")
    C.write_table(table, path, "table")
    shown = cfg["shown"]
    C.write_json(
        {
            "frechet_mean": fm,
            "public_center": m0,
            "samples": _align(data[: cfg["samples_shown"]], fm),
            "releases": {m: v[:shown] for m, v in releases.items() if m != LAPLACE},
            "smoothed": {m: smoothed[m][:shown] for m in (KNG, LL_ALIGNED)},
        },
        path,
        "releases",
    )
    C.write_json(
        {
            "experiment": "kng2022_shapes",
            "quick": quick,
            "seed": seed,
            "settings": cfg,
            "info": info,
            "statements": statements(table),
        },
        path,
        "summary",
    )
    if path is not None:
        _plot(cfg, data, fm, releases, smoothed, path)
    return table


def statements(table):
    t = table.set_index(["method", "smoothed"])
    return [
        {
            "paper": "Fig. 2: without rotational alignment the landmark-wise Laplace destroys "
            "the shape; KNG keeps it better than the aligned landmark-wise Laplace, whose "
            "contours can cross (2022 §4.3)",
            "ours": "; ".join(
                f"{m}: mean ρ(x̄, x̃) {t.loc[(m, 'no'), 'mean_rho']:.3f}, "
                f"{100 * t.loc[(m, 'no'), 'crossing_share']:.0f}% self-intersecting"
                for m in (KNG, LL_ALIGNED, LL_RAW, LAPLACE)
            ),
        },
        {
            "paper": "Fig. 3: after smoothing, KNG estimates keep the mean's features; "
            "landmark-wise Laplace ones are less smooth and can loop (2022 §4.3)",
            "ours": "; ".join(
                f"{m} smoothed: mean ρ {t.loc[(m, 'yes'), 'mean_rho']:.3f}, "
                f"{100 * t.loc[(m, 'yes'), 'crossing_share']:.0f}% self-intersecting"
                for m in (KNG, LL_ALIGNED)
            ),
        },
    ]


def _draw(ax, z, *, title=None, lw=1.0):
    from matplotlib import colormaps

    closed = np.concatenate([z, z[:1]])
    ax.plot(closed[:, 0], closed[:, 1], color="0.35", lw=lw)
    ax.scatter(z[:, 0], z[:, 1], c=np.arange(len(z)), cmap=colormaps["viridis"], s=9, zorder=3)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)


def _plot(cfg, data, fm, releases, smoothed, path):
    from matplotlib.figure import Figure

    shown = cfg["shown"]
    eps, k, r = cfg["epsilon"], cfg["k_landmarks"], cfg["radius"]
    fig = Figure(figsize=(16, 7.2), layout="constrained")
    left, mid, right = fig.subfigures(1, 3, width_ratios=[1.6, 1.6, 6])
    ax = left.subplots()
    for z in _align(data[: cfg["samples_shown"]], fm):
        closed = np.concatenate([z, z[:1]])
        ax.plot(closed[:, 0], closed[:, 1], lw=0.8)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(
        f"{cfg['samples_shown']} of the {len(data)} cells\n(dunn, control; aligned)", fontsize=10
    )
    _draw(mid.subplots(), fm, title=f"Fréchet mean shape\n(k = {k} landmarks)", lw=1.4)
    axes = right.subplots(3, shown)
    for row, m in enumerate((KNG, LL_ALIGNED, LL_RAW)):
        for j in range(shown):
            _draw(axes[row, j], releases[m][j])
        axes[row, 0].set_ylabel(m.replace(", ", ",\n").replace(" (", "\n("), fontsize=9)
    right.suptitle(
        f"six private mean shapes per mechanism (ε = {eps:g}, ball radius {r:g})", fontsize=11
    )
    fig.suptitle(
        "2022 Fig. 2 on cell contours (colour runs along the contour from the first landmark)",
        fontsize=12,
    )
    C.save_figure(fig, path, "figure2")

    fig, axes = C.figure(2, shown, width=2.2, height=2.4)
    for row, m in enumerate((KNG, LL_ALIGNED)):
        for j in range(shown):
            _draw(axes[row, j], smoothed[m][j])
        axes[row, 0].set_ylabel(m.replace(", ", ",\n"), fontsize=9)
    fig.suptitle(
        f"2022 Fig. 3 on cell contours: private means smoothed by local linear regression "
        f"(bandwidth {cfg['bandwidth']:g} × landmark spacing), ε = {eps:g}",
        fontsize=11,
    )
    C.save_figure(fig, path, "figure3")
