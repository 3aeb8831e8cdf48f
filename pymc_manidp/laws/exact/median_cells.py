r"""The median KNG envelope on boxes (cells) in normal coordinates at ``m0``: a lower
bound of ``|grad F|`` on each box, refined where the bound is loose and the mass large
(``_MedianCells``; docs/exact.md). It serves :func:`~pymc_manidp.laws.exact.sample_kng_median`
at moderate ``n·ε`` and over Dask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from pymc_manidp.laws.exact.rejection import _DASK_BATCH, _KNG_BATCH_LOG_MAPS
from pymc_manidp.stats import reductions

#: cells of the median envelope: the first grid per axis, and the budget of gradient
#: evaluations (cells x records) its refinement may spend
_CELLS_FIRST = 8
_CELL_LOG_MAPS = 5_000_000
#: the expected acceptance at which the refinement stops, and the lowest at which it
#: may stop when the boxes already outnumber the proposals the draws will need
_CELLS_ENOUGH = 0.3
_CELLS_FLOOR = 0.0015


def _chart_distortion(M, radius):
    """Bound on ``rho(exp_m0 a, exp_m0 b) / |a - b|`` for ``|a|, |b| <= radius``.

    Rauch's comparison: the differential of ``exp`` is at most 1 in norm where the
    curvature is ``>= 0``, at most ``sinh(k t)/(k t)`` (``k = sqrt(-kappa_min)``) at
    radius ``t`` otherwise; a segment's image is then at most that much longer.
    """
    kappa = M.curvature_bounds[0]
    if kappa >= 0:
        return 1.0
    a = np.sqrt(-kappa) * radius
    return float(np.sinh(a) / a) if a > 0 else 1.0


def _cut_before_conjugate(M) -> bool:
    """Whether ``M``'s injectivity radius comes before its first conjugate radius
    ``pi/sqrt(kappa_max)`` (SO(3): pi against 2 pi): there a record's cut locus is not
    where the turn budget of the median's bounds charges its worst case (it charges 2
    only at the conjugate radius, :func:`~pymc_manidp.stats.reductions.turn_rate`)."""
    kappa_max = float(M.curvature_bounds[1])
    conjugate = np.pi / np.sqrt(kappa_max) if kappa_max > 0 else np.inf
    # a relative margin: on spheres the two are equal but for rounding (Sphere(radius=7.3)
    # has inj an ulp below pi/sqrt(kappa)), and there the turn budget does see the cut locus
    return bool(M.injectivity_radius < conjugate * (1.0 - 1e-9))


@dataclass
class _MedianCells:
    """The median envelope: boxes in normal coordinates at ``m0`` (centers ``a``,
    sides ``h``), a lower bound ``L`` of ``|grad F|`` on each (geodesic radius
    ``delta`` from its center) and the log weights ``log(h^d) - L/sigma``."""

    a: np.ndarray
    h: np.ndarray
    L: np.ndarray
    log_w: np.ndarray
    #: per box, ``G min(r, |a| + half diagonal)``: a bound of ``log J`` on the box's part
    #: in the ball (``log J(c) <= G |c|``), 0 where ``J <= 1`` (``G = 0``)
    log_J: np.ndarray = None

    @staticmethod
    def _log_J(M, a, h, r):
        growth = M.log_volume_growth
        if growth == 0:
            return np.zeros(len(a))
        reach = np.linalg.norm(a, axis=-1) + 0.5 * h * np.sqrt(M.dim)
        return growth * np.minimum(reach, r)

    @classmethod
    def build(cls, M, data, sigma, domain, size=1, ref=None):
        d, r, m0 = M.dim, domain.radius, domain.center
        # the secant bound's reference: any point of the ball (the computed median is
        # the best); its objective F(ref), one pass
        ref = m0 if ref is None else ref
        ref = (ref, float(reductions.median_terms(M, ref[None], data)[3][0]))
        n = reductions.n_rows(data)
        budget = max(256, _CELL_LOG_MAPS // max(n, 1))
        # 8 boxes per axis where the budget allows; in high dimension fewer (at worst
        # one box: the cube around the ball, a valid but loose envelope)
        g = max(1, min(_CELLS_FIRST, int(np.floor(budget ** (1.0 / d) + 1e-9))))
        side = 2.0 * r / g
        axes = -r + side * (np.arange(g) + 0.5)
        a = np.stack(np.meshgrid(*([axes] * d), indexing="ij"), -1).reshape(-1, d)
        h = np.full(len(a), side)
        a, h = cls._inside(a, h, r)
        L, slack = cls._bounds(M, data, m0, a, h, r, ref)
        while len(a) < budget:
            log_w = d * np.log(h) - L / sigma + cls._log_J(M, a, h, r)
            share = np.exp(log_w - special.logsumexp(log_w))
            # the acceptance to expect (the target's mass on a cell is about its value
            # at the center): once it is reached, more cells cost more than they save
            expect = np.sum(share * np.exp(-slack / sigma))
            if expect >= _CELLS_ENOUGH:
                break
            # each box costs a pass over the data, as each proposal does: once the boxes
            # outnumber the proposals still expected for the draws asked, stop (above a
            # floor that keeps the rejection loop well inside its cap)
            if expect >= _CELLS_FLOOR and len(a) >= size / expect:
                break
            # split the cells that carry mass and whose bound is loose against sigma
            split = (share > 0.25 / len(a)) & (slack > 0.5 * sigma)
            if not split.any() or len(a) + split.sum() * (2**d - 1) > budget:
                break
            offs = np.stack(
                np.meshgrid(*([np.array([-0.25, 0.25])] * d), indexing="ij"), -1
            ).reshape(-1, d)
            kids_a = (a[split][:, None, :] + offs[None] * h[split][:, None, None]).reshape(-1, d)
            kids_h = np.repeat(h[split] / 2.0, 2**d)
            kids_a, kids_h = cls._inside(kids_a, kids_h, r)
            kids_L, kids_slack = cls._bounds(M, data, m0, kids_a, kids_h, r, ref)
            keep = ~split
            a = np.concatenate([a[keep], kids_a])
            h = np.concatenate([h[keep], kids_h])
            L = np.concatenate([L[keep], kids_L])
            slack = np.concatenate([slack[keep], kids_slack])
        log_J = cls._log_J(M, a, h, r)
        return cls(a, h, L, d * np.log(h) - L / sigma + log_J, log_J)

    @property
    def prob(self):
        return np.exp(self.log_w - special.logsumexp(self.log_w))

    def log_mass(self, M, domain) -> float:
        """Log of the envelope's integral over the coordinates at ``m0`` (each box's
        volume bound ``e^{G min(r, |a| + half diagonal)}`` included)."""
        return float(special.logsumexp(self.log_w))

    @staticmethod
    def _inside(a, h, r):
        """Drop the boxes that miss the coordinate ball of radius r."""
        half = 0.5 * h[:, None]
        nearest = np.maximum(np.abs(a) - half, 0.0)
        keep = np.linalg.norm(nearest, axis=-1) < r
        return a[keep], h[keep]

    @staticmethod
    def _bounds(M, data, m0, a, h, r, ref=None):
        """``L`` and its slack on each box: the box's part in the ball lies in the
        geodesic ball of radius ``delta`` (half its diagonal, times the chart's
        distortion) around its anchor, the box's center, moved into the ball where the
        cut locus comes before the conjugate locus (docs/exact.md, "anchors"). ``L`` is
        the larger of two bounds: the turn budget's, and with ``ref = (x_ref, F(x_ref))``
        the secant's ``(F(anchor) - delta - F(x_ref)) / (rho(x_ref, anchor) + delta)``
        (docs/exact.md, "secant")."""
        d = M.dim
        half_diag = 0.5 * h * np.sqrt(d)
        norm_a = np.linalg.norm(a, axis=-1)
        reach = norm_a + half_diag
        delta = half_diag * np.array([_chart_distortion(M, t) for t in reach])
        delta = delta * (1 + 1e-9) + 1e-15 * r  # the rounding of rho and exp
        if _cut_before_conjugate(M):
            # a center outside the ball may sit a half turn from a record (SO(3): log
            # undefined there, and a path to the box may cross a record's cut locus,
            # which the turn budget does not see). Its projection onto the coordinate
            # ball is as close to every point of the box in the ball (a projection onto
            # a convex set is 1-Lipschitz and fixes those points), and lies in the ball
            a = a * np.minimum(1.0, r / np.maximum(norm_a, r))[:, None]
        centers = M.validate(M.exp_coords(np.broadcast_to(m0, (len(a), *m0.shape)), a))
        out_L, out_s, out_F = [], [], []
        step = max(
            1, _KNG_BATCH_LOG_MAPS // (reductions.n_rows(data) * int(np.prod(M.point_shape)))
        )
        if reductions.is_dask(data):
            # a pass over Dask data costs a read of every chunk however few boxes it
            # serves: the in-memory rule above gives one box a pass from n ~ 83,000 on
            # S^2, hundreds of reads; a batch of boxes a pass, as the KNG proposals
            # (_kng_batches). The reductions block each chunk by the boxes' number
            step = _DASK_BATCH
        for s in range(0, len(a), step):
            L, slack = reductions.median_cell_bounds(
                M, centers[s : s + step], data, delta[s : s + step]
            )
            out_L.append(L)
            out_s.append(slack)
            if ref is not None:
                out_F.append(reductions.median_terms(M, centers[s : s + step], data)[3])
        L = np.concatenate(out_L)
        grad_c = L + np.concatenate(out_s)  # |grad F| at the anchors
        if ref is not None:
            # F is 1-Lipschitz (F(x) >= F(anchor) - delta on the box) and convex along
            # the geodesic from x_ref to x in the ball, so |grad F(x)| >= (F(x) -
            # F(x_ref)) / rho(x_ref, x): it does not shrink with the box where the turn
            # budget (every record charged delta coth rho >= delta on H^d) gives nothing
            F_c = np.concatenate(out_F)
            num = F_c - delta - ref[1] - 1e-12 * (1.0 + np.abs(F_c))  # F's rounding
            den = M.dist(ref[0], centers) * (1 + 1e-12) + delta
            L = np.maximum(L, np.where(num > 0, num / np.maximum(den, 1e-300), 0.0))
        # a few ulps of the computed norms: rounding cannot push a ratio above 1
        L = L - 1e-12
        # |grad F| >= 0: a looser bound says nothing more, and would weigh e^{|L|/σ}
        clamped = np.maximum(L, 0.0)
        return clamped, np.maximum(grad_c - clamped, 0.0)
