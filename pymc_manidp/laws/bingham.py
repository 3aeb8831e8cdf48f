r"""The Bingham law on the sphere (axial data), and what the matrix Fisher law shares with it.

The Bingham law on :math:`S^{p-1} \subset \mathbb R^p` has density
:math:`\propto e^{x^\top A x}` with respect to the surface measure; ``x`` and ``-x`` have
the same density (axes, not directions). Its normalizer is a confluent hypergeometric
function of matrix argument, :math:`{}_1F_1(\tfrac12; \tfrac p2; A)` times the sphere's
area; here it is

- ``p = 2`` (the circle): closed form, :math:`2\pi e^{(a_1+a_2)/2} I_0((a_1-a_2)/2)`;
- ``p = 3`` and ``p = 4``: a one-dimensional integral of Bessel functions (cylindrical
  coordinates on ``S²``, Hopf coordinates on ``S³``), by a fixed Gauss–Legendre rule on a
  mesh graded towards the ends (exact to about ``1e-13``, relative, checked against mpmath);
- ``p >= 5``: the third-order **saddle-point approximation** of Kume & Wood (2005), not
  exact: against Monte Carlo its error in ``log Z`` was up to 0.06 for ``p = 5`` and
  0.015 for ``p = 8`` (up to 0.06 at ``p = 3, 4`` against the exact value), largest
  for eigenvalue spreads of 1 to 10.

Draws are exact, for every ``p``, by the angular-central-Gaussian envelope of Kent,
Ganeiber & Mardia (2018). The matrix Fisher law on SO(3) is a Bingham law on ``S³``
(``laws/matrix_fisher.py``) and uses the same normalizer and sampler.
"""

from __future__ import annotations

import itertools
import numbers

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Continuous, _support_point
from pymc.distributions.transforms import _default_transform
from pymc.logprob.abstract import _logprob
from pymc.pytensorf import normalize_rng_param
from pytensor.tensor.random.op import RandomVariable

from pymc_manidp.geometry.sphere import Sphere
from pymc_manidp.laws.charts import NormalizedGaussian
from pymc_manidp.laws.directional import _is_constant, _numeric

__all__ = ["Bingham", "BinghamRV", "bingham_log_normalizer", "sample_bingham"]

#: the largest spread ``max(eig A) - min(eig A)`` accepted: the graded quadrature
#: resolves boundary layers of width ``2^-55 ~ 3e-17``; ``1e12`` keeps a wide margin
MAX_SPREAD = 1e12

#: how far from symmetric a constant ``A`` may be (relative to its largest entry)
SYM_TOL = 1e-10

_LOG_AREA = {2: np.log(2 * np.pi), 3: np.log(4 * np.pi), 4: np.log(2 * np.pi**2)}


def _graded_rule(levels: int = 55, order: int = 12):
    """Nodes ``s``, complements ``1 - s`` (each accurate) and weights of a rule on [0, 1].

    Gauss–Legendre of ``order`` on the intervals ``[2^-(k+1), 2^-k]`` (and ``[0,
    2^-levels]``), mirrored at ``1/2``: every interval is half as wide as its distance to
    the end, so a boundary layer ``e^{-λs}`` or ``I_0(bs)e^{-bs}`` of any width above
    ``2^-levels`` meets an interval on which it is smooth (``λ·width <= ~3`` where it
    matters).
    """
    x, w = np.polynomial.legendre.leggauss(order)
    edges = [0.0] + [2.0**-k for k in range(levels, 0, -1)]
    s = np.concatenate([lo + (hi - lo) * (x + 1) / 2 for lo, hi in itertools.pairwise(edges)])
    ws = np.concatenate([w * (hi - lo) / 2 for lo, hi in itertools.pairwise(edges)])
    return np.concatenate([s, 1 - s]), np.concatenate([1 - s, s]), np.concatenate([ws, ws])


_NODE, _COMP, _WEIGHT = _graded_rule()

#: SciPy's ``ive`` is NaN from about ``x = 1.1e9``; past ``1e8`` Hankel's expansion
#: :math:`I_0(x)e^{-x} = (2\pi x)^{-1/2}(1 + 1/(8x) + 9/(2(8x)^2) + 225/(6(8x)^3))`
#: is exact to rounding (its next term is below ``1e-34``)
_HUGE = 1e8


