r"""Directional laws as PyMC distributions: the von Mises–Fisher law on the sphere.

The law is written the way PyMC writes its own: a
:class:`~pytensor.tensor.random.op.RandomVariable` whose ``rng_fn`` is an exact
sampler (Wood 1994), a ``_logprob`` with the normalizer included (so ``kappa`` and
``mu`` may be random variables), a support point and a default transform
(:class:`~pymc_manidp.laws.charts.NormalizedGaussian`: a chart of the whole sphere that
needs no center, so ``mu`` may itself be random).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Continuous, _support_point
from pymc.distributions.transforms import _default_transform
from pymc.logprob.abstract import _logprob
from pymc.pytensorf import normalize_rng_param
from pytensor.compile.builders import OpFromGraph
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Constant, Variable
from pytensor.tensor.random.op import RandomVariable

from pymc_manidp._validation import check_nonnegative_real
from pymc_manidp.geometry.sphere import Sphere
from pymc_manidp.laws.charts import NormalizedGaussian

__all__ = ["VonMisesFisher", "VonMisesFisherRV", "sample_vmf", "vmf_log_normalizer"]

#: how far ``|mu|`` may be from 1 (relative): the tolerance of ``Sphere.validate``
MU_TOL = 1e-6

#: terms of the power series of ``I_nu`` used below ``kappa = 2 sqrt(nu + 1)``: each term
#: is at most ``1/k!`` there, so the tail after 25 terms is below ``1e-25`` (relative)
_SERIES_TERMS = 25

#: above this ``κ`` SciPy's ``ive`` is NaN (from about 1.1e9); Hankel's asymptotic
#: expansion with 6 terms is exact to rounding there for ``p <= 1000``
#: (its k-th term is at most ``(p²/(8κ))^k / k!``)
_HUGE = 1e8
_HANKEL_TERMS = 6

#: the gradient uses Hankel's expansion from ``κ = _HANKEL_SLOPE (ν² + 1)`` on (see
#: ``_mean_resultant_length``)
_HANKEL_SLOPE = 1000.0


def vmf_log_normalizer(p, kappa):
    r"""``log Z(κ)``, the log of the von Mises–Fisher normalizer on ``S^{p-1}``, as a tensor.

    .. math:: Z(\kappa) = \int_{S^{p-1}} e^{\kappa\mu^\top x}\,dx
              = \frac{(2\pi)^{p/2} I_\nu(\kappa)}{\kappa^{\nu}},
              \qquad \nu = p/2 - 1,

    ``dx`` the surface measure (the Riemannian volume of ``Sphere(dim=p-1)``), so
    ``Z(0)`` is the sphere's area :math:`2\pi^{p/2}/\Gamma(p/2)`. Computed two ways,
    each where it is accurate: for ``κ <= 2 sqrt(ν+1)`` by the power series
    :math:`I_\nu(\kappa) = (\kappa/2)^\nu/\Gamma(\nu+1)\,\sum_k (\kappa^2/4)^k /
    (k!\,(\nu+1)_k)` (its ``(κ/2)^ν`` cancels ``κ^ν``, so ``κ = 0`` is exact and
    ``I_ν`` never underflows); above, by the exponentially scaled Bessel function
    ``ive`` (:math:`\log I_\nu = \log \mathrm{ive} + \kappa`); beyond
    ``κ = 1e8`` (where SciPy's ``ive`` turns NaN at about ``1.1e9``) by Hankel's
    asymptotic expansion of ``ive``. Checked against mpmath to ``1e-12`` (relative)
    for ``κ`` in ``[0, 1e6]`` and ``p - 1`` in ``{1, 2, 3, 10, 100}``
    (``tests/laws/test_vmf.py``). Its gradient in ``κ`` is written out, not derived by
    PyTensor: :math:`d\log Z/d\kappa = I_{\nu+1}(\kappa)/I_\nu(\kappa)`, the mean
    resultant length, by the same three branches (each fed only the ``κ`` it is valid
    for, so no branch's gradient is NaN); the reasons are in ``_normalizer_op``.

    Parameters
    ----------
    p : int or tensor
        The ambient dimension ``p >= 2`` (the sphere ``S^{p-1}``, ``Sphere(dim=p-1)``).
    kappa : float or tensor, shape ``(...)``
        The concentration ``κ >= 0``.

    Returns
    -------
    TensorVariable
        ``log Z(κ)``, shape ``(...)``.

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.isclose(vmf_log_normalizer(3, 0.0).eval(), np.log(4 * np.pi), rtol=1e-15))
    True
    >>> k = 2.5  # on S^2: Z = 4π sinh(κ)/κ
    >>> bool(np.isclose(vmf_log_normalizer(3, k).eval(), np.log(4 * np.pi * np.sinh(k) / k)))
    True
    """
    return _normalizers(p, kappa)[1]


def _scaled_log_normalizer(p, kappa):
    """``log Z(κ) - κ``: the form the density uses (no ``κ`` to cancel at ``κ = 1e300``)."""
    return _normalizers(p, kappa)[0]


def _normalizers(p, kappa):
    """``(log Z(κ) - κ, log Z(κ))`` with their written-out gradients in ``κ``."""
    kappa = pt.as_tensor_variable(kappa, dtype="floatX")
    nu = pt.as_tensor_variable(p, dtype="floatX") / 2 - 1
    if nu.ndim != 0:  # a batch of dimensions: the same values, PyTensor's own gradient
        scaled = _scaled_graph(nu, kappa)
        return scaled, scaled + kappa
    # the Op keeps kappa's length-1 axes: PyTensor then sums a broadcast gradient over
    # them (an Op typed (None,) for a kappa of shape (1,) got a gradient of the batch's shape)
    broadcast = tuple(s == 1 for s in kappa.type.shape)
    return _normalizer_op(broadcast, kappa.dtype)(nu, kappa)


@functools.cache
def _normalizer_op(broadcast: tuple, dtype: str) -> OpFromGraph:
    """The two normalizers as one inlined Op whose pullback is written out.

    PyTensor's derivative of the 25-term Horner series is a chain of products that its
    rewrites (``local_greedy_distributor``) took 29 CPU-s to simplify with ``p``
    symbolic and 7 s for a vector of ``κ`` at ``p = 3``, against 1.1 and 0.9 s now
    (``docs/benchmarks.md``, "The default test tier's cost"). The derivative is known in
    closed form, ``A(κ) = I_{ν+1}(κ)/I_ν(κ)``, and each branch has an expression for it
    as cheap as its value's. Written out it is also more accurate: ``log Z`` at small
    ``κ`` is ``(log Z - κ) + κ``, and the derivative of that sum, ``(A - 1) + 1``, lost
    ``A``'s digits below ``1e-16`` (``A = 3.3e-9`` at ``κ = 1e-8`` came out ``6e-9``
    wrong, relative, with strict floats). The values are the graph's as before (the
    Op is inlined); the derivative is first order only, as NUTS needs (a second
    derivative differentiates the pullback's graph, which is correct but not cheap).
    """
    nu = pt.scalar("nu", dtype=dtype)
    kappa = pt.tensor("kappa", dtype=dtype, shape=tuple(1 if b else None for b in broadcast))
    scaled = _scaled_graph(nu, kappa)

    def pullback(inputs, outputs, output_grads):
        nu, kappa = inputs
        a, a_minus_1 = _mean_resultant_length(nu, kappa)
        g_scaled, g_log_z = output_grads
        grad = 0
        if not isinstance(g_scaled.type, DisconnectedType):
            grad = grad + g_scaled * a_minus_1
        if not isinstance(g_log_z.type, DisconnectedType):
            grad = grad + g_log_z * a
        # nu comes from p, an integer (a shape): it has no gradient
        return [disconnected_type(), pt.as_tensor_variable(grad, dtype=dtype)]

    return OpFromGraph(
        [nu, kappa],
        [scaled, scaled + kappa],
        pullback=pullback,
        connection_pattern=[[False, False], [True, True]],
        name="vmf_log_normalizer",
        inline=True,
    )


def _branches(nu, kappa):
    """Each branch's own ``κ`` (the others get a value where they are finite)."""
    edge = 2 * pt.sqrt(nu + 1)
    series = kappa <= edge
    huge = kappa > _HUGE
    k_series = pt.switch(series, kappa, 0.0)
    k_ive = pt.switch(series | huge, 2 * edge, kappa)
    k_huge = pt.switch(huge, kappa, 2 * _HUGE)
    return series, huge, k_series, k_ive, k_huge


def _series_sum(nu, x):
    """``Σ_k x^k / (k! (ν+1)_k)`` by Horner: ``1 + x/(1(ν+1)) (1 + x/(2(ν+2)) (1 + ...))``."""
    acc = pt.ones_like(x)
    for k in range(_SERIES_TERMS, 1, -1):
        acc = 1 + x / (k * (nu + k)) * acc
    return x / (nu + 1) * acc  # the sum minus its first term (for log1p)


def _hankel_coefficients(nu, inv):
    """Hankel's terms ``(-1)^k a_k / κ^k``, ``k = 1..6``, ``inv = 1/κ``."""
    mu4 = 4 * nu**2
    term = pt.ones_like(inv)
    terms = []
    for k in range(1, _HANKEL_TERMS + 1):
        term = -term * (mu4 - (2 * k - 1) ** 2) * inv / (8 * k)
        terms.append(term)
    return terms


def _scaled_graph(nu, kappa):
    series, huge, k_series, k_ive, k_huge = _branches(nu, kappa)
    x = k_series**2 / 4
    log_sum = pt.log1p(_series_sum(nu, x))
    log_area = np.log(2.0) + (nu + 1) * np.log(np.pi) - pt.gammaln(nu + 1)
    small = log_area + log_sum - k_series
    large = (nu + 1) * np.log(2 * np.pi) - nu * pt.log(k_ive) + pt.log(pt.ive(nu, k_ive))
    # Hankel's expansion: ive(ν, κ) = (2πκ)^(-1/2) Σ_k (-1)^k a_k / κ^k,
    # a_k = (4ν² - 1)(4ν² - 9)...(4ν² - (2k-1)²) / (k! 8^k)
    inv = 1 / k_huge  # 8κ and 2πκ overflow at κ = 1e308
    total = pt.zeros_like(k_huge)
    for term in _hankel_coefficients(nu, inv):
        total = total + term
    log_k = pt.log(k_huge)
    hankel = (nu + 1) * np.log(2 * np.pi) - nu * log_k - 0.5 * (np.log(2 * np.pi) + log_k)
    hankel = hankel + pt.log1p(total)
    return pt.switch(series, small, pt.switch(huge, hankel, large))


def _mean_resultant_length(nu, kappa):
    """``A(κ) = I_{ν+1}(κ)/I_ν(κ) = d log Z/dκ`` and ``A(κ) - 1``, each branch's own way.

    Series (``κ <= 2 sqrt(ν+1)``): ``I_ν ∝ (κ/2)^ν S_ν(κ²/4)`` with
    ``S_ν' = S_{ν+1}/(ν+1)``, so ``A = κ/(2(ν+1)) S_{ν+1}/S_ν`` (exactly 0 at ``κ = 0``,
    no cancellation near it). Middle: ``ive(ν+1, κ)/ive(ν, κ)``. Far out
    (``κ > 1000 (ν² + 1)``, where Hankel's ``k``-th term is below ``(ν²/(2κ))^k/k!``,
    under ``1e-24`` at ``k = 7``): the derivative of Hankel's ``log Z - κ``,
    ``-(ν+1/2)/κ - Σ_k k t_k / (κ(1 + Σ_k t_k))``, which is ``A - 1`` without the
    cancellation of ``ive(ν+1)/ive(ν) - 1`` (``1e-8`` relative at ``κ = 1e8``).
    """
    series, _, k_series, k_ive, _ = _branches(nu, kappa)
    far = ~series & (kappa > _HANKEL_SLOPE * (nu**2 + 1))
    k_far = pt.switch(far, kappa, 2 * _HUGE)
    k_ive = pt.switch(far, 2 * _HUGE, k_ive)
    x = k_series**2 / 4
    ratio = (1 + _series_sum(nu + 1, x)) / (1 + _series_sum(nu, x))
    a_series = k_series / (2 * (nu + 1)) * ratio
    a_middle = pt.ive(nu + 1, k_ive) / pt.ive(nu, k_ive)
    inv = 1 / k_far
    total = pt.zeros_like(k_far)
    weighted = pt.zeros_like(k_far)
    for k, term in enumerate(_hankel_coefficients(nu, inv), start=1):
        total = total + term
        weighted = weighted + k * term
    d_far = -(nu + 0.5) * inv - weighted * inv / (1 + total)
    a = pt.switch(series, a_series, pt.switch(far, 1 + d_far, a_middle))
    a_minus_1 = pt.switch(series, a_series - 1, pt.switch(far, d_far, a_middle - 1))
    return a, a_minus_1


def _vmf_logp(value, mu, kappa):
    """``κ μᵀx - log Z(κ)``, written ``-κ|x - μ|²/2 - (log Z(κ) - κ)`` for unit ``x`` and
    ``μ``: at ``κ = 1e6`` the two terms of ``κ μᵀx - log Z`` are ``1e6`` each and cancel."""
    p = value.shape[-1]
    half_sq = 0.5 * pt.sum((value - mu) ** 2, axis=-1)
    return -kappa * half_sq - _scaled_log_normalizer(p, kappa)


# --- the exact sampler ------------------------------------------------------------------
def sample_vmf(mu, kappa, size=None, rng=None):
    r"""Exact draws of the von Mises–Fisher law by Wood's (1994) rejection algorithm.

    The cosine ``t = μᵀx`` has density :math:`\propto e^{\kappa t}(1-t^2)^{(p-3)/2}`
    on ``[-1, 1]``; Wood draws it from the envelope
    :math:`t = (1-(1+b)Z)/(1-(1-b)Z)`, ``Z ~ Beta((p-1)/2, (p-1)/2)``, with
    :math:`b = (p-1)/(2\kappa + \sqrt{4\kappa^2 + (p-1)^2})` (the form without
    cancellation at large ``κ``, the root by ``hypot``: no overflow), and a uniform
    direction orthogonal to ``μ``.
    ``1 - t = 2bZ/(1-(1-b)Z)`` is computed directly, so the spread
    ``sqrt((1-t)(1+t))`` keeps its digits at ``κ = 1e6`` and beyond; at ``κ = 0``
    every proposal is accepted and the draw is uniform. Vectorized over the batch
    (each member has its own ``μ`` and ``κ``); the expected number of proposals is at
    most about 1.5 for every ``p`` and ``κ`` (Wood 1994).

    Parameters
    ----------
    mu : array, shape ``(..., p)``
        Unit mean directions.
    kappa : float or array, shape ``(...)``
        Concentrations ``κ >= 0``.
    size : tuple of int, optional
        The batch shape of the draws (default: ``mu`` and ``kappa`` broadcast).
    rng : numpy.random.Generator, optional
        The source of randomness (``None``: fresh OS entropy).

    Returns
    -------
    ndarray, shape ``(*size, p)``
        Unit vectors.

    Examples
    --------
    >>> import numpy as np
    >>> x = sample_vmf([0.0, 0.0, 1.0], 50.0, size=(1000,), rng=np.random.default_rng(0))
    >>> x.shape, bool(np.allclose(np.linalg.norm(x, axis=-1), 1))
    ((1000, 3), True)
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    mu = np.asarray(mu, float)
    kappa = np.asarray(kappa, float)
    p = mu.shape[-1]
    batch = np.broadcast_shapes(mu.shape[:-1], kappa.shape) if size is None else tuple(size)
    mu = np.broadcast_to(mu, (*batch, p)).reshape(-1, p)
    kappa = np.broadcast_to(kappa, batch).reshape(-1)
    m = kappa.size
    q = p - 1.0
    # beyond 1e300 a draw is mu to rounding (spread 1e-150); b must not underflow to 0
    kappa = np.minimum(kappa, 1e300)
    with np.errstate(over="ignore", divide="ignore"):  # 2κ overflows past 9e307
        b = np.where(kappa > 1e100, q / (4 * kappa), q / (2 * kappa + np.hypot(2 * kappa, q)))
    x0 = (1 - b) / (1 + b)
    # 1 - x0 and log(1 - x0²) from b: x0 rounds to 1 beyond κ ~ 1e16
    one_minus_x0 = 2 * b / (1 + b)
    log_c = np.log(4 * b) - 2 * np.log1p(b)
    t = np.empty(m)
    one_minus_t = np.empty(m)
    todo = np.arange(m)
    while todo.size:
        z = rng.beta(q / 2, q / 2, size=todo.size)
        u = rng.random(todo.size)
        bb = b[todo]
        denom = 1 - (1 - bb) * z
        w = (1 - (1 + bb) * z) / denom
        omw = 2 * bb * z / denom
        # Wood's test κw + q log(1 - x0 w) - κx0 - q log(1 - x0²) >= log u, written with
        # 1 - x0 w = (1 - x0) + x0 (1 - w) and w - x0 = (1 - x0) - (1 - w): no cancellation
        # near w = 1, no inf - inf at huge κ
        xx, omx = x0[todo], one_minus_x0[todo]
        log_ratio = np.log(omx + xx * omw) - log_c[todo]
        ok = kappa[todo] * (omx - omw) + q * log_ratio >= np.log(u)
        t[todo[ok]] = w[ok]
        one_minus_t[todo[ok]] = omw[ok]
        todo = todo[~ok]
    g = rng.standard_normal((m, p))
    g -= np.sum(g * mu, axis=-1, keepdims=True) * mu
    g /= np.linalg.norm(g, axis=-1, keepdims=True)
    s = np.sqrt(np.clip(one_minus_t * (1 + t), 0.0, None))
    out = t[:, None] * mu + s[:, None] * g
    out /= np.linalg.norm(out, axis=-1, keepdims=True)
    return out.reshape((*batch, p))


# --- the PyMC distribution --------------------------------------------------------------
class VonMisesFisherRV(RandomVariable):
    """``mu, kappa -> x`` on ``S^{p-1}``; draws: :func:`sample_vmf` (Wood 1994)."""

    name = "VonMisesFisher"
    signature = "(p),()->(p)"
    dtype = "floatX"
    _print_name = ("VonMisesFisher", r"\operatorname{VonMisesFisher}")
    #: NumPy draws in PyTensor's NUMBA backend (object mode, silenced in distributions.py)
    python_draws = True

    def rng_fn(self, rng, mu, kappa, size):
        return sample_vmf(mu, kappa, size, rng)


vonmisesfisher = VonMisesFisherRV()


def _is_constant(x) -> bool:
    return not isinstance(x, Variable) or isinstance(x, Constant)


def _numeric(x, name):
    """A constant parameter as a float array: TypeError for what is not a real number."""
    x = x.data if isinstance(x, Constant) else x
    try:
        arr = np.asarray(x)
    except Exception as err:  # ragged lists
        raise TypeError(f"{name} must be an array of real numbers, got {x!r}") from err
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an array of real numbers, got {x!r} ({arr.dtype})")
    try:
        return arr.astype(float)
    except OverflowError as err:
        raise ValueError(f"{name} is too large for a float: {x!r}") from err


def _check_mu(mu):
    if _is_constant(mu):
        if mu is None:
            raise TypeError("mu must be an array of real numbers (a unit vector), got None")
        arr = _numeric(mu, "mu")
        if arr.ndim < 1 or arr.shape[-1] < 2:
            raise ValueError(
                f"mu must have shape (..., p) with p >= 2 (a unit vector of R^p, the sphere "
                f"S^(p-1) = Sphere(dim=p-1)), got shape {arr.shape}"
            )
        with np.errstate(over="ignore"):  # a norm past 1e308 is inf: refused just below
            norms = np.linalg.norm(arr, axis=-1)
        if not (np.all(np.isfinite(arr)) and np.all(np.abs(norms - 1) <= MU_TOL)):
            bad = np.max(np.abs(norms - 1)) if np.all(np.isfinite(norms)) else np.nan
            raise ValueError(
                f"mu must be unit vectors (| |mu| - 1 | <= {MU_TOL:g}), finite; got a norm off "
                f"by {bad!r}: pass mu / np.linalg.norm(mu, axis=-1, keepdims=True)"
            )
        return pt.as_tensor_variable(arr / norms[..., None])
    mu = pt.as_tensor_variable(mu)
    if mu.ndim < 1:
        raise ValueError("mu must have shape (..., p) with p >= 2, got a scalar tensor")
    if mu.type.shape[-1] is not None and mu.type.shape[-1] < 2:
        raise ValueError(f"mu must have shape (..., p) with p >= 2, got {mu.type.shape}")
    return mu


def _check_kappa(kappa):
    if _is_constant(kappa):
        if kappa is None:
            raise TypeError("kappa must be a real number >= 0, got None")
        if isinstance(kappa, numbers.Real) or isinstance(kappa, str):
            # one number: the package's message (a huge int is a ValueError, a bool a TypeError)
            # a NumPy float64, not a Python float: PyTensor tries float32 for a Python
            # float constant first, which overflows (and warns) past 3.4e38
            return pt.as_tensor_variable(np.float64(check_nonnegative_real(kappa, "kappa")))
        arr = _numeric(kappa, "kappa")
        if not (np.all(np.isfinite(arr)) and np.all(arr >= 0)):
            raise ValueError(
                f"kappa must be a finite number >= 0 everywhere (0 is the uniform law), got "
                f"{kappa!r}"
            )
        return pt.as_tensor_variable(arr)
    return pt.as_tensor_variable(kappa)


class VonMisesFisher(Continuous):
    r"""The von Mises–Fisher law on the unit sphere :math:`S^{p-1} \subset \mathbb R^p`.

    .. math:: f(x) = \frac{\kappa^{p/2-1}}{(2\pi)^{p/2} I_{p/2-1}(\kappa)}
              \, e^{\kappa\mu^\top x}

    with respect to the surface measure of :math:`S^{p-1}`, which is the Riemannian
    volume of ``Sphere(dim=p-1)`` (radius 1): ``pm.logp`` is comparable with the other
    laws' on that sphere, and ``κ = 0`` gives ``-log vol``
    (``-Sphere(dim=p-1).log_volume``), the uniform law. ``p = 2`` is the circle: the
    density of ``pm.VonMises`` at the angle of ``x`` (which is w.r.t. arc length).
    The normalizer is :func:`vmf_log_normalizer` (stable for ``κ`` from 0 to beyond
    ``1e6``, with a gradient in ``κ``), draws are exact (:func:`sample_vmf`).

    ``mu`` and ``kappa`` may be constants (checked now), ``pm.Data`` or random
    variables (checked in the graph: ``κ >= 0`` finite, ``| |μ| - 1 | <= 1e-6``), so a
    mean direction can have its own prior (``ManifoldUniform``, another
    ``VonMisesFisher``). Latent values are sampled in the
    :class:`~pymc_manidp.laws.charts.NormalizedGaussian` chart of the sphere; observed
    values (a batch of unit vectors, shape ``(n, p)``) are used as given.

    Parameters
    ----------
    name : str
        The variable's name in the model (not an argument of ``.dist``).
    mu : array or tensor, shape ``(..., p)``
        The mean direction, a unit vector of :math:`\mathbb R^p`, ``p >= 2``.
    kappa : float or tensor, shape ``(...)``
        The concentration ``κ >= 0``.
    **kwargs
        ``size``, ``shape``, ``dims``, ``observed`` ... as for any PyMC distribution.

    References
    ----------
    Mardia, K. V. & Jupp, P. E. (2000), *Directional Statistics*, section 9.3.
    Wood, A. T. A. (1994), Simulation of the von Mises Fisher distribution,
    *Communications in Statistics – Simulation and Computation* 23(1), 157–164.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> import pymc_manidp as pmd
    >>> pm.draw(VonMisesFisher.dist([0.0, 0.0, 1.0], 10.0, size=4), random_seed=1).shape
    (4, 3)
    >>> lp = pm.logp(VonMisesFisher.dist([0.0, 0.0, 1.0], 0.0), [1.0, 0.0, 0.0]).eval()
    >>> bool(np.isclose(lp, -np.log(4 * np.pi)))
    True
    """

    rv_type = VonMisesFisherRV

    @classmethod
    def rv_op(cls, mu, kappa, *, size=None, rng=None):
        # an explicit rng: a RandomVariable called without one is deprecated
        rng = normalize_rng_param(rng)
        _, rv = vonmisesfisher(mu, kappa, size=size, rng=rng, return_next_rng=True)
        return rv

    def __new__(cls, name, mu, kappa, **kwargs):
        # the signature the docstring documents (as the package's other laws do)
        return super().__new__(cls, name, mu, kappa, **kwargs)

    @classmethod
    def dist(cls, mu, kappa, **kwargs):
        return super().dist([_check_mu(mu), _check_kappa(kappa)], **kwargs)


@_logprob.register(VonMisesFisherRV)
def _vmf_logprob(op, values, rng, size, mu, kappa, **kwargs):
    (value,) = values
    logp = _vmf_logp(value, mu, kappa)
    return check_parameters(
        logp,
        pt.ge(kappa, 0),
        pt.isfinite(kappa),
        pt.le(pt.abs(pt.sqrt(pt.sum(mu**2, axis=-1)) - 1), MU_TOL),
        msg=f"kappa >= 0 finite and mu a unit vector (| |mu| - 1 | <= {MU_TOL:g})",
    )


@_support_point.register(VonMisesFisherRV)
def _vmf_support_point(op, rv, rng, size, mu, kappa):
    # the mode; not a pole of the NormalizedGaussian chart, which has none
    return pt.broadcast_to(mu, rv.shape)


@_default_transform.register(VonMisesFisherRV)
def _vmf_transform(op, rv):
    p = rv.type.shape[-1]
    if p is None:
        raise ValueError(
            "a latent VonMisesFisher needs mu's length p known when the model is built "
            "(a constant, or pm.Data with shape=(p,))"
        )
    return NormalizedGaussian(Sphere(dim=p - 1))
