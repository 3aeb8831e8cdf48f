r"""The quadrature audit: the privacy loss of a mechanism, read off a grid.

:func:`quadrature_audit` (manifolds of dimension 1 to 3): both densities are
normalized by quadrature on a product grid in normal coordinates at the public
center ``m0``, and the privacy loss

.. math:: L(D, D') = \sup_x \big|\log f_D(x) - \log f_{D'}(x)\big|

is read off the grid (plus probe points at the densities' kinks: the Fréchet means
and the geodesic through them). A restricted law (KNG, the Laplace on the ball) is
normalized on a grid over the public ball; an unrestricted law on grids centered at
each dataset's Fréchet mean (its mode), so that on a homogeneous space the two
normalizers meet the same quadrature error and truncation, which cancel (docs/audit.md).
ε-DP holds iff ``L <= ε`` for every neighbouring pair; the
audit searches candidate pairs (:func:`neighbour_pairs`: data on the boundary with
one record moved to the opposite side, clusters with an outlier, random pairs) and
reports the worst, its ratio to ε and a quadrature error estimate (the change of
``L`` when the grid is halved in every direction). Its memory and time are estimated,
and a too large audit refused, before any grid is built.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from pymc_manidp._progress import progress_bar
from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.privacy.audit import _cost
from pymc_manidp.privacy.audit.neighbours import (
    NeighbourPair,
    as_pairs,
    audited_epsilon,
    neighbour_pairs,
    pair_count,
    pairs_bytes,
)
from pymc_manidp.stats.frechet import frechet_mean
from pymc_manidp.stats.median import frechet_median

__all__ = [
    "MIN_RESOLUTION",
    "AuditResult",
    "audit_pair",
    "log_privacy_loss",
    "polar_grid",
    "quadrature_audit",
    "with_sigma_divided",
]


def with_sigma_divided(mech, factor: float):
    """A copy of ``mech`` whose scale ``sigma(n)`` is divided by ``factor``.

    With ``factor > 1`` this is the deliberately broken variant an audit must catch:
    its privacy loss grows by about ``factor`` while it still claims ``mech.epsilon``.

    Examples
    --------
    >>> import numpy as np, pymc_manidp as pmd
    >>> m = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0], radius=0.3)
    >>> b = with_sigma_divided(m, 2.0)
    >>> bool(np.isclose(b.sigma(10), m.sigma(10) / 2)), b.name
    (True, 'KNG (sigma / 2)')
    """
    factor = check_positive_real(factor, "factor")
    base = type(mech)

    class Divided(base):
        name = f"{mech.name} (sigma / {factor:g})"

        def sigma(self, n):
            return base.sigma(self, n) / factor

    Divided.__name__ = Divided.__qualname__ = f"{base.__name__}SigmaDivided"
    out = object.__new__(Divided)
    out.__dict__.update(mech.__dict__)
    return out


# --- quadrature ---------------------------------------------------------------------
#: Smallest int ``resolution``: the error estimate halves it, and a midpoint rule
#: needs at least 2 nodes per axis (a tuple gives at least 2 per axis itself).
MIN_RESOLUTION = 4


def polar_grid(manifold, center, t_max: float, resolution):
    r"""Product midpoint rule in normal coordinates at ``center``.

    Integrates over the geodesic ball ``{exp_c(v) : |v| < t_max}`` w.r.t. the
    Riemannian volume, in polar coordinates ``v = t ω``:

    .. math:: \int f\,d\mathrm{vol} = \int_0^{t_{\max}}\!\!\int_{S^{d-1}}
              f(\exp_c(t\omega))\, t^{d-1} J(t\omega)\, d\omega\, dt,

    ``J = exp(log_volume_density)``. ``resolution`` is an int ``N >= 4`` (``N``
    radial nodes; ``N`` angles for ``d = 2``; ``N/2`` polar × ``N`` azimuthal angles
    for ``d = 3``) or a tuple of node counts per axis (each ``>= 2``).

    Returns
    -------
    points : ndarray, shape ``(m, *point_shape)``
    log_weights : ndarray, shape ``(m,)``

    Raises
    ------
    ValueError
        For ``dim > 3`` (the grid grows like ``N^dim``), a bad ``t_max`` or resolution.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_manidp import Sphere
    >>> pts, lw = polar_grid(Sphere(dim=2), [0, 0, 1.0], np.pi, 200)
    >>> round(float(np.exp(lw).sum() / (4 * np.pi)), 4)  # the sphere's area
    1.0
    """
    d = int(manifold.dim)
    if d > 3:
        raise ValueError(
            f"the quadrature audit needs a manifold of dimension 1, 2 or 3; {manifold} has "
            f"dimension {d} (a grid would need N^{d} nodes). Use sample_test instead."
        )
    t_max = check_positive_real(t_max, "t_max")
    if not t_max <= manifold.injectivity_radius:
        raise ValueError(
            f"t_max must be at most the injectivity radius {manifold.injectivity_radius:.6g} "
            f"(normal coordinates stop being a chart beyond it), got {t_max:.6g}"
        )
    counts = _resolution(resolution, d)
    nt = counts[0]
    dt = t_max / nt
    t = (np.arange(nt) + 0.5) * dt
    if d == 1:
        coords = np.concatenate([t, -t])[:, None]
        logw = np.full(2 * nt, np.log(dt))
    elif d == 2:
        nphi = counts[1]
        phi = 2.0 * np.pi * (np.arange(nphi) + 0.5) / nphi
        omega = np.stack([np.cos(phi), np.sin(phi)], -1)
        coords = (t[:, None, None] * omega[None]).reshape(-1, 2)
        logw = np.repeat(np.log(t * dt * 2.0 * np.pi / nphi), nphi)
    else:
        nth, nphi = counts[1], counts[2]
        th = np.pi * (np.arange(nth) + 0.5) / nth
        phi = 2.0 * np.pi * (np.arange(nphi) + 0.5) / nphi
        omega = np.stack(
            [
                np.sin(th)[:, None] * np.cos(phi)[None],
                np.sin(th)[:, None] * np.sin(phi)[None],
                np.broadcast_to(np.cos(th)[:, None], (nth, nphi)),
            ],
            -1,
        ).reshape(-1, 3)
        dang = np.log(np.repeat(np.sin(th), nphi) * (np.pi / nth) * (2.0 * np.pi / nphi))
        coords = (t[:, None, None] * omega[None]).reshape(-1, 3)
        logw = (np.log(t**2 * dt)[:, None] + dang[None]).ravel()
    center = manifold.validate(center)
    points = manifold.validate(manifold.exp_coords(center, coords))
    return points, logw + manifold.log_volume_density(coords)


def _resolution(resolution, d):
    if isinstance(resolution, numbers.Integral) and not isinstance(resolution, bool):
        n = check_positive_int(resolution, "resolution", minimum=MIN_RESOLUTION)
        # the polar angle of d = 3 gets half the nodes, but never fewer than the error
        # estimate's halving needs (resolution 4 used to give a middle axis of 2, then 1)
        return (n,) if d == 1 else (n, n) if d == 2 else (n, max(n // 2, MIN_RESOLUTION), n)
    try:
        counts = tuple(check_positive_int(c, "resolution", minimum=2) for c in resolution)
    except TypeError:
        raise TypeError("resolution must be an int or a tuple of ints") from None
    if len(counts) != d:
        raise ValueError(f"resolution must give {d} node counts for dimension {d}")
    return counts


def _coarse(counts):
    # half the nodes on every axis, so that the error estimate sees every axis
    return tuple(max(c // 2, 1) for c in counts)


def _nodes(counts) -> int:
    """Nodes of a grid with these counts (``d = 1`` mirrors its radii)."""
    return math.prod(counts) * (2 if len(counts) == 1 else 1)


def log_privacy_loss(logp_data, logp_neighbour, log_weights, probes=None):
    """``sup |log f_D - log f_D'|`` on a grid from unnormalized log densities.

    Both densities are normalized with the same quadrature weights. The supremum is
    taken over the grid nodes and, if given, extra ``probes = (logp_data,
    logp_neighbour)`` at points outside the grid (they do not enter the normalizers).
    Nodes where both densities vanish are ignored; a node where exactly one vanishes
    gives ``inf`` (the supports differ, so no finite ε covers the pair). Returns
    ``(loss, node)``: the index attaining the supremum, counting grid nodes first and
    probes after them (``-1`` if none).

    Examples
    --------
    >>> import numpy as np
    >>> lw = np.log(np.full(4, 0.25))
    >>> loss, node = log_privacy_loss(np.zeros(4), np.array([0.0, 0, 0, np.log(2)]), lw)
    >>> round(float(loss), 6), int(node)  # f_D' = (0.8, 0.8, 0.8, 1.6)
    (0.470004, 3)
    """
    a, b, lw = (np.asarray(v, float) for v in (logp_data, logp_neighbour, log_weights))
    return _sup_loss(a, b, _log_normalizer(a, lw), _log_normalizer(b, lw), probes)


def _log_normalizer(logp, log_weights):
    z = special.logsumexp(logp + log_weights)
    if not np.isfinite(z):
        raise ValueError("a density vanishes on the whole grid: check t_max and the domain")
    return z


def _sup_loss(a, b, za, zb, probes=None):
    """``sup |(a - za) - (b - zb)|`` over nodes and probes: ``(loss, node)``."""
    if probes is not None:
        a = np.concatenate([a, np.asarray(probes[0], float).ravel()])
        b = np.concatenate([b, np.asarray(probes[1], float).ravel()])
    fa, fb = np.isfinite(a), np.isfinite(b)
    if np.any(fa != fb):
        return np.inf, int(np.argmax(fa != fb))
    both = fa & fb
    if not np.any(both):
        return 0.0, -1
    diff = np.full(a.shape, -np.inf)
    diff[both] = np.abs((a[both] - za) - (b[both] - zb))
    node = int(np.argmax(diff))
    return float(diff[node]), node


def _name(mech) -> str:
    return getattr(mech, "name", type(mech).__name__)


def _is_median(mech) -> bool:
    """Whether the mechanism privatizes the Fréchet median (KNG's ``statistic``)."""
    return getattr(mech, "statistic", "mean") == "median"


def _means(M, pair, median=False):
    """The densities' modes: both datasets' Fréchet means, or medians for a median
    mechanism (None where the iteration did not converge)."""
    out = []
    for d in (pair.data, pair.neighbour):
        if median:
            res = frechet_median(M, d)
            out.append(M.validate(res.median) if res.converged else None)
        else:
            res = frechet_mean(M, d)
            out.append(M.validate(res.mean) if res.converged else None)
    return out


#: distance of the ring probes from each record, relative to the ball's radius
_RING = 1e-6


def _record_rings(M, records, radius):
    """Points a hair's breadth from each record, in ``2d`` axis and ``2d(d-1)`` diagonal
    directions of its frame.

    The median's gradient norm ``|(1/n) sum_i u_i|`` is discontinuous at a record: the
    record's unit vector ``u_k`` takes every direction around it, so the density's
    limit there depends on the direction of approach, and a grid node is never close
    enough to see all of them. These probes do.
    """
    d = M.dim
    eye = np.eye(d)
    dirs = [eye, -eye]
    for a in range(d):
        for b in range(a + 1, d):
            for sa in (1.0, -1.0):
                for sb in (1.0, -1.0):
                    v = np.zeros(d)
                    v[a], v[b] = sa, sb
                    dirs.append(v[None] / np.sqrt(2.0))
    coords = _RING * radius * np.concatenate(dirs)  # (k, d)
    k = len(coords)
    base = np.repeat(records, k, axis=0)
    return M.exp_coords(base, np.tile(coords, (len(records), 1)))


def _probes(M, domain, pair, means, restricted, median=False):
    """Points where the log ratio tends to peak, off the grid.

    Both mechanisms' log densities have kinks at their modes (the Fréchet means),
    and the loss peaks there or on the geodesic through the two means (Laplace:
    ``rho(eta', x) - rho(eta, x)`` is maximal beyond ``eta``; KNG: at the mode of D,
    ``|g_D| = 0``). A grid misses a kink by up to half a node spacing. A restricted
    law vanishes outside the public ball, so its probes stay inside (outside, KNG's
    gradient would meet the data's cut locus when the ball is nearly as large as r*).

    For the median (``median=True``) the modes are the Fréchet medians, and two more
    families: the geodesic between the changed record and its replacement (where
    their unit vectors are opposite, so the gradients differ by the full ``2/n``),
    and rings around every record of both datasets (:func:`_record_rings`: the
    density is discontinuous at each record).
    """
    radius = domain.radius
    pts = [pair.data[pair.index], pair.neighbour[pair.index]]
    means = [m for m in means if m is not None]
    pts += means
    shape = (-1,) + (1,) * len(M.point_shape)
    if len(means) == 2:
        v = M.log(means[0], means[1])
        length = float(M.norm(means[0], v))
        if length > 0:
            s = np.linspace(-2.0 * radius, 2.0 * radius, 81) / length
            pts += list(M.exp(means[0], s.reshape(shape) * v))
    if median:
        a, b = pair.data[pair.index], pair.neighbour[pair.index]
        s = np.linspace(0.0, 1.0, 81)[1:-1]
        pts += list(M.exp(a, s.reshape(shape) * M.log(a, b)))
        pts += list(
            _record_rings(M, np.concatenate([pair.data, pair.neighbour[[pair.index]]]), radius)
        )
    pts = M.validate(np.stack(pts))
    if restricted:
        pts = pts[domain.distances(pts) <= radius]
    return pts


# --- the quadrature audit ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AuditResult:
    """Figures of a quadrature audit.

    Attributes
    ----------
    mechanism, manifold : str
    epsilon : float
        The claimed budget.
    n : int
    worst_log_ratio : float
        Largest ``sup_x |log f_D(x) - log f_D'(x)|`` over the pairs tried (fine grid).
    ratio : float
        ``worst_log_ratio / epsilon``.
    grid_error : float
        ``|L_fine - L_coarse|`` for the worst pair (coarse = half the nodes per axis).
    resolution : tuple of int
        Fine grid node counts.
    pair : NeighbourPair
        The worst pair found.
    worst_point : ndarray
        Where the loss of the worst pair peaks (a grid node or a probe).
    pairs_tried : int
    passed : bool
        ``worst_log_ratio + grid_error <= epsilon``.
    losses : tuple of (label, coarse loss)
        The search: every pair's loss on the coarse grid.
    """

    mechanism: str
    manifold: str
    epsilon: float
    n: int
    worst_log_ratio: float
    ratio: float
    grid_error: float
    resolution: tuple
    pair: NeighbourPair
    worst_point: np.ndarray
    pairs_tried: int
    passed: bool
    losses: tuple = field(default=(), repr=False)

    def summary(self) -> str:
        """One paragraph in words: the verdict, the worst loss and where it was found."""
        verdict = "PASSED" if self.passed else "FAILED"
        return (
            f"quadrature audit of {self.mechanism} on {self.manifold}, n = {self.n}: "
            f"eps = {self.epsilon:g}, worst sup|log f_D - log f_D'| = "
            f"{self.worst_log_ratio:.4g} ± {self.grid_error:.2g} (quadrature), "
            f"ratio to eps {self.ratio:.3f}; worst of {self.pairs_tried} pairs: "
            f"'{self.pair.label}' (record {self.pair.index}); grid "
            f"{'x'.join(map(str, self.resolution))}: {verdict}"
        )


def _t_max(mech, t_max):
    if t_max is not None:
        return check_positive_real(t_max, "t_max")
    M, r = mech.manifold, mech.domain.radius
    if getattr(mech, "restricted", False):
        return r
    if np.isfinite(M.log_volume) and np.isfinite(M.injectivity_radius):
        # compact symmetric spaces here (spheres, S^1 included, and CP^n): normal
        # coordinates out to the injectivity radius cover everything but a null set
        # (the cut locus)
        return float(M.injectivity_radius)
    raise ValueError(
        f"{getattr(mech, 'name', 'the mechanism')} lives on all of the non-compact {M}: "
        "pass t_max to truncate the quadrature (its tail mass is then not audited)"
    )


def _restricted(mech) -> bool:
    return bool(getattr(mech, "restricted", False))


# A log-density call gets grid nodes in chunks of at most this many node x record x
# coordinate numbers: KNG's holds (nodes, n, *point_shape) arrays.
_CHUNK_ELEMENTS = 2**18


def _chunk(M, n: int) -> int:
    return max(1, _CHUNK_ELEMENTS // (max(n, 1) * math.prod(M.point_shape)))


class _Evaluator:
    """Privacy losses of one mechanism's pairs on grids of one resolution.

    A restricted law is normalized on one grid over the public ball. An unrestricted
    one lives on the whole space: each density is normalized on a grid centered at
    its dataset's Fréchet mean (its mode) reaching ``t_max`` from it. On a
    homogeneous space the two grids are isometric images and the two integrands the
    same function of the distance to the grid's center, so the two normalizers have
    the same quadrature error and the same truncated tail, which cancel in the loss;
    a grid at the public center would misplace the kinks and truncate the two laws
    differently (docs/audit.md: the SPD(2) Laplace).
    """

    def __init__(self, mech, t_max, counts):
        self.mech, self.t_max, self.counts = mech, t_max, counts
        self.M = mech.manifold
        self.restricted = _restricted(mech)
        self.grid = (
            polar_grid(self.M, mech.domain.center, t_max, counts) if self.restricted else None
        )

    def logp(self, points, data):
        """``mech.logp`` at ``points`` ``(m, *point_shape)``, in chunks: shape ``(m,)``."""
        step = _chunk(self.M, len(data))
        parts = [
            np.asarray(self.mech.logp(points[i : i + step], data), float).reshape(-1)
            for i in range(0, len(points), step)
        ]
        return np.concatenate(parts) if parts else np.empty(0)

    def loss(self, pair):
        """``(loss, point)``: the supremum over grid nodes and probes, and where it is."""
        M, mech = self.M, self.mech
        median = _is_median(mech)
        means = _means(M, pair, median)
        probes = _probes(M, mech.domain, pair, means, self.restricted, median)
        extra = (self.logp(probes, pair.data), self.logp(probes, pair.neighbour))
        if self.restricted:
            pts, lw = self.grid
            a, b = self.logp(pts, pair.data), self.logp(pts, pair.neighbour)
            za, zb = _log_normalizer(a, lw), _log_normalizer(b, lw)
            grids = [pts]
        else:
            centers = [mech.domain.center if c is None else c for c in means]
            (pa, la), (pb, lb) = (polar_grid(M, c, self.t_max, self.counts) for c in centers)
            a_a, b_b = self.logp(pa, pair.data), self.logp(pb, pair.neighbour)
            za, zb = _log_normalizer(a_a, la), _log_normalizer(b_b, lb)
            # the supremum is over every output: both grids' nodes count
            a = np.concatenate([a_a, self.logp(pb, pair.data)])
            b = np.concatenate([self.logp(pa, pair.neighbour), b_b])
            grids = [pa, pb]
        loss, node = _sup_loss(a, b, za, zb, extra)
        if node < 0:
            return loss, None
        for g in grids:
            if node < len(g):
                return loss, g[node]
            node -= len(g)
        return loss, probes[node]


# --- what an audit costs -------------------------------------------------------------
def _floats_per_node(M, restricted: bool) -> float:
    """Peak float64 numbers an audit holds per node of its fine grid.

    The grid being built (``exp_coords``' temporaries: measured up to 6.4 (p + d + 1)
    on SPD(2), counted as 8), the grids kept (p + 1 each: one over the ball, or the
    two at the modes), the log densities on them (2 or 4) and the loss's copies and
    masks (8 per log density). The tests check it against tracemalloc.
    """
    p, d = math.prod(M.point_shape), M.dim
    grids, logps = (1, 2) if restricted else (2, 4)
    return 8 * (p + d + 1) + grids * (p + 1) + logps * 8


def _quadrature_bytes(M, restricted, fine, n, count, build_pairs) -> float:
    """Estimated peak memory: the fine grid's work, one chunk of ``logp`` (KNG holds
    about 7 arrays of ``(chunk, n, *point_shape)``) and the default pairs."""
    chunk = 8.0 * 8 * (_chunk(M, n) * max(n, 1) * math.prod(M.point_shape) + 1024)
    pairs = pairs_bytes(M, n, count) if build_pairs else 0.0
    return 8.0 * _nodes(fine) * _floats_per_node(M, restricted) + chunk + pairs


def _calibrate(mech, pair, t_max):
    """Measured costs ``(per logp call, per node in a logp call, per grid node built)``.

    Two timed calls of ``mech.logp`` on the pair's data (1 point, then up to 512
    nodes of a small grid, never more than one chunk) and a small grid built: the
    audit's work scales from these, whatever the mechanism.
    """
    M = mech.manifold
    small = {1: (256,), 2: (16, 32), 3: (8, 8, 8)}[M.dim]
    center = mech.domain.center
    per_built = _cost.timed(lambda: polar_grid(M, center, t_max, small), repeats=2) / 512
    pts, _ = polar_grid(M, center, t_max, small)
    pts = pts[: _chunk(M, len(pair.data))]
    per_call = _cost.timed(lambda: mech.logp(pts[:1], pair.data))
    per_node = _cost.timed(lambda: mech.logp(pts, pair.data)) / len(pts)
    return per_call, per_node, per_built


def _quadrature_seconds(M, restricted, passes, n, costs) -> float:
    """Estimated time of the passes ``[(grid counts, pairs), ...]``."""
    per_call, per_node, per_built = costs
    logps = 2 if restricted else 4
    total = 0.0
    for counts, pairs in passes:
        m = _nodes(counts)
        calls = pairs * (logps * math.ceil(m / _chunk(M, n)) + 2)
        built = m if restricted else 2 * pairs * m
        total += calls * per_call + pairs * logps * m * per_node + built * per_built
    return total


class _Size:
    """The size checks of one audit: memory before anything is built, then time."""

    def __init__(self, mech, resolution, n, count, refine, build_pairs, max_bytes, max_seconds):
        self.mech, self.M, self.restricted = mech, mech.manifold, _restricted(mech)
        self.resolution, self.fine = resolution, _resolution(resolution, mech.manifold.dim)
        if min(_coarse(self.fine)) < 2:
            raise ValueError(
                f"resolution {tuple(self.fine)}: every axis needs at least {MIN_RESOLUTION} "
                "nodes, as the grid-error estimate reruns the audit on a grid of half as "
                f"many (here {tuple(_coarse(self.fine))}) and a midpoint rule needs 2"
            )
        self.n, self.count, self.refine, self.build_pairs = n, count, refine, build_pairs
        self.max_bytes = _cost.memory_limit(max_bytes)
        self.max_seconds = _cost.time_limit(max_seconds)
        self.what = (
            f"the quadrature audit ({'x'.join(map(str, self.fine))} grid, {count} pair(s) "
            f"of n = {n} records)"
        )

    def _grid(self, k):
        """The fine counts of the same kind of resolution with ``k`` radial nodes."""
        if isinstance(self.resolution, numbers.Integral):
            return _resolution(k, self.M.dim)
        return tuple(max(2, (c * k) // self.fine[0]) for c in self.fine)

    def _fix(self, fits, fits_n=None, more=""):
        integral = isinstance(self.resolution, numbers.Integral)
        lo = MIN_RESOLUTION if integral else 2
        k = _cost.largest(lambda k: fits(self._grid(k)), lo, max(self.fine[0], lo))
        opts = []
        if k >= lo:
            opts.append(f"resolution <= {k}" if integral else f"resolution {self._grid(k)}")
        if fits_n is not None:
            kn = _cost.largest(fits_n, 1, self.n)
            if kn >= 1:
                opts.append(f"n <= {kn}")
        return ("choose " + " or ".join(opts) if opts else "choose a smaller resolution") + more

    def bytes(self, fine=None, n=None):
        return _quadrature_bytes(
            self.M,
            self.restricted,
            self.fine if fine is None else fine,
            self.n if n is None else n,
            self.count,
            self.build_pairs,
        )

    def check_memory(self):
        """From the sizes alone: nothing is allocated before this passes."""
        if self.bytes() > self.max_bytes:
            _cost.refuse(
                self.what,
                self.bytes(),
                None,
                self.max_bytes,
                self.max_seconds,
                self._fix(
                    lambda c: self.bytes(fine=c) <= self.max_bytes,
                    (lambda k: self.bytes(n=k) <= self.max_bytes) if self.build_pairs else None,
                ),
            )

    def check_time(self, pair, t_max):
        """From two timed ``logp`` calls on ``pair``'s data, before any full grid."""
        costs = _calibrate(self.mech, pair, t_max)

        def seconds(fine):
            passes = [(_coarse(fine), self.count), (fine, min(self.refine, self.count))]
            return _quadrature_seconds(self.M, self.restricted, passes, self.n, costs)

        if seconds(self.fine) > self.max_seconds:
            _cost.refuse(
                self.what,
                self.bytes(),
                seconds(self.fine),
                self.max_bytes,
                self.max_seconds,
                self._fix(lambda c: seconds(c) <= self.max_seconds, more=" (or a smaller n)"),
            )


def audit_pair(
    mech, data, neighbour, *, resolution=400, t_max=None, max_bytes=None, max_seconds=None
):
    """Privacy loss of one pair on a grid: ``(loss, grid_error, worst_point)``.

    ``grid_error`` is the change of the loss when the grid is halved. ``resolution``,
    ``t_max``, ``max_bytes`` and ``max_seconds`` are those of :func:`quadrature_audit`.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.privacy import boundary_pair
    >>> mech = pmd.LaplaceMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                             radius=np.pi / 8)
    >>> p = boundary_pair(mech.domain, 10)
    >>> loss, err, _ = audit_pair(mech, p.data, p.neighbour, resolution=100)
    >>> bool(loss < mech.epsilon)
    True
    """
    M = mech.manifold
    pair = as_pairs(M, (data, neighbour))[0]
    tm = _t_max(mech, t_max)
    size = _Size(mech, resolution, len(pair.data), 1, 1, False, max_bytes, max_seconds)
    size.check_memory()
    size.check_time(pair, tm)
    loss_f, point = _Evaluator(mech, tm, size.fine).loss(pair)
    loss_c, _ = _Evaluator(mech, tm, _coarse(size.fine)).loss(pair)
    return loss_f, abs(loss_f - loss_c), point


def quadrature_audit(
    mech,
    pairs=None,
    *,
    n: int = 10,
    epsilon=None,
    resolution=400,
    t_max=None,
    refine: int = 3,
    random_seed=0,
    max_bytes=None,
    max_seconds=None,
    progressbar=None,
) -> AuditResult:
    """Quadrature audit of a mechanism over candidate neighbouring pairs.

    Every pair's loss is computed on the coarse grid (half the nodes per axis); the
    ``refine`` worst are recomputed on the fine grid, and the largest fine loss is
    reported with ``grid_error = |fine - coarse|`` for that pair. The audit's memory
    is estimated from the sizes before anything is built, its time from two timed
    ``mech.logp`` calls before any grid; either above its limit is refused.

    Parameters
    ----------
    mech : mechanism object
        With ``manifold`` (dimension 1–3), ``domain``, ``epsilon``, ``logp(x, data)``
        (unnormalized log density w.r.t. volume, vectorized over ``x``) and
        ``restricted`` (density supported on the public ball).
    pairs : iterable of NeighbourPair or (data, neighbour), optional
        Default: :func:`neighbour_pairs` of ``mech.domain`` with ``n`` records.
    n : int
        Records per dataset for the default pairs.
    epsilon : float, optional
        Budget to audit against (default ``mech.epsilon``).
    resolution : int or tuple
        Fine grid of the polar midpoint rule: ``N >= 4`` radial nodes (``N`` angles
        for ``d = 2``; ``N/2`` polar × ``N`` azimuthal angles for ``d = 3``) or a
        tuple of node counts per axis (each ``>= 2``).
    t_max : float, optional
        Radius of the integration balls. A restricted law is integrated over
        ``B_{t_max}(m0)`` (default: the public ball). An unrestricted law is
        normalized on ``B_{t_max}`` around each dataset's Fréchet mean (default: the
        whole space on spheres and Kendall shape spaces; required on SPD, whose tail
        beyond ``t_max`` is not audited).
    refine : int
        Number of pairs recomputed on the fine grid.
    random_seed : int, Generator or None
        Source of the default pairs' random directions (public: the audit is no release).
    max_bytes : float, optional
        Memory the audit may take (default: half of this machine's memory).
    max_seconds : float, optional
        Computing time the audit may take (default an hour).
    progressbar : bool or None
        A bar over the pairs (coarse grid, then the ``refine`` on the fine one) on
        stderr; ``None``: only when stderr is a terminal and ``$CI`` is unset.

    Returns
    -------
    AuditResult
        The worst pair's log privacy loss against ``epsilon`` and the verdict.

    Raises
    ------
    ValueError
        Dimension above 3, non-neighbouring pairs, bad ``epsilon``/``t_max``/
        ``resolution``, or an audit whose estimated memory or time exceeds
        ``max_bytes``/``max_seconds`` (the message gives the estimates and the
        largest ``resolution`` and ``n`` that fit).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> from pymc_manidp.privacy import boundary_pair
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                         radius=np.pi / 8)
    >>> res = quadrature_audit(mech, boundary_pair(mech.domain, 10), resolution=40)
    >>> res.passed, round(res.ratio, 2)
    (True, 0.68)
    """
    M = mech.manifold
    eps = audited_epsilon(mech, epsilon)
    if M.dim > 3:
        polar_grid(M, mech.domain.center, 1.0, MIN_RESOLUTION)  # raises the dimension error
    refine = check_positive_int(refine, "refine")
    tm = _t_max(mech, t_max)
    if pairs is None:
        n = check_positive_int(n, "n")
        count = pair_count(M.dim, n)
        size = _Size(mech, resolution, n, count, refine, True, max_bytes, max_seconds)
        size.check_memory()
        pairs = neighbour_pairs(mech.domain, n, random_seed=random_seed, max_bytes=size.max_bytes)
    pairs = as_pairs(M, pairs)
    n_max = max(len(p.data) for p in pairs)
    size = _Size(mech, resolution, n_max, len(pairs), refine, False, max_bytes, max_seconds)
    size.check_memory()
    size.check_time(pairs[0], tm)
    fine, coarse = size.fine, _coarse(size.fine)
    steps = len(pairs) + min(refine, len(pairs))
    with progress_bar(f"quadrature audit of {_name(mech)}", steps, progressbar) as advance:
        ev_c = _Evaluator(mech, tm, coarse)
        coarse_loss = []
        for p in pairs:
            coarse_loss.append(ev_c.loss(p)[0])
            advance()
        del ev_c
        order = np.argsort(coarse_loss)[::-1][:refine]
        ev_f = _Evaluator(mech, tm, fine)
        best = None
        for i in order:
            loss, point = ev_f.loss(pairs[i])
            advance()
            if best is None or loss > best[0]:
                best = (loss, point, i)
    loss, point, i = best
    err = abs(loss - coarse_loss[i]) if np.isfinite(loss) else np.inf
    return AuditResult(
        mechanism=_name(mech),
        manifold=repr(M),
        epsilon=eps,
        n=len(pairs[i].data),
        worst_log_ratio=float(loss),
        ratio=float(loss / eps),
        grid_error=float(err),
        resolution=fine,
        pair=pairs[i],
        worst_point=point,
        pairs_tried=len(pairs),
        passed=bool(loss + err <= eps),
        losses=tuple((p.label, float(c)) for p, c in zip(pairs, coarse_loss, strict=True)),
    )
