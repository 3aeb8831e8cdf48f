r"""2021 paper: supplement Figure 1 (the empirical sphere spread) and Example 1 (S¹).

**Supplement Fig. 1 (§2.1).** Theorem 2 bounds :math:`\|\log_m x - \log_m y\|` over
``m, x, y`` in the ball ``B_r(m0)`` of the unit sphere by ``2r(2 - H)``,
``H = 2r cot 2r``; the supplement computes the maximum on a grid and finds it between
``2r`` and ``2r(2 - H)``, which it then uses as the "empirical bound" of its sphere
simulations. We recompute the three curves over the radius, ``0 < r < r* = pi/4``
(:func:`pymc_manidp.stats.sensitivity.empirical_sphere_log_spread`: the supplement's
boundary grid, with the footpoint also moved inward along a meridian).

**Example 1.** On the circle S¹ with the arc-length distance, ``n - 1`` equally
spaced points :math:`x_i = 2\pi i/(n-1)` plus a copy of one of them, :math:`x_n =
x_{i'}`: the Fréchet mean is :math:`x_{i'}`, so moving one record moves the mean
across the circle and the sensitivity does not decrease with ``n`` (the paper: "the
resulting sensitivity is π"). The Fréchet means here are exact global minimizers of
:math:`F(\theta) = \sum_i \rho(\theta, x_i)^2` (:func:`circle_frechet_means`), not the
library's gradient descent (whose premises these data violate on purpose).
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.experiments import _common as C

__all__ = ["SETTINGS", "circle_frechet_means", "laplace2021_sensitivity"]

SETTINGS = {
    "full": {
        "radii": tuple(np.round(np.linspace(0.025, 0.775, 31), 4).tolist()),
        "grid": 720,
        "footpoints": 41,
        "example1_n": (4, 5, 10, 11, 50, 51, 100, 101),
    },
    "quick": {
        "radii": tuple(np.round(np.linspace(0.05, 0.75, 8), 4).tolist()),
        "grid": 180,
        "footpoints": 11,
        "example1_n": (4, 5, 10, 11),
    },
}
SPREAD = "empirical max ‖log_m x − log_m y‖ (supplement §2.1)"
LOWER = "2r"
UPPER = "2r(2 − H) (Theorem 2 / Lemma 1)"


def _wrap(a):
    """Angles to ``[-pi, pi)``."""
    return (np.asarray(a, float) + np.pi) % (2.0 * np.pi) - np.pi


def circle_frechet_means(angles, *, rtol: float = 1e-9) -> tuple[np.ndarray, float]:
    r"""Every global minimizer of :math:`F(\theta) = \sum_i \rho(\theta, x_i)^2` on S¹.

    ``rho`` is the arc length. Between consecutive antipodes of the data each term is
    :math:`(\theta - u_i)^2` for one fixed unwrapping ``u_i`` of ``x_i``, so ``F`` is
    a quadratic there with minimizer ``mean(u_i)`` (clipped to the piece); the global
    minimizers are the best of these candidates. Exact up to rounding; ``O(n^2)``.

    Parameters
    ----------
    angles : array ``(n,)``
    rtol : float
        Candidates within ``rtol * (1 + F_min)`` of the minimum count as minimizers.

    Returns
    -------
    means : ndarray ``(m,)``
        The minimizers in ``[0, 2 pi)``, sorted (``m > 1`` when the mean is not unique).
    f_min : float

    Examples
    --------
    Two points a quarter turn apart: the mean is halfway.

    >>> m, f = circle_frechet_means([0.0, np.pi / 2])
    >>> np.round(m, 6).tolist(), round(f, 6)
    ([0.785398], 1.233701)
    """
    x = np.mod(np.asarray(angles, float).ravel(), 2.0 * np.pi)
    anti = np.sort(np.mod(x + np.pi, 2.0 * np.pi))
    lo = anti
    hi = np.append(anti[1:], anti[0] + 2.0 * np.pi)
    mid = 0.5 * (lo + hi)
    u = mid[:, None] + _wrap(x[None, :] - mid[:, None])  # (pieces, n)
    theta = np.clip(u.mean(axis=1), lo, hi)
    f = np.sum((theta[:, None] - u) ** 2, axis=1)
    f_min = float(f.min())
    best = np.mod(theta[f <= f_min + rtol * (1.0 + f_min)], 2.0 * np.pi)
    # one minimizer may show up in two neighbouring pieces (at their common end)
    best = np.sort(best)
    keep = np.append(True, np.abs(_wrap(np.diff(best))) > 1e-9)
    best = best[keep]
    if len(best) > 1 and abs(_wrap(best[-1] - best[0])) <= 1e-9:
        best = best[:-1]
    return best, f_min


def example1(n: int) -> dict:
    """Example 1 with ``n`` records: sensitivity of the exact Fréchet mean on S¹.

    Returns the largest distance between the means of two neighbouring datasets (the
    duplicated record moved from ``x_{i'}`` to ``x_{j'}``) over all ``i', j'`` (NaN when
    some mean is not unique: odd ``n``, where the grid has antipodal pairs; the paper
    takes ``n`` even), and whether every dataset's mean is unique and equals ``x_{i'}``.

    Examples
    --------
    >>> e = example1(10)  # the farthest two of 9 equally spaced points: 4 steps of 2π/9
    >>> bool(np.isclose(e["sensitivity"], np.pi * 8 / 9)), e["unique_mean"]
    (True, True)
    """
    grid = 2.0 * np.pi * np.arange(1, n) / (n - 1)
    means, unique, at_copy = [], True, True
    for i in range(n - 1):
        m, _ = circle_frechet_means(np.append(grid, grid[i]))
        unique &= len(m) == 1
        at_copy &= bool(np.any(np.abs(_wrap(m - grid[i])) < 1e-7))
        means.append(m[0])
    means = np.asarray(means)
    dist = np.abs(_wrap(means[:, None] - means[None, :]))
    return {
        "n": n,
        "sensitivity": float(dist.max()) if unique else float("nan"),
        "unique_mean": bool(unique),
        "mean_is_the_copy": bool(at_copy),
    }


def laplace2021_sensitivity(
    *, quick=False, replicates=None, out=None, seed=0, progress=False, workers=None, scheduler=None
):
    """Supplement Fig. 1 and Example 1 of the 2021 paper; returns the table.

    Deterministic (grid searches and exact minimizers): ``replicates``, ``seed``,
    ``workers`` and ``scheduler`` are accepted for a uniform interface and ignored.

    Parameters
    ----------
    quick : bool
        Fewer radii and a coarser grid.
    out : path, optional
        Writes ``laplace2021_sensitivity/`` with ``supplement_fig1.png``,
        ``table.csv`` and ``summary.json``.

    Returns
    -------
    pandas.DataFrame
        Columns ``check, x, quantity, value``: for ``check == "supplement_fig1"``
        ``x`` is the radius ``r``; for ``"example1"`` it is ``n``.
    """
    import pandas as pd

    from pymc_manidp.stats.sensitivity import curvature_factor, empirical_sphere_log_spread

    cfg = dict(SETTINGS["quick" if quick else "full"])
    rows = []
    for r in cfg["radii"]:
        h = curvature_factor(r, 1.0)
        spread = empirical_sphere_log_spread(r, grid=cfg["grid"], footpoints=cfg["footpoints"])
        for q, v in ((LOWER, 2 * r), (SPREAD, spread), (UPPER, 2 * r * (2 - h))):
            rows.append({"check": "supplement_fig1", "x": r, "quantity": q, "value": v})
    for n in cfg["example1_n"]:
        e = example1(n)
        for q in ("sensitivity", "unique_mean", "mean_is_the_copy"):
            rows.append({"check": "example1", "x": n, "quantity": q, "value": float(e[q])})
    table = pd.DataFrame(rows)
    path = C.prepare_out(out, "laplace2021_sensitivity")
    C.write_table(table, path, "table")
    C.write_json(
        {"experiment": "laplace2021_sensitivity", "quick": quick, "settings": cfg}
        | {"statements": statements(table)},
        path,
        "summary",
    )
    if path is not None:
        _plot(table, path)
    return table


def statements(table) -> list[dict]:
    s = table[table.check == "supplement_fig1"].pivot(index="x", columns="quantity", values="value")
    between = bool(((s[LOWER] < s[SPREAD]) & (s[SPREAD] < s[UPPER])).all())
    share = (s[SPREAD] - s[LOWER]) / (s[UPPER] - s[LOWER])
    e = table[table.check == "example1"].pivot(index="x", columns="quantity", values="value")
    return [
        {
            "paper": "supplement Fig. 1: 2r < empirical max < 2r(2 - h), the curvature "
            "inflation smaller than the bound's",
            "ours": f"2r < empirical < 2r(2 - H) at every radius: {between}; the empirical "
            f"value covers {100 * share.min():.0f}-{100 * share.max():.0f}% of the gap "
            f"between 2r and 2r(2 - H) (r = {s.index.min():g}-{s.index.max():g})",
        },
        {
            "paper": "Example 1: on S¹ the Fréchet mean's sensitivity is π and does not "
            "decrease with n",
            "ours": "; ".join(
                f"n = {int(n)}: {v.sensitivity / np.pi:.4f}π = π(n-2)/(n-1)"
                if v.unique_mean and v.mean_is_the_copy
                else f"n = {int(n)}: the mean is not unique (n odd)"
                for n, v in e.iterrows()
            ),
        },
    ]


def _plot(table, path):
    s = table[table.check == "supplement_fig1"]
    fig, axes = C.figure(1, 2, width=5.2, height=4.0)
    ax = axes[0, 0]
    for q, c in ((LOWER, "tab:blue"), (UPPER, "tab:red"), (SPREAD, "gold")):
        g = s[s.quantity == q]
        ax.plot(g.x, g.value, color=c, lw=2, label=q)
    ax.set(xlabel="radius r of B_r(m0) on S²", ylabel="bound on ‖log_m x − log_m y‖")
    ax.set_title("2021 supplement Fig. 1")
    ax.legend(fontsize=8)
    e = table[(table.check == "example1") & (table.quantity == "sensitivity")]
    ax = axes[0, 1]
    ax.plot(e.x, e.value, "o-", color="tab:blue", label="sup ρ(x̄, x̄') (exact means)")
    ax.axhline(np.pi, color="k", ls=":", label="π")
    ax.set(xscale="log", xlabel="n", ylabel="sensitivity of the Fréchet mean", ylim=(0, 3.5))
    ax.set_title("2021 Example 1: S¹, equally spaced data")
    ax.legend(fontsize=8)
    C.save_figure(fig, path, "supplement_fig1")
