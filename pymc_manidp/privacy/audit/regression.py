r"""The quadrature audit of private geodesic regression: the privacy loss on ``TM``.

The regression KNG law (docs/regression.md) has density
:math:`f(p, v \mid D) = e^{-g_D(p, v)/\sigma}/Z_D` on the public domain
:math:`\Theta = \{\rho(m, p) \le R,\ \lVert v\rVert_p \le V\}` with respect to the Sasaki
measure, :math:`g_D = \lVert(\nabla_pE, \nabla_vE)\rVert`. For two data sets that differ
in one response (the covariates are public and shared) the privacy loss is

.. math:: L(D, D') = \sup_{\Theta}\Big|\frac{g_{D'} - g_D}{\sigma}
          + \log\frac{Z_{D'}}{Z_D}\Big|,

both normalizers integrated over the same grid of :math:`\Theta`: footpoints on the
polar midpoint rule of :func:`~pymc_manidp.privacy.audit.polar_grid` in normal
coordinates at ``m`` (radius ``R``, the volume factor included), slopes on the same rule
in the ``V``-ball of an orthonormal frame of :math:`T_pM` (Lebesgue measure on the
fibre). ``TM`` has dimension ``2d``: 2 on ``Sphere(dim=1)``, 4 on ``S^2``.

Why the neighbours matter. The density term is at most :math:`\Delta/\sigma =
\varepsilon/2`; the other half of ε is the ratio of normalizers, which is large only when
a law is cut by the domain's edge: its mode (the least-squares fit) on the boundary of
``Theta`` for one data set and moved inwards by the neighbour (the one-dimensional picture:
a Laplace on ``[0, inf)`` centred at 0 against one centred at ``Delta`` has loss
``Delta/sigma + log(2 - exp(-Delta/sigma))``). ``regression_pairs`` builds such pairs:
responses on a geodesic whose footpoint and slope sit at the domain's edges, the record
of largest leverage (``x = +-X``) moved across the data ball.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.geometry.euclidean import Euclidean
from pymc_manidp.geometry.sphere import is_round_sphere
from pymc_manidp.privacy.audit import _cost
from pymc_manidp.privacy.audit.neighbours import NeighbourPair, audited_epsilon
from pymc_manidp.privacy.audit.quadrature import _coarse, log_privacy_loss, polar_grid
from pymc_manidp.stats.regression import check_covariates, geodesic_regression

__all__ = ["RegressionAuditResult", "regression_audit", "regression_pairs"]

#: nodes x records x coordinates per chunk of the batched gradient
_CHUNK_ELEMENTS = 2**20


@dataclass(frozen=True)
class RegressionAuditResult:
    """Figures of a regression audit (as :class:`~pymc_manidp.privacy.AuditResult`).

    Attributes
    ----------
    mechanism, manifold : str
    epsilon : float
        The claimed budget.
    n : int
    worst_log_ratio : float
        The largest privacy loss found (fine grid).
    ratio : float
        ``worst_log_ratio / epsilon``.
    grid_error : float
        ``|L_fine - L_coarse|`` for the worst pair.
    resolution : tuple of int
        Fine node counts: the footpoint axes, then the slope axes.
    pair : NeighbourPair
        The worst pair (responses; the covariates are shared).
    pairs_tried : int
    passed : bool
        ``worst_log_ratio + grid_error <= epsilon``.
    losses : tuple of (label, coarse loss)
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
    pairs_tried: int
    passed: bool
    losses: tuple = field(default=(), repr=False)


