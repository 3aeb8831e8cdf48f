r"""The quadrature audit: the privacy loss of a mechanism, read off a grid.

:func:`quadrature_audit` (manifolds of dimension 1 to 3): both densities are
normalized by quadrature on a product grid in normal coordinates at the public
center ``m0``, and the privacy loss

.. math:: L(D, D') = \sup_x \big|\log f_D(x) - \log f_{D'}(x)\big|

is read off the grid (plus probe points at the densities' kinks: the Fréchet means
and the geodesic through them). ε-DP holds iff ``L <= ε`` for every neighbouring pair; the
audit searches candidate pairs (:func:`neighbour_pairs`: data on the boundary with
one record moved to the opposite side, clusters with an outlier, random pairs) and
reports the worst, its ratio to ε and a quadrature error estimate (the change of
``L`` when the grid is halved in every direction).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from pymc_manidp.geometry.validation import check_positive_int, check_positive_real
from pymc_manidp.privacy.audit.neighbours import (
    NeighbourPair,
    as_pairs,
    audited_epsilon,
    neighbour_pairs,
)
from pymc_manidp.stats.frechet import frechet_mean

__all__ = [
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
def polar_grid(manifold, center, t_max: float, resolution):
    r"""Product midpoint rule in normal coordinates at ``center``.

    Integrates over the geodesic ball ``{exp_c(v) : |v| < t_max}`` w.r.t. the
    Riemannian volume, in polar coordinates ``v = t ω``:

    .. math:: \int f\,d\mathrm{vol} = \int_0^{t_{\max}}\!\!\int_{S^{d-1}}
              f(\exp_c(t\omega))\, t^{d-1} J(t\omega)\, d\omega\, dt,

    ``J = exp(log_volume_density)``. ``resolution`` is an int ``N`` (``N`` radial
    nodes; ``N`` angles for ``d = 2``; ``N/2`` polar × ``N`` azimuthal angles for
    ``d = 3``) or a tuple of node counts per axis.

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
        n = check_positive_int(resolution, "resolution", minimum=4)
        return (n,) if d == 1 else (n, n) if d == 2 else (n, max(n // 2, 2), n)
    try:
        counts = tuple(check_positive_int(c, "resolution", minimum=2) for c in resolution)
    except TypeError:
        raise TypeError("resolution must be an int or a tuple of ints") from None
    if len(counts) != d:
        raise ValueError(f"resolution must give {d} node counts for dimension {d}")
    return counts


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
    za, zb = special.logsumexp(a + lw), special.logsumexp(b + lw)
    if not (np.isfinite(za) and np.isfinite(zb)):
        raise ValueError("a density vanishes on the whole grid: check t_max and the domain")
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


def _probes(M, radius, pair):
    """Points where the log ratio tends to peak, off the grid.

    Both mechanisms' log densities have kinks at their modes (the Fréchet means),
    and the loss peaks there or on the geodesic through the two means (Laplace:
    ``rho(eta', x) - rho(eta, x)`` is maximal beyond ``eta``; KNG: at the mode of D,
    ``|g_D| = 0``). A grid misses a kink by up to half a node spacing.
    """
    pts = [pair.data[pair.index], pair.neighbour[pair.index]]
    means = []
    for d in (pair.data, pair.neighbour):
        res = frechet_mean(M, d)
        if res.converged:
            means.append(M.validate(res.mean))
    pts += means
    if len(means) == 2:
        v = M.log(means[0], means[1])
        length = float(M.norm(means[0], v))
        if length > 0:
            s = np.linspace(-2.0 * radius, 2.0 * radius, 81) / length
            shape = (-1,) + (1,) * len(M.point_shape)
            pts += list(M.exp(means[0], s.reshape(shape) * v))
    return M.validate(np.stack(pts))


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
    if np.isfinite(M.injectivity_radius) and M.curvature_bounds[0] > 0:
        # compact symmetric spaces here (spheres, CP^n): normal coordinates out to the
        # injectivity radius cover everything but a null set (the cut locus)
        return float(M.injectivity_radius)
    raise ValueError(
        f"{getattr(mech, 'name', 'the mechanism')} lives on all of the non-compact {M}: "
        "pass t_max to truncate the quadrature (its tail mass is then not audited)"
    )


class _Evaluator:
    """Log densities of one mechanism on one grid, cached per dataset."""

    def __init__(self, mech, grid):
        self.mech, self.points, self.log_weights = mech, *grid
        self._cache = {}

    def logp(self, data):
        key = np.asarray(data, float).tobytes()
        if key not in self._cache:
            self._cache[key] = np.asarray(self.mech.logp(self.points, data), float)
        return self._cache[key]

    def loss(self, pair):
        """``(loss, point)``: the supremum over grid and probes, and where it is."""
        M = self.mech.manifold
        probes = _probes(M, self.mech.domain.radius, pair)
        extra = (self.mech.logp(probes, pair.data), self.mech.logp(probes, pair.neighbour))
        loss, node = log_privacy_loss(
            self.logp(pair.data), self.logp(pair.neighbour), self.log_weights, extra
        )
        if node < 0:
            return loss, None
        m = len(self.log_weights)
        return loss, (self.points[node] if node < m else probes[node - m])


def audit_pair(mech, data, neighbour, *, resolution=400, t_max=None):
    """Privacy loss of one pair on a grid: ``(loss, grid_error, worst_point)``.

    ``grid_error`` is the change of the loss when the grid is halved.

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
    fine = _resolution(resolution, M.dim)
    coarse = tuple(max(c // 2, 2) for c in fine)
    ev = _Evaluator(mech, polar_grid(M, mech.domain.center, tm, fine))
    loss_f, point = ev.loss(pair)
    loss_c, _ = _Evaluator(mech, polar_grid(M, mech.domain.center, tm, coarse)).loss(pair)
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
) -> AuditResult:
    """Quadrature audit of a mechanism over candidate neighbouring pairs.

    Every pair's loss is computed on the coarse grid (half the nodes per axis); the
    ``refine`` worst are recomputed on the fine grid, and the largest fine loss is
    reported with ``grid_error = |fine - coarse|`` for that pair.

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
        Fine grid of the polar midpoint rule: ``N`` radial nodes (``N`` angles for
        ``d = 2``; ``N/2`` polar × ``N`` azimuthal angles for ``d = 3``) or a tuple of
        node counts per axis.
    t_max : float, optional
        Radius of the integration ball at the center. Default: the public radius for
        restricted laws, the injectivity radius (the whole space) on spheres and
        Kendall shape spaces otherwise.
    refine : int
        Number of pairs recomputed on the fine grid.
    random_seed : int, Generator or None
        Source of the default pairs' random directions (public: the audit is no release).

    Returns
    -------
    AuditResult
        The worst pair's log privacy loss against ``epsilon`` and the verdict.

    Raises
    ------
    ValueError
        Dimension above 3, non-neighbouring pairs, bad ``epsilon``/``t_max``.

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
        polar_grid(M, mech.domain.center, 1.0, 4)  # raises the dimension error
    if pairs is None:
        pairs = neighbour_pairs(mech.domain, n, random_seed=random_seed)
    pairs = as_pairs(M, pairs)
    refine = check_positive_int(refine, "refine")
    tm = _t_max(mech, t_max)
    fine = _resolution(resolution, M.dim)
    coarse = tuple(max(c // 2, 2) for c in fine)
    ev_c = _Evaluator(mech, polar_grid(M, mech.domain.center, tm, coarse))
    coarse_loss = [ev_c.loss(p)[0] for p in pairs]
    del ev_c
    order = np.argsort(coarse_loss)[::-1][:refine]
    ev_f = _Evaluator(mech, polar_grid(M, mech.domain.center, tm, fine))
    best = None
    for i in order:
        loss, point = ev_f.loss(pairs[i])
        if best is None or loss > best[0]:
            best = (loss, point, i)
    loss, point, i = best
    err = abs(loss - coarse_loss[i]) if np.isfinite(loss) else np.inf
    return AuditResult(
        mechanism=getattr(mech, "name", type(mech).__name__),
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