def _ive0(x):
    """``I_0(x) e^{-x}`` for ``x >= 0``, finite for every finite ``x``, with the gradient of
    ``I_0(x) e^{-x}`` (``-1`` at 0: PyTensor's ``ive`` is ``I_0(x) e^{-|x|}``, whose
    gradient at 0 is not that one-sided derivative, and ``x = 0`` is every tie of
    eigenvalues, as ``F = κ R0``)."""
    tiny = x < 1.0
    huge = x > _HUGE
    mid = pt.switch(tiny | huge, 2.0, x)
    low = pt.switch(tiny, x, 0.0)
    big = pt.switch(huge, x, _HUGE)
    inv = 1 / (8 * big)
    hankel = (1 + inv * (1 + inv * (4.5 + inv * 37.5))) / pt.sqrt(2 * np.pi * big)
    return pt.switch(tiny, pt.i0(low) * pt.exp(-low), pt.switch(huge, hankel, pt.ive(0, mid)))


def _sorted_eigenvalues(a):
    """Ascending eigenvalues of symmetric ``a`` ``(..., p, p)``, with the gradient
    :math:`\\sum_i g_i v_i v_i^\\top`: ``Eigvalsh``'s, finite at a repeated eigenvalue (as
    in ``F = κ R0``, where a symmetric function of them is smooth), unlike ``Eigh``'s.

    Not Rayleigh quotients of ``disconnected_grad`` eigenvectors: PyMC's ``dlogp`` and
    nutpie rewrite the graph ("canonicalize") before the gradient, which removes
    ``disconnected_grad``, so the gradient went through ``Eigh`` and was NaN there (NUTS
    diverged at every step; ``tests/laws/test_matrix_fisher.py``)."""
    a = pt.as_tensor_variable(a)
    return pt.linalg.eigvalsh((a + pt.swapaxes(a, -1, -2)) / 2)


def _scaled_log_normalizer(eig, p: int):
    """``log Z(A) - max eig A`` from ascending eigenvalues ``eig`` ``(..., p)``."""
    if p == 2:
        a2, a1 = eig[..., 0], eig[..., 1]
        return _LOG_AREA[2] + pt.log(_ive0((a1 - a2) / 2))
    if p == 3:
        # x3 = u, (x1, x2) on the circle of radius sqrt(1 - u²): dσ = du dφ, and
        # ∫ exp((1-u²)(a1 cos²φ + a2 sin²φ)) dφ = 2π exp((1-u²) a1) ive(0, (1-u²)(a1-a2)/2)
        a3, a2, a1 = eig[..., 0, None], eig[..., 1, None], eig[..., 2, None]
        u, one_minus_u = _NODE, _COMP
        one_minus_u2 = one_minus_u * (1 + u)
        f = pt.exp(-(a1 - a3) * u**2) * _ive0(one_minus_u2 * (a1 - a2) / 2)
        return _LOG_AREA[3] + pt.log(pt.sum(f * _WEIGHT, axis=-1))
    if p == 4:
        # Hopf coordinates q = (cos α u, sin α v), u, v on circles, dσ = cos α sin α dα du dv;
        # s = sin²α: Z = 2π² ∫ exp(b1 - (b1-b3)s) ive(0, (1-s)(b1-b2)/2) ive(0, s(b3-b4)/2) ds
        b4, b3, b2, b1 = (eig[..., k, None] for k in range(4))
        s, one_minus_s = _NODE, _COMP
        f = pt.exp(-(b1 - b3) * s) * _ive0(one_minus_s * (b1 - b2) / 2) * _ive0(s * (b3 - b4) / 2)
        return _LOG_AREA[4] + pt.log(pt.sum(f * _WEIGHT, axis=-1))
    return _saddle_point(eig, p) - eig[..., -1]


#: Newton steps for the saddle point; from the left of the root (where the convex,
#: decreasing equation is >= 0) Newton rises monotonically, at least doubling its
#: distance to the largest eigenvalue per step (from 1/2 to the root, at most p/2) until
#: it is quadratic: 30 steps suffice for p <= 10^6
_NEWTON_STEPS = 30