def _resolution(resolution, d):
    if isinstance(resolution, (int, np.integer)) and not isinstance(resolution, bool):
        k = check_positive_int(resolution, "resolution", minimum=4)
        return (k,) * (2 * d)
    if isinstance(resolution, (str, bytes)) or not hasattr(resolution, "__iter__"):
        raise TypeError(
            f"resolution must be an int >= 4 or a tuple of {2 * d} ints >= 4 (footpoint "
            f"axes, then slope axes), got {resolution!r}"
        )
    counts = tuple(check_positive_int(c, "resolution", minimum=4) for c in resolution)
    if len(counts) != 2 * d:
        raise ValueError(
            f"resolution must give {2 * d} node counts (footpoint axes, then slope axes) "
            f"for TM of dimension {2 * d}, got {len(counts)}"
        )
    return counts


def _check_grid_size(M, counts, max_bytes=None) -> None:
    """Refuse (ValueError) a fine grid that would not fit in memory, before any grid:
    its footpoints and slopes (``point_shape`` floats each per node), weights and about
    four arrays of densities per node."""
    p = math.prod(M.point_shape)
    limit = _cost.memory_limit(max_bytes)
    nbytes = _cost.nbytes_of(8, math.prod(counts), 2 * p + 5)
    if nbytes > limit:
        k = len(counts)
        top = _cost.largest(lambda c: _cost.nbytes_of(8, c**k, 2 * p + 5) <= limit, 4, max(counts))
        _cost.refuse(
            f"the regression audit's grid ({' x '.join(map(str, counts))} nodes)",
            nbytes,
            None,
            limit,
            _cost.time_limit(),
            f"choose resolution <= {top}",
        )


def _half(counts, d):
    """Half the nodes on every axis (the error estimate), kept at 2 or more."""
    return _coarse(counts[:d]) + _coarse(counts[d:])


def _footpoint_radius(mech) -> float:
    if mech.footpoint_radius is None:
        raise ValueError(
            "the regression audit integrates over a compact domain: give the mechanism a "
            "footpoint_radius"
        )
    return float(mech.footpoint_radius)


def tm_grid(mech, counts):
    """The product rule on the domain: ``(footpoints, slopes, log_weights)``.

    Footpoints on the polar rule of radius ``R`` at the center (volume factor included),
    slopes on the polar rule of radius ``V`` in ``R^d`` mapped into ``T_pM`` by the
    manifold's orthonormal frame (``from_coords``).
    """
    M, d = mech.manifold, mech.manifold.dim
    R = _footpoint_radius(mech)
    P, lwp = polar_grid(M, mech.domain.center, R, counts[:d])
    C, lwv = polar_grid(Euclidean(dim=d), np.zeros(d), mech.slope_bound, counts[d:])
    mp, mv = len(P), len(C)
    Pn = np.repeat(P, mv, axis=0)
    Vn = M.from_coords(Pn, np.tile(C, (mp, 1)))
    lw = (lwp[:, None] + lwv[None, :]).ravel()
    return Pn, Vn, lw


def sphere_grad_norms(M, P, Vs, x, y):
    r"""``|(grad_p E, grad_v E)|`` at many ``(p, v)`` on a sphere, vectorized over nodes.

    Written again from Theorem 1 of docs/regression.md (constant curvature
    :math:`1/R^2`: factor 1 along the prediction, :math:`\cos t` and
    :math:`\sin t/t` across, ``t = x|v|/R``), independently of
    :mod:`pymc_manidp.geometry.jacobi`; the audit checks it against the mechanism's own
    ``logp`` at sampled nodes.
    """
    Rs = float(M.radius)
    nv = np.sqrt(np.sum(Vs * Vs, axis=-1))  # (m,)
    u = Vs / np.where(nv > 0, nv, 1.0)[:, None]
    t = x[None, :] * nv[:, None] / Rs  # (m, n)
    ct, st = np.cos(t), np.sin(t)
    yhat = ct[..., None] * P[:, None] + Rs * st[..., None] * u[:, None]
    c = np.clip(np.sum(yhat * y[None], axis=-1) / Rs**2, -1.0, 1.0)
    w = y[None] - c[..., None] * yhat
    nw = np.sqrt(np.sum(w * w, axis=-1))
    ang = np.arctan2(nw / Rs, c)
    eps = (Rs * ang / np.where(nw > 0, nw, 1.0))[..., None] * w
    vel = -st[..., None] * P[:, None] / Rs + ct[..., None] * u[:, None]
    a = np.sum(eps * vel, axis=-1)
    w = eps - a[..., None] * vel
    safe = np.where(np.abs(t) < 1e-8, 1.0, t)
    sinc = np.where(np.abs(t) < 1e-8, 1.0 - t * t / 6.0, np.sin(safe) / safe)
    along = a[..., None] * u[:, None]
    gp = -np.mean(along + ct[..., None] * w, axis=1)
    gv = -np.mean(x[None, :, None] * (along + sinc[..., None] * w), axis=1)
    return np.sqrt(np.sum(gp * gp, axis=-1) + np.sum(gv * gv, axis=-1))


