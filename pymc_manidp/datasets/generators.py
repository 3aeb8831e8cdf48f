r"""Synthetic data of the 2021 supplement (§1.2.1, §1.3.1), inside a public ball.

- :func:`wishart_in_ball`: SPD matrices drawn from a Wishart law :math:`W(V, df)` and
  kept only if :math:`\rho(X, I) < r` (rejection; supplement §1.2.1 with ``r = 1.5``,
  ``df = 2``, ``V = I/k``).
- :func:`sphere_cap`: points on the sphere whose polar angle about the center is
  uniform on ``[0, r]`` and whose azimuth is uniform (supplement §1.3.1 with
  ``r = pi/8`` around the north pole). This is *not* the uniform law on the cap: the
  points concentrate towards the center.
- :func:`uniform_radius_ball`: the same construction on any manifold (geodesic distance
  uniform on ``[0, r]``, direction uniform in the tangent space), e.g. Kendall shapes.

All return NumPy arrays of shape ``(n, *manifold.point_shape)`` and accept
``random_seed`` (int, ``numpy.random.Generator`` or ``None`` for OS entropy).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.geometry.base import Manifold
from pymc_manidp.geometry.spd import SPD
from pymc_manidp.geometry.sphere import Sphere
from pymc_manidp.rng import as_generator

__all__ = ["as_generator", "sphere_cap", "uniform_radius_ball", "wishart_in_ball"]


def wishart_in_ball(
    n: int,
    *,
    k: int = 2,
    df: float = 2.0,
    scale=None,
    radius: float = 1.5,
    random_seed=None,
    max_draws: int = 1_000_000,
) -> np.ndarray:
    r"""SPD samples from a Wishart law kept inside the geodesic ball ``B_r(I)``.

    Draw :math:`X \sim W(V, df)` (density w.r.t. Lebesgue measure on SPD(k))

    .. math:: p(X) \propto |X|^{(df-k-1)/2} \exp\{-\tfrac12 \operatorname{tr}(V^{-1}X)\},
              \qquad E X = df\, V,

    and keep ``X`` iff :math:`\rho(X, I) < r` under the affine-invariant metric, until
    ``n`` are kept (2021 supplement §1.2.1; its text first sets ``df = k`` and then
    ``df = 2`` for the simulations: the same for ``k = 2``).

    Parameters
    ----------
    n : int
        Number of samples.
    k : int
        Matrix size.
    df : float
        Degrees of freedom, ``> k - 1``.
    scale : array ``(k, k)``, optional
        Wishart scale ``V``; default ``I/k``.
    radius : float
        Geodesic radius ``r`` of the ball around the identity.
    random_seed : int, Generator or None
        ``None`` draws from OS entropy; an int or a Generator makes the draw reproducible.
    max_draws : int
        Give up (``RuntimeError``) after this many Wishart draws.

    Returns
    -------
    ndarray, shape ``(n, k, k)``
        The kept samples, in the order drawn.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> x = wishart_in_ball(5, random_seed=0)
    >>> x.shape, bool((pmd.SPD(k=2).dist(np.eye(2), x) < 1.5).all())
    ((5, 2, 2), True)
    """
    n = check_positive_int(n, "n")
    k = check_positive_int(k, "k")
    df = check_positive_real(df, "df")
    if df <= k - 1:
        raise ValueError(f"df must be > k - 1 = {k - 1} for a Wishart law on SPD({k}), got {df}")
    radius = check_positive_real(radius, "radius")
    V = np.eye(k) / k if scale is None else SPD(k=k).validate(scale)
    rng = as_generator(random_seed)
    chol = linalg.cholesky(V, lower=True)
    P, eye = SPD(k=k), np.eye(k)
    kept, drawn = [], 0
    while sum(len(a) for a in kept) < n:
        if drawn >= max_draws:
            raise RuntimeError(
                f"only {sum(len(a) for a in kept)} of {n} Wishart draws fell in B_{radius}(I) "
                f"after {drawn} draws: enlarge the radius or change scale/df"
            )
        m = max(64, 2 * n)
        x = _wishart_rvs(m, k, df, chol, rng)
        drawn += m
        x = 0.5 * (x + np.swapaxes(x, -1, -2))
        kept.append(x[P.dist(eye, x) < radius])
    return np.concatenate(kept)[:n]


def _wishart_rvs(m: int, k: int, df: float, chol, rng) -> np.ndarray:
    """``m`` draws ``(m, k, k)`` of :math:`W(V, df)`, ``chol`` the lower Cholesky factor of ``V``.

    Bartlett's construction ``C A Aᵀ Cᵀ`` exactly as ``scipy.stats.wishart.rvs`` draws
    it (the same calls of ``rng``, in the same order, so the same matrices bit for
    bit: ``tests/datasets/test_datasets.py``), with the products batched: scipy forms
    them in a Python loop over the ``m`` draws, most of the experiments' data time on
    SPD (issue 26).
    """
    n_tril = k * (k - 1) // 2
    off = rng.normal(size=m * n_tril).reshape(m, n_tril)
    diag = np.r_[[rng.chisquare(df - (i + 1) + 1, size=m) ** 0.5 for i in range(k)]]
    a = np.zeros((m, k, k))
    a[(slice(None), *np.tril_indices(k, -1))] = off
    a[(slice(None), *np.diag_indices(k))] = diag.reshape(k, m).T
    ca = chol @ a
    return ca @ np.swapaxes(ca, -1, -2)


def uniform_radius_ball(manifold, n: int, *, center, radius: float, random_seed=None) -> np.ndarray:
    r"""Draw points ``exp_c(t u)``: ``t`` uniform on ``[0, r]``, ``u`` a uniform unit direction.

    ``u`` is uniform on the unit sphere of the tangent space at ``center`` (chart
    coordinates in an orthonormal frame), so the geodesic distance to the center is
    uniform on ``[0, r]``: the law of the 2021 supplement's sphere data, on any manifold.

    Parameters
    ----------
    manifold : Manifold
        The space.
    n : int
        Number of points.
    center : array, shape ``point_shape``
        The center ``c`` of the ball, a point of ``manifold``.
    radius : float
        ``r``, below the injectivity radius (so ``t`` is the distance to the center).
    random_seed : int, Generator or None
        ``None`` draws from OS entropy; an int or a Generator makes the draw reproducible.

    Returns
    -------
    ndarray, shape ``(n, *manifold.point_shape)``
        The points, each at geodesic distance ``t <= r`` from ``center``.

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> K = pmd.KendallShape(k_landmarks=5)
    >>> m0 = K.validate(np.array([[1.0, 0], [0.3, 1], [-1, 0.4], [-0.6, -1], [0.5, -0.8]]))
    >>> x = uniform_radius_ball(K, 10, center=m0, radius=0.3, random_seed=1)
    >>> bool((K.dist(m0, x) <= 0.3 + 1e-12).all())
    True
    """
    n = check_positive_int(n, "n")
    radius = check_positive_real(radius, "radius")
    if radius >= manifold.injectivity_radius:
        raise ValueError(
            f"radius must be below the injectivity radius {manifold.injectivity_radius:.6g}"
        )
    c = manifold.validate(center)
    rng = as_generator(random_seed)
    u = rng.standard_normal((n, manifold.dim))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    t = rng.uniform(0.0, radius, size=(n, 1))
    return manifold.validate(manifold.exp_coords(c, t * u))


def sphere_cap(
    n: int, *, radius: float = np.pi / 8, center=None, sphere=None, random_seed=None
) -> np.ndarray:
    r"""Sphere data of the 2021 supplement §1.3.1: polar angle uniform on ``[0, r]``.

    With ``theta ~ U[0, r]`` and azimuth ``phi ~ U[0, 2 pi)`` about the center
    (default the north pole ``(0, ..., 0, 1)``):

    .. math:: x = (\sin\theta\cos\phi,\ \sin\theta\sin\phi,\ \cos\theta)
              \quad (S^2,\ \text{north pole}).

    In other dimensions the azimuth is a uniform direction of the tangent space; on a
    sphere of radius ``R`` the geodesic distance is uniform on ``[0, r]``.

    Parameters
    ----------
    n : int
        Number of points.
    radius : float
        ``r`` (geodesic), default ``pi/8``.
    center : array ``(d+1,)``, optional
        Center of the cap, default the north pole.
    sphere : Sphere, optional
        Default the unit ``S^2``.
    random_seed : int, Generator or None
        ``None`` draws from OS entropy; an int or a Generator makes the draw reproducible.

    Returns
    -------
    ndarray, shape ``(n, d+1)``
        Points of the sphere within geodesic distance ``r`` of the center.

    Examples
    --------
    >>> x = sphere_cap(4, random_seed=0)
    >>> x.shape, bool(np.allclose(np.linalg.norm(x, axis=1), 1.0))
    ((4, 3), True)
    >>> bool((np.arccos(x[:, 2]) <= np.pi / 8).all())
    True
    """
    S = Sphere(dim=2) if sphere is None else sphere
    # what a cap asks of the manifold: points in R^(d+1) and a radius (the north pole)
    if not (
        isinstance(S, Manifold)
        and tuple(S.point_shape) == (S.dim + 1,)
        and getattr(S, "radius", None) is not None
    ):
        raise TypeError(
            f"sphere must be a Sphere (a manifold of points in R^(d+1) with a radius), "
            f"got {type(S).__name__}"
        )
    if center is None:
        center = np.zeros(S.dim + 1)
        center[-1] = S.radius
    return uniform_radius_ball(S, n, center=center, radius=radius, random_seed=random_seed)