def _saddle_point(eig, p: int):
    r"""Kume & Wood's (2005) third-order saddle-point approximation of ``log Z(A)``.

    ``Z(A) = 2π^{p/2} f_R(1) / Π λ_i^{1/2}`` with ``f_R`` the density of
    :math:`R = \sum_i \lambda_i^{-1}\chi^2_1/2`, ``λ = -eig`` shifted positive (``Z`` and
    the approximation are both equivariant under ``A -> A + cI``); ``f_R(1)`` by the
    saddle point of its cumulant generating function ``K(t) = -½ Σ log(1 - t/λ_i)``,
    corrected by ``exp(ρ₄/8 - 5ρ₃²/24)``. Written with ``w_i = s - a_i > 0``, ``s``
    solving ``Σ 1/(2w_i) = 1``.
    """
    a_max = eig[..., -1:]
    x = pt.ones_like(a_max) / 2  # s = a_max + 1/2: left of the root
    for _ in range(_NEWTON_STEPS):
        w = x + a_max - eig
        g = pt.sum(1 / (2 * w), axis=-1, keepdims=True) - 1
        dg = -pt.sum(1 / (2 * w**2), axis=-1, keepdims=True)
        x = x - g / dg
    w = x + a_max - eig
    k2 = pt.sum(w**-2, axis=-1) / 2
    k3 = pt.sum(w**-3, axis=-1)
    k4 = 3 * pt.sum(w**-4, axis=-1)
    correction = k4 / k2**2 / 8 - 5 * k3**2 / k2**3 / 24
    s = x[..., 0] + a_max[..., 0]
    return (
        np.log(2.0)
        + (p / 2) * np.log(np.pi)
        - 0.5 * pt.sum(pt.log(w), axis=-1)
        - 0.5 * pt.log(2 * np.pi * k2)
        + s
        + correction
    )


def bingham_log_normalizer(A):
    r"""``log Z(A)``, the log normalizer of the Bingham law on ``S^{p-1}``, as a tensor.

    .. math:: Z(A) = \int_{S^{p-1}} e^{x^\top A x}\, dx,

    ``dx`` the surface measure (the Riemannian volume of ``Sphere(dim=p-1)``), so
    ``Z(0)`` is the sphere's area. Exact (to about ``1e-13``) for ``p = 2`` (closed form),
    ``p = 3`` and ``p = 4`` (a one-dimensional integral of exponentially scaled Bessel
    functions, no overflow for eigenvalue spreads up to ``1e12``), with a gradient in
    ``A``; for ``p >= 5`` the third-order saddle-point approximation of Kume & Wood
    (2005), **not exact** (its error in ``log Z`` measured up to 0.06 at ``p = 5``,
    0.015 at ``p = 8``).

    Parameters
    ----------
    A : array or tensor, shape ``(..., p, p)``
        Symmetric matrices (only the symmetric part counts), ``p`` known.

    Returns
    -------
    TensorVariable
        ``log Z(A)``, shape ``(...)``.

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.isclose(bingham_log_normalizer(np.zeros((3, 3))).eval(), np.log(4 * np.pi)))
    True
    >>> a = np.diag([0.0, 0.0, -2.0])  # on S²: 4π ∫_0^1 exp(-2u²) du
    >>> from scipy.special import erf
    >>> ref = np.log(4 * np.pi * np.sqrt(np.pi / 8) * erf(np.sqrt(2)))
    >>> bool(np.isclose(bingham_log_normalizer(a).eval(), ref, rtol=1e-13))
    True
    """
    A = pt.as_tensor_variable(A, dtype="floatX")
    p = A.type.shape[-1]
    if p is None:
        raise ValueError("bingham_log_normalizer needs A's size p known (a constant shape)")
    eig = _sorted_eigenvalues(A)
    return _scaled_log_normalizer(eig, p) + eig[..., -1]