def _grad_norms(mech, P, Vs, x, y):
    """The gradient norm at every node: batched on spheres, else the mechanism's own."""
    M = mech.manifold
    if is_round_sphere(M):
        step = max(1, _CHUNK_ELEMENTS // (len(x) * P.shape[-1]))
        return np.concatenate(
            [
                sphere_grad_norms(M, P[i : i + step], Vs[i : i + step], x, y)
                for i in range(0, len(P), step)
            ]
        )
    return np.array([mech.grad_norm(p, v, x, y) for p, v in zip(P, Vs, strict=True)])


def _check_against_mechanism(mech, P, Vs, x, y, g, sigma, rng):
    """The audit's density must be the mechanism's: ``logp`` at 8 random nodes."""
    for j in rng.choice(len(P), size=min(8, len(P)), replace=False):
        want = float(mech.logp(np.stack([P[j], Vs[j]]), x, y))
        got = -float(g[j]) / sigma
        if not math.isclose(want, got, rel_tol=1e-7, abs_tol=1e-9):
            raise AssertionError(
                f"the audit's gradient norm disagrees with {mech.name}.logp at a node "
                f"({got!r} against {want!r}): the audit would not audit this mechanism"
            )


def _fit_probes(mech, x, ys):
    """The least-squares fits (the laws' modes, where the density has a kink), if inside
    the domain: ``(footpoints, slopes)``."""
    M = mech.manifold
    ps, vs = [], []
    for y in ys:
        fit = geodesic_regression(M, x, y)
        p, v = fit.footpoint, fit.slope
        if fit.converged and mech.in_domain(p, v):
            ps.append(p)
            vs.append(v)
    if not ps:
        shape = (0, *M.point_shape)
        return np.empty(shape), np.empty(shape)
    return np.stack(ps), np.stack(vs)


def _pair_loss(mech, x, pair, grid, sigma, rng):
    P, Vs, lw = grid
    a = _grad_norms(mech, P, Vs, x, pair.data)
    b = _grad_norms(mech, P, Vs, x, pair.neighbour)
    _check_against_mechanism(mech, P, Vs, x, pair.data, a, sigma, rng)
    qp, qv = _fit_probes(mech, x, (pair.data, pair.neighbour))
    probes = None
    if len(qp):
        probes = (
            -_grad_norms(mech, qp, qv, x, pair.data) / sigma,
            -_grad_norms(mech, qp, qv, x, pair.neighbour) / sigma,
        )
    loss, _ = log_privacy_loss(-a / sigma, -b / sigma, lw, probes)
    return float(loss)


def regression_pairs(mech, x, *, random_pairs: int = 2, random_seed=0):
    """Adversarial neighbouring response sets for a regression mechanism.

    For every footpoint ``p0`` (the center, and ``R`` from it along each axis of the
    frame at the center) and slope ``v0`` (zero, and ``V`` along each axis), the
    responses lie on the geodesic ``Exp_p0(x_i v0)`` (moved onto the data ball if they
    leave it), so that the fit sits at the domain's edge; the record of largest
    ``|x_i|`` is put on the ball's edge along an axis in one set and on the opposite
    edge in the other. Plus ``random_pairs`` pairs of uniform random responses in the
    ball with one record replaced.

    Returns
    -------
    list of NeighbourPair
    """
    M, dom = mech.manifold, mech.domain
    d, m, r = M.dim, dom.center, dom.radius
    R, V = _footpoint_radius(mech), mech.slope_bound
    x = np.asarray(x, float)
    k = int(np.argmax(np.abs(x)))
    eye = np.eye(d)
    # footpoints at the domain's edge R and at the data ball's edge r: the fit of
    # responses on the ball's edge lies beyond R when R < r
    feet = [("p0 = m", m)] + [
        (f"p0 = m {'+-'[s < 0]} {t:g} e{j}", M.exp_coords(m, s * t * eye[j][None])[0])
        for t in sorted({R, r})
        for j in range(d)
        for s in (1.0, -1.0)
    ]
    pairs = []
    for fname, p0 in feet:
        slopes = [("v0 = 0", np.zeros(d))] + [
            (f"v0 = {'+-'[s < 0]}V e{j}", s * V * eye[j]) for j in range(d) for s in (1.0, -1.0)
        ]
        for vname, c in slopes:
            v0 = M.from_coords(p0[None], c[None])[0]
            y = M.exp(np.broadcast_to(p0, (len(x), *p0.shape)), x[:, None] * v0[None])
            y = M.validate(y)
            far = dom.distances(y) > r
            if np.any(far):
                y[far] = M.exp_coords(
                    np.broadcast_to(m, (int(far.sum()), *m.shape)),
                    M.log_coords(m, y[far]) * (r / dom.distances(y[far]))[:, None],
                )
            for j in range(d):
                a, b = y.copy(), y.copy()
                a[k] = M.exp_coords(m, r * eye[j][None])[0]
                b[k] = M.exp_coords(m, -r * eye[j][None])[0]
                pairs.append(NeighbourPair(f"{fname}, {vname}, y[{k}] on +-e{j}", a, b, k))
    rng = np.random.default_rng(random_seed)
    for i in range(random_pairs):
        c = rng.standard_normal((len(x) + 1, d))
        c *= (r * rng.uniform(size=(len(x) + 1, 1)) ** (1 / d)) / np.linalg.norm(
            c, axis=1, keepdims=True
        )
        pts = M.exp_coords(np.broadcast_to(m, (len(x) + 1, *m.shape)), c)
        a, b = pts[:-1].copy(), pts[:-1].copy()
        b[k] = pts[-1]
        pairs.append(NeighbourPair(f"random {i}", a, b, k))
    # points placed on the ball's edge by exp_coords may exceed r by an ulp: clipped
    # record by record, so the pairs still differ in record k only
    return [
        NeighbourPair(p.label, dom.check(p.data, clip=True), dom.check(p.neighbour, clip=True), k)
        for p in pairs
    ]


def regression_audit(
    mech,
    x,
    pairs=None,
    *,
    epsilon=None,
    resolution=16,
    refine: int = 2,
    random_seed=0,
    max_bytes=None,
) -> RegressionAuditResult:
    """Quadrature audit of a regression KNG mechanism on its domain in ``TM``.

    Every pair's loss is computed on the coarse grid (half the nodes per axis), the
    ``refine`` worst again on the fine one; the verdict uses the worst fine loss plus its
    change from the coarse grid. The audit's density is checked against the
    mechanism's ``logp`` at sampled nodes (so it audits the mechanism's law, with the
    mechanism's ``sigma(n)``).

    Parameters
    ----------
    mech : RegressionKNGMechanism
        With a ``footpoint_radius`` (a compact domain); ``manifold.dim`` 1 or 2 (``TM``
        of dimension 2 or 4).
    x : array_like, shape ``(n,)``
        The public covariates, shared by every pair.
    pairs : iterable of NeighbourPair or (y, y'), optional
        Default ``regression_pairs(mech, x)``.
    epsilon : float, optional
        The budget audited against (default ``mech.epsilon``).
    resolution : int or tuple of int
        Fine node counts per axis (footpoint axes, then slope axes; each ``>= 4``).
    refine : int
        How many of the worst pairs on the coarse grid are computed again on the fine
        one (default 2).
    random_seed : int
        For the random pairs and the sampled nodes of the cross-check.
    max_bytes : float, optional
        Memory the fine grid may take (default half of this machine's); a larger grid
        is refused before it is built, naming the largest resolution that fits.

    Returns
    -------
    RegressionAuditResult
        The worst loss found (fine grid), its grid error, the worst pair, the verdict
        against ``epsilon`` and every pair's coarse loss.

    Examples
    --------
    >>> import numpy as np, pymc_manidp as pmd
    >>> S1 = pmd.Sphere(dim=1)
    >>> mech = pmd.RegressionKNGMechanism(S1, epsilon=2.0, center=[1.0, 0.0], radius=0.3,
    ...     covariate_bound=1.0, slope_bound=0.1, footpoint_radius=0.1)
    >>> res = regression_audit(mech, np.linspace(-1, 1, 5), resolution=40)
    >>> res.passed
    True
    """
    # duck-typed (this layer does not import the mechanisms): what the audit calls
    needs = ("manifold", "domain", "covariate_bound", "slope_bound", "footpoint_radius")
    needs += ("sigma", "grad_norm", "logp", "in_domain", "name")
    if any(not hasattr(mech, a) for a in needs):
        raise TypeError(
            "regression_audit needs a regression mechanism (pmd.RegressionKNGMechanism), "
            f"got {type(mech).__name__}"
        )
    M = mech.manifold
    if M.dim > 2:
        raise ValueError(
            f"the regression audit needs a manifold of dimension 1 or 2 (TM of dimension "
            f"2 or 4); {M} has dimension {M.dim}: the grid would need N^{2 * M.dim} nodes"
        )
    eps = audited_epsilon(mech, epsilon)
    _footpoint_radius(mech)
    refine = check_positive_int(refine, "refine")
    x = check_covariates(x, bound=mech.covariate_bound)
    n = len(x)
    sigma = check_positive_real(mech.sigma(n), "sigma")
    fine = _resolution(resolution, M.dim)
    coarse = _half(fine, M.dim)
    _check_grid_size(M, fine, max_bytes)
    if pairs is None:
        pairs = regression_pairs(mech, x, random_seed=random_seed)
    pairs = [
        p
        if isinstance(p, NeighbourPair)
        else NeighbourPair("given", *(mech.domain.check(q) for q in p), -1)
        for p in pairs
    ]
    rng = np.random.default_rng(random_seed)
    grid = tm_grid(mech, coarse)
    coarse_loss = [_pair_loss(mech, x, p, grid, sigma, rng) for p in pairs]
    grid = tm_grid(mech, fine)
    best = None
    for i in np.argsort(coarse_loss)[::-1][:refine]:
        loss = _pair_loss(mech, x, pairs[i], grid, sigma, rng)
        if best is None or loss > best[0]:
            best = (loss, int(i))
    loss, i = best
    err = abs(loss - coarse_loss[i])
    return RegressionAuditResult(
        mechanism=getattr(mech, "name", type(mech).__name__),
        manifold=repr(M),
        epsilon=eps,
        n=n,
        worst_log_ratio=loss,
        ratio=loss / eps,
        grid_error=err,
        resolution=fine,
        pair=pairs[i],
        pairs_tried=len(pairs),
        passed=bool(loss + err <= eps),
        losses=tuple((p.label, c) for p, c in zip(pairs, coarse_loss, strict=True)),
    )
