r"""Privacy audits: can a mechanism's privacy loss exceed its ε?

Two audits, both for a pair of neighbouring datasets ``D, D'`` (same ``n``, exactly
one record changed in place):

**Quadrature audit** (:func:`quadrature_audit`, manifolds of dimension 1 to 3). Both densities
are normalized by quadrature on a product grid in normal coordinates at the public
centre ``m0``, and the privacy loss

.. math:: L(D, D') = \sup_x \big|\log f_D(x) - \log f_{D'}(x)\big|

is read off the grid (plus probe points at the densities' kinks: the Fréchet means
and the geodesic through them). ε-DP holds iff ``L <= ε`` for every neighbouring pair; the
audit searches candidate pairs (:func:`neighbour_pairs`: data on the boundary with
one record moved to the opposite side, clusters with an outlier, random pairs) and
reports the worst, its ratio to ε and a quadrature error estimate (the change of
``L`` when the grid is halved in every direction).

**Black-box sample test** (:func:`sample_test`, any manifold), after DP-Auditorium's
histogram tester: draws from ``M(D)`` and ``M(D')`` are mapped to a scalar
(geodesic distance to a fixed point, a tangent coordinate), binned, and each bin
gets Clopper–Pearson bounds. With all bounds holding at once (Bonferroni over bins,
both directions and statistics), for every bin ``B``

.. math:: \log \frac{P(M(D) \in B)}{P(M(D') \in B)} \ge
          \log \frac{p_{\rm lo}(B)}{q_{\rm hi}(B)},

so ``eps_lb`` (the largest right-hand side over bins and directions) is a lower bound
on the privacy loss at the stated confidence. An ε-DP mechanism gives
``eps_lb > ε`` with probability at most ``1 - confidence``; the test passes when
``eps_lb <= ε``. It can only ever *refute* a privacy claim, never prove one.

The audits take mechanism objects by duck typing (``manifold``, ``domain``,
``epsilon``, ``logp(x, data)``, ``restricted``, ``name``; ``sample(data, size,
random_seed=...)`` for the default sampler): this layer does not import the
mechanisms.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import special, stats

from pymc_manidp.geometry.validation import check_positive_int, check_positive_real
from pymc_manidp.stats.frechet import frechet_mean

__all__ = [
    "AuditResult",
    "NeighbourPair",
    "SampleTestResult",
    "audit_pair",
    "boundary_pair",
    "check_neighbours",
    "clopper_pearson",
    "distance_statistic",
    "histogram_epsilon_lb",
    "log_privacy_loss",
    "neighbour_pairs",
    "polar_grid",
    "quadrature_audit",
    "sample_test",
    "tangent_statistic",
    "with_sigma_divided",
]

# Records closer than this (geodesic distance) count as unchanged.
_SAME_TOL = 1e-9
# Boundary records sit this fraction inside the ball, so rounding keeps them in it.
_INSIDE = 1.0 - 1e-9


def with_sigma_divided(mech, factor: float):
    """A copy of ``mech`` whose rate ``scale(n)`` is divided by ``factor``.

    With ``factor > 1`` this is the deliberately broken variant an audit must catch:
    its privacy loss grows by about ``factor`` while it still claims ``mech.epsilon``.

    Examples
    --------
    >>> import numpy as np, pymc_manidp as pmd
    >>> m = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0], radius=0.3)
    >>> b = with_sigma_divided(m, 2.0)
    >>> bool(np.isclose(b.scale(10), m.scale(10) / 2)), b.name
    (True, 'KNG (sigma / 2)')
    """
    factor = check_positive_real(factor, "factor")
    base = type(mech)

    class Divided(base):
        name = f"{mech.name} (sigma / {factor:g})"

        def scale(self, n):
            return base.scale(self, n) / factor

    Divided.__name__ = Divided.__qualname__ = f"{base.__name__}SigmaDivided"
    out = object.__new__(Divided)
    out.__dict__.update(mech.__dict__)
    return out


# --- neighbouring pairs ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NeighbourPair:
    """Two datasets ``data``, ``neighbour`` differing in record ``index`` only."""

    label: str
    data: np.ndarray
    neighbour: np.ndarray
    index: int


def check_neighbours(manifold, data, neighbour) -> int:
    """Check that two datasets are neighbours; return the changed record's index.

    Neighbours have the same number of records and differ (geodesic distance above
    ``1e-9``) in exactly one position: the replace-one relation of both papers, with
    records compared in order.

    Raises
    ------
    ValueError
        Different ``n``, no record changed, or more than one record changed.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_manidp import Sphere
    >>> d = np.array([[0.0, 0, 1], [0, 1, 0]])
    >>> check_neighbours(Sphere(dim=2), d, np.array([[0.0, 0, 1], [1, 0, 0]]))
    1
    """
    a, b = manifold.validate(data), manifold.validate(neighbour)
    k = len(manifold.point_shape)
    if a.ndim != k + 1 or b.ndim != k + 1:
        raise ValueError(
            f"datasets must have shape (n, {', '.join(map(str, manifold.point_shape))}), "
            f"got {a.shape} and {b.shape}"
        )
    if len(a) != len(b):
        raise ValueError(
            f"neighbouring datasets have the same number of records (one is replaced); "
            f"got n = {len(a)} and n' = {len(b)}"
        )
    changed = np.flatnonzero(~(manifold.dist(a, b) <= _SAME_TOL))
    if len(changed) != 1:
        raise ValueError(
            "neighbouring datasets differ in exactly one record (compared in order); "
            f"these differ in {len(changed)}"
            + (f" (rows {changed[:5].tolist()}...)" if len(changed) else "")
        )
    return int(changed[0])


def _frame(domain):
    M = domain.manifold
    return M, domain.center, domain.radius


def _point(domain, coords):
    """Points ``exp_{m0}`` of chart coordinates ``(..., dim)`` at the public centre."""
    M, m0, _ = _frame(domain)
    return M.validate(M.exp_coords(m0, np.asarray(coords, float)))


def boundary_pair(domain, n: int, direction=None) -> NeighbourPair:
    """All ``n`` records on the boundary at ``direction``; one moved to the opposite side.

    ``direction`` is a vector of chart coordinates at the centre (default: the first
    frame vector). This is the configuration behind both papers' sensitivity bounds.
    """
    n = check_positive_int(n, "n")
    M, _, r = _frame(domain)
    u = np.zeros(M.dim) if direction is None else np.asarray(direction, float)
    if direction is None:
        u[0] = 1.0
    if u.shape != (M.dim,) or not np.linalg.norm(u) > 0:
        raise ValueError(f"direction must be a non-zero vector of {M.dim} chart coordinates")
    u = u / np.linalg.norm(u)
    b = r * _INSIDE * u
    data = np.repeat(_point(domain, b)[None], n, axis=0)
    neighbour = data.copy()
    neighbour[0] = _point(domain, -b)
    return NeighbourPair("boundary: all at u, one moved to -u", data, neighbour, 0)


def neighbour_pairs(
    domain, n: int, *, directions: int | None = None, random_pairs: int = 8, random_seed=0
) -> list[NeighbourPair]:
    """Candidate neighbouring pairs that try to maximize the privacy loss.

    For each of ``directions`` unit chart directions ``u`` at the centre (the frame
    vectors first, then random ones; default: all ``dim`` frame vectors), with
    ``r`` the public radius:

    - all records on the boundary at ``r u``, one moved to ``-r u``;
    - ``n - 1`` records clustered (spread ``r/20``) at ``s r u`` for
      ``s in {-1, -1/2, 0, 1/2, 1}``, one outlier moved from ``r w`` to ``-r w``,
      ``w`` in ``{u, u_perp}``;
    - records on the boundary circle through ``u`` (evenly spread), one moved to the
      opposite side;

    then ``random_pairs`` pairs with records uniform in the normal-coordinate ball
    and a random record moved to a random point (half of them onto the boundary).
    Deterministic for a fixed ``random_seed``.
    """
    n = check_positive_int(n, "n")
    M, _, r = _frame(domain)
    d = M.dim
    rng = np.random.default_rng(random_seed)
    ndir = d if directions is None else check_positive_int(directions, "directions")
    dirs = [np.eye(d)[i] for i in range(min(ndir, d))]
    while len(dirs) < ndir:
        v = rng.normal(size=d)
        dirs.append(v / np.linalg.norm(v))
    rb = r * _INSIDE
    pairs: list[NeighbourPair] = []

    def add(label, coords, new_coords, index=0):
        data = _point(domain, coords)
        neighbour = data.copy()
        neighbour[index] = _point(domain, new_coords)
        pairs.append(NeighbourPair(label, data, neighbour, index))

    for j, u in enumerate(dirs):
        tag = f"u{j}"
        bp = boundary_pair(domain, n, u)
        pairs.append(replace(bp, label=f"boundary ({tag}): all at u, one moved to -u"))
        perp = _perpendicular(u, rng)
        for s in (-1.0, -0.5, 0.0, 0.5, 1.0):
            jitter = rng.normal(size=(n, d)) * (r / 20.0)
            cluster = s * rb * u + jitter
            # keep the cluster inside the ball (normal coordinates: radius = distance)
            norms = np.linalg.norm(cluster, axis=-1, keepdims=True)
            cluster = np.where(norms > rb, cluster * (rb / np.maximum(norms, 1e-300)), cluster)
            for wname, w in (("u", u), ("u_perp", perp)):
                if w is None:
                    continue
                coords = cluster.copy()
                coords[0] = rb * w
                add(
                    f"cluster at {s:+.1f} r ({tag}), outlier moved {wname} -> -{wname}",
                    coords,
                    -rb * w,
                )
        if d >= 2 and perp is not None and n >= 2:
            ang = 2.0 * np.pi * np.arange(n) / n
            ring = rb * (np.cos(ang)[:, None] * u + np.sin(ang)[:, None] * perp)
            add(f"boundary circle ({tag}), one moved across", ring, -ring[0])
    for k in range(random_pairs):
        c = rng.normal(size=(n, d))
        c *= (r * rng.uniform(size=(n, 1)) ** (1.0 / d)) / np.linalg.norm(c, axis=-1)[:, None]
        i = int(rng.integers(n))
        new = rng.normal(size=d)
        new *= (rb if k % 2 else r * rng.uniform()) / np.linalg.norm(new)
        add(f"random #{k}", c, new, index=i)
    return pairs


def _perpendicular(u, rng):
    if len(u) < 2:
        return None
    v = rng.normal(size=len(u))
    v -= (v @ u) * u
    return v / np.linalg.norm(v)


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
        verdict = "PASSED" if self.passed else "FAILED"
        return (
            f"quadrature audit of {self.mechanism} on {self.manifold}, n = {self.n}: "
            f"eps = {self.epsilon:g}, worst sup|log f_D - log f_D'| = "
            f"{self.worst_log_ratio:.4g} ± {self.grid_error:.2g} (quadrature), "
            f"ratio to eps {self.ratio:.3f}; worst of {self.pairs_tried} pairs: "
            f"'{self.pair.label}' (record {self.pair.index}); grid "
            f"{'x'.join(map(str, self.resolution))}: {verdict}"
        )


def _as_pairs(manifold, pairs):
    if isinstance(pairs, NeighbourPair):
        pairs = [pairs]
    elif (
        isinstance(pairs, tuple)
        and len(pairs) == 2
        and not isinstance(pairs[0], tuple | NeighbourPair)
    ):
        pairs = [pairs]
    out = []
    for k, p in enumerate(pairs):
        if isinstance(p, NeighbourPair):
            data, neighbour, label = p.data, p.neighbour, p.label
        else:
            try:
                data, neighbour = p
            except (TypeError, ValueError):
                raise TypeError(
                    "pairs must be NeighbourPair objects or (data, neighbour) tuples"
                ) from None
            label = f"pair #{k}"
        index = check_neighbours(manifold, data, neighbour)
        out.append(NeighbourPair(label, np.asarray(data), np.asarray(neighbour), index))
    if not out:
        raise ValueError("no neighbouring pairs to audit")
    return out


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


def _check_epsilon(mech, epsilon):
    return check_positive_real(mech.epsilon if epsilon is None else epsilon, "epsilon")


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
    >>> mech = pmd.LaplaceMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                             radius=np.pi / 8)
    >>> p = boundary_pair(mech.domain, 10)
    >>> loss, err, _ = audit_pair(mech, p.data, p.neighbour, resolution=100)
    >>> bool(loss < mech.epsilon)
    True
    """
    M = mech.manifold
    pair = _as_pairs(M, (data, neighbour))[0]
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
        Fine grid, see :func:`polar_grid`.
    t_max : float, optional
        Radius of the integration ball at the centre. Default: the public radius for
        restricted laws, the injectivity radius (the whole space) on spheres and
        Kendall shape spaces otherwise.
    refine : int
        Number of pairs recomputed on the fine grid.

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        Dimension above 3, non-neighbouring pairs, bad ``epsilon``/``t_max``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                         radius=np.pi / 8)
    >>> res = quadrature_audit(mech, boundary_pair(mech.domain, 10), resolution=40)
    >>> res.passed, round(res.ratio, 2)
    (True, 0.68)
    """
    M = mech.manifold
    eps = _check_epsilon(mech, epsilon)
    if M.dim > 3:
        polar_grid(M, mech.domain.center, 1.0, 4)  # raises the dimension error
    if pairs is None:
        pairs = neighbour_pairs(mech.domain, n, random_seed=random_seed)
    pairs = _as_pairs(M, pairs)
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


# --- the black-box sample test -----------------------------------------------------------------
def clopper_pearson(k, n, alpha):
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` for ``k`` successes in ``n``.

    Each bound holds with probability at least ``1 - alpha``.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 10, 0.05)
    >>> float(lo), round(float(hi), 4)  # 1 - 0.05**(1/10)
    (0.0, 0.2589)
    """
    k, n = np.asarray(k, float), np.asarray(n, float)
    lo = np.where(k > 0, stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)
    hi = np.where(k < n, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


def histogram_epsilon_lb(stat_data, stat_neighbour, edges, *, alpha):
    r"""Certified lower bound on the privacy loss from binned scalar samples.

    With ``p_B, q_B`` the bin probabilities under ``M(D)`` and ``M(D')`` and
    Clopper–Pearson bounds each at level ``alpha``,

    .. math:: \varepsilon_{lb} = \max\Big(0, \max_B \log\frac{p_{lo}(B)}{q_{hi}(B)},
              \max_B \log\frac{q_{lo}(B)}{p_{hi}(B)}\Big).

    The caller splits its total error budget over the ``4 * bins`` bounds.
    ``edges`` are interior bin edges (the outer bins are open). Returns
    ``(eps_lb, bin, direction, counts_data, counts_neighbour)``.
    """
    edges = np.asarray(edges, float)
    a = np.bincount(np.searchsorted(edges, stat_data), minlength=len(edges) + 1)
    b = np.bincount(np.searchsorted(edges, stat_neighbour), minlength=len(edges) + 1)
    pa_lo, pa_hi = clopper_pearson(a, len(stat_data), alpha)
    pb_lo, pb_hi = clopper_pearson(b, len(stat_neighbour), alpha)
    with np.errstate(divide="ignore"):
        fwd = np.log(pa_lo) - np.log(pb_hi)
        bwd = np.log(pb_lo) - np.log(pa_hi)
    i, j = int(np.argmax(fwd)), int(np.argmax(bwd))
    if max(fwd[i], bwd[j]) <= 0:
        return 0.0, -1, "", a, b
    if fwd[i] >= bwd[j]:
        return float(fwd[i]), i, "D over D'", a, b
    return float(bwd[j]), j, "D' over D", a, b


def distance_statistic(manifold, point) -> Callable:
    """``x -> rho(point, x)``: geodesic distance to a fixed point."""
    point = manifold.validate(point)
    return lambda x: manifold.dist(point, x)


def tangent_statistic(manifold, base, direction) -> Callable:
    """``x -> <log_base(x), u>`` with ``u`` the unit tangent ``direction`` at ``base``."""
    base = manifold.validate(base)
    u = manifold.to_tangent(base, np.asarray(direction, float))
    nu = manifold.norm(base, u)
    if not nu > 0:
        raise ValueError("direction must be a non-zero tangent vector at base")
    u = u / nu
    return lambda x: manifold.inner(base, manifold.log(base, x), u)


@dataclass(frozen=True, eq=False)
class SampleTestResult:
    """Figures of a black-box histogram test.

    Attributes
    ----------
    epsilon : float
    epsilon_lb : float
        Lower bound on the privacy loss holding with probability ``confidence``.
    confidence : float
    size : int
        Draws from each of ``M(D)`` and ``M(D')`` (pilot draws for the bins extra).
    bins : int
    statistic : str
        The scalar post-processing that gave ``epsilon_lb``.
    bin_range : tuple of float
        The worst bin ``[lo, hi)`` of that statistic.
    direction : str
    counts : tuple of int
        Counts of the worst bin under ``D`` and ``D'``.
    passed : bool
        ``epsilon_lb <= epsilon``.
    all_lb : dict
        ``epsilon_lb`` of every statistic.
    """

    epsilon: float
    epsilon_lb: float
    confidence: float
    size: int
    bins: int
    statistic: str
    bin_range: tuple
    direction: str
    counts: tuple
    passed: bool
    all_lb: dict = field(default_factory=dict, repr=False)

    def summary(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED (privacy violation certified)"
        where = (
            f"; worst bin [{self.bin_range[0]:.4g}, {self.bin_range[1]:.4g}) of "
            f"'{self.statistic}', {self.direction}, counts {self.counts[0]} vs {self.counts[1]}"
            if self.statistic
            else ""
        )
        return (
            f"histogram sample test: eps = {self.epsilon:g}, certified lower bound eps_lb = "
            f"{self.epsilon_lb:.4g} at {100 * self.confidence:g}% confidence "
            f"({self.size} draws per dataset, {self.bins} bins){where}: {verdict}"
        )


def _default_sampler(mech):
    if not callable(getattr(mech, "sample", None)):
        raise ValueError(
            f"{getattr(mech, 'name', type(mech).__name__)} has no exact sample(data, size, "
            "random_seed=...) method: pass sample=callable(data, size, rng)"
        )
    return lambda data, size, rng: mech.sample(data, size, random_seed=rng)


def _default_statistics(M, m0, pair):
    a, b = pair.data[pair.index], pair.neighbour[pair.index]
    stats_ = {
        "distance to the moved record's new value": distance_statistic(M, b),
        "distance to the moved record's old value": distance_statistic(M, a),
    }
    w = M.log(m0, b) - M.log(m0, a)
    if M.norm(m0, M.to_tangent(m0, w)) > 0:
        stats_["tangent coordinate at m0 along the move"] = tangent_statistic(M, m0, w)
    return stats_


def sample_test(
    mech,
    data,
    neighbour,
    *,
    sample=None,
    statistics=None,
    size: int = 200_000,
    bins: int | Iterable = 20,
    confidence: float = 0.99,
    epsilon=None,
    random_seed=None,
) -> SampleTestResult:
    """Black-box histogram test of ``P(M(D) in B) <= e^eps P(M(D') in B)`` on bins ``B``.

    Parameters
    ----------
    mech : mechanism object
        Provides ``manifold``, ``domain`` and ``epsilon`` (and ``sample`` for the
        default sampler).
    data, neighbour : arrays ``(n, *point_shape)``
        Neighbouring datasets (choose worst cases: :func:`boundary_pair`).
    sample : callable ``(data, size, rng) -> (size, *point_shape)``, optional
        An exact sampler of the mechanism. Default ``mech.sample(data, size,
        random_seed=rng)``.
    statistics : dict of name -> callable, optional
        Scalar post-processings ``(size, *point_shape) -> (size,)``. Default: the
        distances to the changed record's old and new values and the tangent
        coordinate at the centre along the change.
    size : int
        Draws from each dataset. A separate pilot of ``max(size // 10, 1000)`` draws
        from each sets the bin edges (pooled quantiles), so the edges are independent
        of the counts the bounds use.
    bins : int or array
        Number of bins (``>= 2``) or increasing interior edges (used for every
        statistic).
    confidence : float
        In ``(0, 1)``; the bounds are Bonferroni-split over ``4 * bins`` bounds per
        statistic.
    epsilon : float, optional
        Budget to test (default ``mech.epsilon``).
    random_seed : int or Generator, optional

    Returns
    -------
    SampleTestResult

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.LaplaceMechanism(pmd.Sphere(dim=2), epsilon=1.0, center=[0, 0, 1.0],
    ...                             radius=np.pi / 8)
    >>> p = boundary_pair(mech.domain, 10)
    >>> res = sample_test(mech, p.data, p.neighbour, size=20_000, random_seed=0)
    >>> res.passed, bool(0 < res.epsilon_lb < 1)
    (True, True)
    """
    M = mech.manifold
    eps = _check_epsilon(mech, epsilon)
    size = check_positive_int(size, "size", minimum=10)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise TypeError("confidence must be a real number")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    fixed_edges = None
    if isinstance(bins, bool):
        raise TypeError("bins must be an int or an array of bin edges")
    if isinstance(bins, numbers.Integral):
        nbins = check_positive_int(bins, "bins", minimum=2)
    else:
        try:
            fixed_edges = np.asarray(bins, float)
        except (TypeError, ValueError):
            raise TypeError("bins must be an int or an array of bin edges") from None
        if (
            fixed_edges.ndim != 1
            or len(fixed_edges) < 1
            or not np.all(np.isfinite(fixed_edges))
            or np.any(np.diff(fixed_edges) <= 0)
        ):
            raise ValueError("bin edges must be a non-empty, finite, increasing 1-d array")
        nbins = len(fixed_edges) + 1
    pair = _as_pairs(M, (data, neighbour))[0]
    sample = _default_sampler(mech) if sample is None else sample
    if not callable(sample):
        raise TypeError("sample must be a callable (data, size, rng) -> points")
    if statistics is None:
        statistics = _default_statistics(M, mech.domain.center, pair)
    if not statistics:
        raise ValueError("statistics must name at least one scalar post-processing")
    rng = random_seed if isinstance(random_seed, np.random.Generator) else None
    rng = rng or np.random.default_rng(random_seed)

    def draw(d, k):
        x = np.asarray(sample(d, k, rng), float)
        if x.shape != (k, *M.point_shape):
            raise ValueError(f"sample returned shape {x.shape}, expected {(k, *M.point_shape)}")
        return x

    xp, xq = draw(pair.data, size), draw(pair.neighbour, size)
    pilot = max(size // 10, 1000)
    pp, pq = (
        (draw(pair.data, pilot), draw(pair.neighbour, pilot))
        if fixed_edges is None
        else (
            None,
            None,
        )
    )
    alpha = (1.0 - confidence) / (4.0 * nbins * len(statistics))
    best, all_lb = None, {}
    for name, f in statistics.items():
        sp, sq = np.asarray(f(xp), float), np.asarray(f(xq), float)
        if fixed_edges is None:
            pooled = np.concatenate([f(pp), f(pq)])
            edges = np.unique(np.quantile(pooled, np.arange(1, nbins) / nbins))
        else:
            edges = fixed_edges
        lb, i, direction, ca, cb = histogram_epsilon_lb(sp, sq, edges, alpha=alpha)
        all_lb[name] = lb
        if best is None or lb > best[0]:
            lo = -np.inf if i <= 0 else edges[i - 1]
            hi = np.inf if i < 0 or i >= len(edges) else edges[i]
            counts = (int(ca[i]), int(cb[i])) if i >= 0 else (0, 0)
            best = (lb, name if i >= 0 else "", (float(lo), float(hi)), direction, counts)
    lb, name, rng_bin, direction, counts = best
    return SampleTestResult(
        epsilon=eps,
        epsilon_lb=lb,
        confidence=float(confidence),
        size=size,
        bins=nbins,
        statistic=name,
        bin_range=rng_bin,
        direction=direction,
        counts=counts,
        passed=bool(lb <= eps),
        all_lb=all_lb,
    )