# --- the exact sampler ------------------------------------------------------------------
def _acg_b(lam):
    """``b`` in ``[1, p]`` solving ``Σ 1/(b + 2λ_i) = 1`` (Kent et al. 2018), by
    bisection (the sum decreases in ``b``; 1 is left of the root as ``min λ = 0``)."""
    p = lam.shape[-1]
    lo = np.ones(lam.shape[:-1])
    hi = np.full(lam.shape[:-1], float(p))
    for _ in range(60):
        mid = (lo + hi) / 2
        above = np.sum(1 / (mid[..., None] + 2 * lam), axis=-1) > 1
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return (lo + hi) / 2


def sample_bingham(A, size=None, rng=None):
    r"""Exact draws of the Bingham law :math:`\propto e^{x^\top A x}` on ``S^{p-1}``.

    The rejection sampler of Kent, Ganeiber & Mardia (2018): with ``λ = max eig A -
    eig A >= 0`` (the same law), propose ``x = y/|y|``, ``y ~ N(0, Ω^{-1})``,
    :math:`\Omega = I + 2\Lambda/b` (the angular central Gaussian law), ``b`` solving
    :math:`\sum_i 1/(b + 2\lambda_i) = 1`, and accept with probability
    :math:`e^{-t}(1 + 2t/b)^{p/2} / M`, ``t = xᵀΛx``,
    :math:`M = e^{-(p-b)/2}(p/b)^{p/2}` (the ratio's maximum, at ``t = (p-b)/2``).
    Vectorized over a batch of ``A``; the acceptance rate is bounded below for every
    concentration (Kent et al. 2018, about 0.5 or more for ``p <= 4``).

    Parameters
    ----------
    A : array, shape ``(..., p, p)``
        Symmetric matrices (the symmetric part is used).
    size : tuple of int, optional
        The batch shape of the draws (default: ``A``'s batch shape).
    rng : numpy.random.Generator, optional
        The source of randomness (``None``: fresh OS entropy).

    Returns
    -------
    ndarray, shape ``(*size, p)``
        Unit vectors (the sign of each is uniform: the law is axial).

    Examples
    --------
    >>> import numpy as np
    >>> x = sample_bingham(np.diag([0.0, 0.0, 20.0]), (1000,), np.random.default_rng(0))
    >>> x.shape, bool(np.mean(x[:, 2] ** 2) > 0.9)
    ((1000, 3), True)
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    A = np.asarray(A, float)
    p = A.shape[-1]
    batch = A.shape[:-2] if size is None else tuple(size)
    A = np.broadcast_to((A + np.swapaxes(A, -1, -2)) / 2, (*batch, p, p)).reshape(-1, p, p)
    eig, vecs = np.linalg.eigh(A)
    lam = eig[:, -1:] - eig  # >= 0, the last one exactly 0
    b = _acg_b(lam)
    omega_sd = np.sqrt(1 + 2 * lam / b[:, None])
    log_m = -(p - b) / 2 + (p / 2) * np.log(p / b)
    m = A.shape[0]
    out = np.empty((m, p))
    todo = np.arange(m)
    while todo.size:
        y = rng.standard_normal((todo.size, p)) / omega_sd[todo]
        x = y / np.linalg.norm(y, axis=-1, keepdims=True)
        t = np.sum(lam[todo] * x**2, axis=-1)
        bb = b[todo]
        log_ratio = -t + (p / 2) * np.log1p(2 * t / bb) - log_m[todo]
        ok = np.log(rng.random(todo.size)) <= log_ratio
        out[todo[ok]] = x[ok]
        todo = todo[~ok]
    out = np.einsum("mij,mj->mi", vecs, out)
    out /= np.linalg.norm(out, axis=-1, keepdims=True)
    return out.reshape((*batch, p))


# --- the PyMC distribution --------------------------------------------------------------
def check_symmetric_matrix(a, name: str, what: str):
    """A constant square matrix parameter as a float array, or the error that says why not.

    ``what`` names the matrices for the messages (``"A"``, ``"F"``). Square, real,
    finite, symmetric (to ``SYM_TOL`` relative) when ``name == "A"``, and its spread not
    past ``MAX_SPREAD``.
    """
    if a is None:
        raise TypeError(f"{name} must be an array of real numbers ({what}), got None")
    try:
        raw = np.asarray(a)
    except Exception:  # ragged: _numeric's TypeError below
        raw = None
    if raw is not None and raw.dtype == object and raw.size:
        flat = raw.ravel().tolist()
        if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in flat):
            try:  # Python ints past 1e308: a value too large, not a wrong type
                raw.astype(float)
            except OverflowError as err:
                raise ValueError(f"{name} is too large for a float ({what})") from err
            a = raw.astype(float)
    arr = _numeric(a, name)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2] or arr.shape[-1] < 2:
        raise ValueError(
            f"{name} must have shape (..., p, p) with p >= 2 ({what}), got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite everywhere, got a NaN or an infinity in {what}")
    return arr


def _check_a(A):
    if not _is_constant(A):
        A = pt.as_tensor_variable(A)
        if A.ndim < 2:
            raise ValueError(f"A must have shape (..., p, p) with p >= 2, got a {A.ndim}-d tensor")
        p = A.type.shape[-1]
        if p is None or A.type.shape[-2] not in (None, p) or p < 2:
            raise ValueError(
                f"A must have shape (..., p, p) with p >= 2 known when the model is built "
                f"(a constant, or pm.Data with a fixed shape), got {A.type.shape}"
            )
        return A
    arr = check_symmetric_matrix(A, "A", "a symmetric matrix")
    scale = max(1.0, float(np.max(np.abs(arr), initial=0.0)))
    if scale > MAX_SPREAD / 2:
        raise ValueError(
            f"A's entries may be at most {MAX_SPREAD / 2:g} in size (its eigenvalues may spread "
            f"at most {MAX_SPREAD:g}), got {scale:g}: the law is then a point mass on an axis "
            f"to rounding; scale A down"
        )
    asym = float(np.max(np.abs(arr - np.swapaxes(arr, -1, -2))))
    if asym > SYM_TOL * scale:
        raise ValueError(
            f"A must be symmetric (|A - A^T| <= {SYM_TOL:g} max|A|): it is off by {asym!r}; "
            f"only x^T A x counts, so pass (A + A.T) / 2"
        )
    eig = np.linalg.eigvalsh((arr + np.swapaxes(arr, -1, -2)) / 2)
    spread = float(np.max(eig[..., -1] - eig[..., 0]))
    if spread > MAX_SPREAD:
        raise ValueError(
            f"A's eigenvalues may spread at most {MAX_SPREAD:g} (max - min), got {spread:g}: "
            f"the law is then a point mass on an axis to rounding; scale A down"
        )
    return pt.as_tensor_variable((arr + np.swapaxes(arr, -1, -2)) / 2)


class BinghamRV(RandomVariable):
    """``A -> x`` on ``S^{p-1}``; draws: :func:`sample_bingham` (Kent et al. 2018)."""

    name = "Bingham"
    signature = "(p,p)->(p)"
    dtype = "floatX"
    _print_name = ("Bingham", r"\operatorname{Bingham}")
    #: NumPy draws in PyTensor's NUMBA backend (object mode, silenced in distributions.py)
    python_draws = True

    def rng_fn(self, rng, A, size):
        return sample_bingham(A, size, rng)


bingham = BinghamRV()


class Bingham(Continuous):
    r"""The Bingham law of axes on the unit sphere :math:`S^{p-1} \subset \mathbb R^p`.

    .. math:: f(x) = e^{x^\top A x} / Z(A), \qquad
              Z(A) = \int_{S^{p-1}} e^{x^\top A x}\,dx

    with respect to the surface measure of :math:`S^{p-1}` (the Riemannian volume of
    ``Sphere(dim=p-1)``, as :class:`~pymc_manidp.laws.VonMisesFisher`), ``A`` symmetric.
    ``x`` and ``-x`` have the same density (axial data); ``A`` and ``A + cI`` give the
    same law. ``A = 0`` is the uniform law.

    The normalizer (:func:`bingham_log_normalizer`) is exact for ``p = 2`` (closed
    form), ``p = 3`` and ``p = 4`` (a one-dimensional quadrature, to about ``1e-13``);
    for ``p >= 5`` it is the third-order saddle-point approximation of Kume & Wood
    (2005), **not exact**: ``pm.logp`` is then off by up to about 0.06 (``p = 5``;
    0.015 at ``p = 8``), a constant in ``x``, so a fit with a constant ``A`` is
    unaffected; with a random ``A`` the posterior of ``A`` carries that error. Draws
    are exact for every ``p`` (:func:`sample_bingham`).

    ``A`` may be a constant (checked now: shape ``(..., p, p)``, finite, symmetric,
    eigenvalue spread at most ``1e12``), ``pm.Data`` or a random variable (its symmetric
    part is used; finiteness is checked in the graph). A latent ``Bingham`` is sampled in
    the :class:`~pymc_manidp.laws.charts.NormalizedGaussian` chart of the sphere (its
    posterior is symmetric under ``x -> -x``; both modes are the same axis).

    Parameters
    ----------
    name : str
        The variable's name in the model (not an argument of ``.dist``).
    A : array or tensor, shape ``(..., p, p)``
        A symmetric matrix, ``p >= 2``.
    **kwargs
        ``size``, ``shape``, ``dims``, ``observed`` ... as for any PyMC distribution.

    References
    ----------
    Bingham, C. (1974), An antipodally symmetric distribution on the sphere, *Annals of
    Statistics* 2(6), 1201–1225. Kent, J. T., Ganeiber, A. M. & Mardia, K. V. (2018), A
    new unified approach for the simulation of a wide class of directional
    distributions, *Journal of Computational and Graphical Statistics* 27(2), 291–301.
    Kume, A. & Wood, A. T. A. (2005), Saddlepoint approximations for the Bingham and
    Fisher–Bingham normalising constants, *Biometrika* 92(2), 465–476.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> A = np.diag([0.0, 0.0, 5.0])
    >>> pm.draw(Bingham.dist(A, size=4), random_seed=1).shape
    (4, 3)
    >>> lp = pm.logp(Bingham.dist(np.zeros((3, 3))), [1.0, 0.0, 0.0]).eval()
    >>> bool(np.isclose(lp, -np.log(4 * np.pi)))
    True
    """

    rv_type = BinghamRV

    @classmethod
    def rv_op(cls, A, *, size=None, rng=None):
        rng = normalize_rng_param(rng)
        _, rv = bingham(A, size=size, rng=rng, return_next_rng=True)
        return rv

    def __new__(cls, name, A, **kwargs):
        # the signature the docstring documents (as the package's other laws do)
        return super().__new__(cls, name, A, **kwargs)

    @classmethod
    def dist(cls, A, **kwargs):
        return super().dist([_check_a(A)], **kwargs)


def bingham_logp(value, A):
    """``xᵀAx - log Z(A)``, written ``-xᵀ(a_max I - A)x - (log Z - a_max)`` for unit ``x``:
    no two terms of the size of ``A`` that cancel."""
    p = A.type.shape[-1]
    sym = (A + pt.swapaxes(A, -1, -2)) / 2
    eig = _sorted_eigenvalues(sym)
    quad = pt.sum(value * pt.sum(sym * value[..., None, :], axis=-1), axis=-1)
    return quad - eig[..., -1] - _scaled_log_normalizer(eig, p)


@_logprob.register(BinghamRV)
def _bingham_logprob(op, values, rng, size, A, **kwargs):
    (value,) = values
    return check_parameters(
        bingham_logp(value, A),
        pt.all(pt.isfinite(A), axis=(-2, -1)),
        msg="A finite",
    )


@_support_point.register(BinghamRV)
def _bingham_support_point(op, rv, rng, size, A):
    # a mode: the eigenvector of A's largest eigenvalue (either sign)
    _, vecs = pt.linalg.eigh((A + pt.swapaxes(A, -1, -2)) / 2)
    return pt.broadcast_to(vecs[..., :, -1], rv.shape)


@_default_transform.register(BinghamRV)
def _bingham_transform(op, rv):
    p = rv.type.shape[-1]
    if p is None:
        raise ValueError("a latent Bingham needs A's size p known when the model is built")
    return NormalizedGaussian(Sphere(dim=p - 1))
