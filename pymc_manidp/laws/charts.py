r"""The tangent-chart transform: how samplers see a manifold-valued variable.

The sampler moves ``u`` in :math:`\mathbb R^d`; the value is the point with normal
coordinates ``c = s u`` at a origin (the density's mode),

.. math:: x = \exp_{\text{origin}}\Big(\sum_a c_a E_a\Big), \qquad c = s\,u,

with ``E_a`` the manifold's orthonormal frame at the origin. The scale ``s`` (the
mechanism's sigma) makes ``u`` of order one. The log-Jacobian w.r.t. the Riemannian
volume is ``d log s + log J(c)``, ``J`` the exp chart's volume density (closed forms
in each manifold, checked against finite differences in the tests).

Why linear: a radial map that smooths the cusp (``|c| = s|u|^2``) has a Jacobian
``∝ |u|^d`` that vanishes at the mode, and NUTS diverges crossing that well (measured:
28 divergences per 2,000 draws on KNG, S^2, and a biased distance law). The linear
chart keeps the cusp, which NUTS handles with a smaller step (no divergences); the
mechanisms can use a polar (direction, log-radius) parametrization instead, see
:mod:`pymc_manidp.mcmc`.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.logprob.transforms import Transform
from scipy.special import gammaln

from pymc_manidp._validation import check_positive_real
from pymc_manidp.geometry.capabilities import BallExit, GaussianChart, NoiseMap
from pymc_manidp.geometry.sphere import log_unit_sphere_volume

__all__ = [
    "ChartTransform",
    "MovingPolarChart",
    "MovingTangentChart",
    "NormalizedGaussian",
    "PolarChart",
    "ball_exit",
    "chart_coords",
    "log_unit_sphere_volume",
    "log_volume",
    "point_dims",
]


class ChartTransform(Transform):
    r"""Bijection between :math:`\mathbb R^d` and a manifold (minus a cut locus).

    Parameters
    ----------
    manifold : Manifold
        The manifold; ``u`` lives in :math:`\mathbb R^d`, ``d = manifold.dim``.
    origin : array, shape ``point_shape``
        Origin of the chart (a constant: the footpoint or the Fréchet mean).
    scale : float
        ``c = scale * u``; use the mechanism's ``sigma`` so ``u`` is of order one.

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> t = ChartTransform(S, origin=[0.0, 0.0, 1.0], scale=0.1)
    >>> u = np.array([3.0, 4.0])
    >>> x = t.backward(pt.as_tensor(u)).eval()
    >>> bool(np.isclose(S.dist([0.0, 0.0, 1.0], x), 0.5))  # |c| = s |u|
    True
    >>> np.allclose(t.forward(pt.as_tensor(x)).eval(), u)
    True
    """

    name = "chart"

    def __init__(self, manifold, origin, scale: float):
        self.manifold = manifold
        self.origin = manifold.validate(origin)
        self.scale = check_positive_real(scale, "scale")
        self.ndim_supp = len(manifold.point_shape)
        self._frame = manifold.chart_frame(self.origin)

    def coords(self, u):
        """Chart coordinates ``c = s u``."""
        return self.scale * pt.as_tensor_variable(u)

    def backward(self, value, *inputs):
        return self.manifold.pt_exp_coords(self.origin, self.coords(value))

    def forward(self, value, *inputs):
        # the inverse of backward's chart, in the manifold's own metric (a Euclidean
        # product with the frame is right only where the metric is, e.g. at SPD's I)
        return chart_coords(self.manifold, self._frame, value) / self.scale

    def log_jac_det(self, value, *inputs):
        d = self.manifold.dim
        return d * np.log(self.scale) + self.manifold.pt_log_volume_density(self.coords(value))

    def initial_value(self) -> np.ndarray:
        """A starting point one scale unit from the origin (off the cusp)."""
        u = np.full(self.manifold.dim, 1.0 / np.sqrt(self.manifold.dim))
        return self.manifold.exp_coords(self.origin, self.scale * u)


def chart_coords(manifold, frame, x):
    """Normal coordinates ``(..., dim)`` at the frame's origin of points ``x`` (tensor):
    ``manifold.pt_log_frame``, the inverse of the chart ``pt_exp_frame``."""
    return manifold.pt_log_frame(frame, x)


class PolarChart(Transform):
    r"""Polar normal coordinates at a origin: how NUTS sees a Laplace-like variable.

    The unconstrained value is ``(z, s)`` in :math:`\mathbb R^{d+1}`: a direction
    from ``z`` and a log-radius ``s``,

    .. math:: c = t\,\frac{z}{|z|}, \quad t = \text{scale}\cdot e^{s}, \quad
              x = \exp_{\text{origin}}\Big(\sum_a c_a E_a\Big)

    (on compact manifolds ``t = T tanh(scale e^s / T)`` with ``T`` the injectivity
    radius, so the radius never leaves the chart). The cusp of
    :math:`e^{-\rho/\sigma}` at the origin sits at ``s = -inf``, where the density in
    ``s`` decays like :math:`e^{d s}`: smooth everywhere, so NUTS meets no kink
    (measured on KNG, S^2: 0 divergences and twice the effective sample size of the
    linear chart :class:`ChartTransform`). The log-Jacobian w.r.t. the Riemannian
    volume is

    .. math:: (d-1)\log t + \log\frac{dt}{ds} + \log J(c) - \tfrac12|z|^2
              + \log\mathrm{vol}(S^{d-1}) - \tfrac d2\log 2\pi,

    the Gaussian term making ``z`` standard normal, so the direction ``z/|z|`` is
    uniform and independent of ``|z|`` (a free chi-distributed auxiliary); with the
    constants the target on ``(z, s)`` integrates to the law's mass. An earlier
    version held ``|z|`` on a thin shell: it capped NUTS's step size at the shell's
    width; the Gaussian gave about 9 times the effective samples per second on KNG,
    S^2, n = 1,000 (2026-11-23, nutpie, 0 divergences). The price: the target is not
    smooth at ``z = 0`` (no direction there), a region the chi law rarely visits.

    For ``d = 1`` a direction is a sign, which no smooth map gives; there the value is
    one number ``u`` and the chart linear, ``c = scale * u``.

    Not a bijection (``|z|`` is auxiliary): :meth:`forward` returns the
    representative with ``|z| = 1``.

    Parameters
    ----------
    manifold : Manifold
        The manifold; the unconstrained value has shape ``(..., d)``, ``d = manifold.dim``.
    frame : dict
        ``manifold.chart_frame(origin)``: arrays, or tensors such as ``pm.Data`` so a
        compiled model can follow a new origin.
    scale : float or tensor, optional
        Typical distance from the origin (the law's ``sigma``). Default: the random
        variable's own ``sigma`` input (``scale_input``).
    scale_input : int
        Index of ``sigma`` among the random variable's inputs, when ``scale`` is None.
    domain : DataDomain, optional
        Cap the radius at the edge of the ball ``B_r(m0)`` (which must contain the
        origin) instead of the injectivity radius: ``t = T(ω) tanh(scale e^s/T(ω))``
        with ``T(ω)`` the distance from the center to the ball's edge along ``ω``.
        The chart then covers exactly the open ball, so a density restricted to it
        has no wall for NUTS to hit. The map ``(ω, s) -> (ω, t)`` is triangular, so
        the log-Jacobian keeps its form with ``T(ω)``. Needs the manifold's closed form
        of ``T(ω)`` (``manifold.pt_ball_exit``, where the space has one).

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> t = PolarChart(S, S.chart_frame([0.0, 0.0, 1.0]), scale=0.1)
    >>> x = t.backward(pt.as_tensor([3.0, 4.0, np.log(2.0)])).eval()
    >>> bool(np.isclose(S.dist([0.0, 0.0, 1.0], x), np.pi * np.tanh(0.2 / np.pi)))
    True
    >>> np.allclose(t.backward(t.forward(pt.as_tensor(x))).eval(), x)
    True
    """

    name = "polar"

    def __init__(self, manifold, frame, scale=None, scale_input: int = 3, domain=None):
        self.manifold = manifold
        self.frame = frame
        self.scale = scale
        self.scale_input = scale_input
        self.ndim_supp = len(manifold.point_shape)
        if domain is not None and not isinstance(manifold, BallExit):
            raise ValueError(f"the ball-capped polar chart has no closed form on {manifold}")
        self.domain = domain

    def _scale(self, inputs):
        if self.scale is not None:
            return pt.as_tensor_variable(self.scale)
        return pt.as_tensor_variable(inputs[self.scale_input])

    def _radius(self, s, scale, big_t=None):
        """``t(s)`` and ``log dt/ds``; ``big_t`` caps the radius (tensor or float)."""
        if big_t is None:
            big_t = self.manifold.injectivity_radius
        return polar_radius(s, scale, big_t)

    def _coords(self, value, inputs):
        value = pt.as_tensor_variable(value)
        scale = self._scale(inputs)
        d = self.manifold.dim
        if d == 1:
            c = scale * value
            return c, pt.log(scale) + pt.zeros_like(value[..., 0])
        z, s = value[..., :d], value[..., d]
        nz = pt.sqrt(pt.sum(z**2, axis=-1))
        t, log_dt_ds = self._radius(s, scale, self._cap(z / pt.shape_padright(nz)))
        c = (t / nz)[..., None] * z
        log_jac = (
            (d - 1) * pt.log(t)
            + log_dt_ds
            - 0.5 * nz**2
            + log_unit_sphere_volume(d)
            - 0.5 * d * np.log(2.0 * np.pi)
        )
        return c, log_jac

    def _cap(self, omega):
        """Largest radius along unit chart directions ``omega``: the injectivity radius,
        or with a ``domain`` the distance to the ball's edge (:func:`ball_exit`)."""
        if self.domain is None:
            return None
        return ball_exit(self.manifold, self.frame, omega, self.domain)

    def backward(self, value, *inputs):
        c, _ = self._coords(value, inputs)
        return self.manifold.pt_exp_frame(self.frame, c)

    def forward(self, value, *inputs):
        c = chart_coords(self.manifold, self.frame, value)
        scale = self._scale(inputs)
        d = self.manifold.dim
        if d == 1:
            return c / scale
        t_exact = pt.sqrt(pt.sum(c**2, axis=-1))
        # the origin itself (s = -inf, no direction) is sent 1e-6 scale away: forward
        # only gives starting points, and a finite one is what a sampler needs
        t = pt.maximum(t_exact, 1e-6 * scale)
        e1 = np.eye(d)[0]
        z = pt.switch(pt.shape_padright(t_exact > 0), c / pt.shape_padright(t), e1)
        big_t = self._cap(z)
        if big_t is None:
            big_t = self.manifold.injectivity_radius
        s = polar_log_radius(t, scale, big_t)
        return pt.concatenate([z, s[..., None]], axis=-1)

    def log_jac_det(self, value, *inputs):
        c, log_jac = self._coords(value, inputs)
        return log_jac + self.manifold.pt_log_volume_density(c)


class MovingPolarChart(Transform):
    r"""Polar normal coordinates at a random footpoint: the non-centred form.

    For a Laplace-like variable whose footpoint ``x`` is itself a random variable (a
    group mean around a population mean), the chart follows the footpoint. The
    unconstrained value is ``(w, s)`` in :math:`\mathbb R^{m+1}`, ``w`` a noise of
    ``manifold.noise_shape`` (``m`` numbers) and ``s`` a log-radius:

    .. math:: u = \frac{P_x w}{|P_x w|_x}, \quad t = \text{scale}\cdot e^{s}, \quad
              y = \exp_x(t\,u),

    ``P_x`` the manifold's linear map of noise onto :math:`T_x` (``pt_exp_noise``: a
    tangent projection on spheres and shapes, the congruence by :math:`x^{1/2}` on SPD,
    the boosted frame on hyperbolic space), smooth in ``x`` everywhere (no frame is
    needed, which a sphere does not have globally), under which a standard normal
    ``w`` is standard normal on :math:`T_x`. On compact manifolds
    ``t = T tanh(scale e^s/T)`` with ``T`` the injectivity radius, as in
    :class:`PolarChart`. The log-Jacobian w.r.t. the Riemannian volume,

    .. math:: (d-1)\log t + \log\frac{dt}{ds} + \log J_x(t u) - \tfrac12|w|^2
              - \tfrac m2\log 2\pi + \log\mathrm{vol}(S^{d-1}),

    makes ``w`` standard normal, so ``u`` is uniform on the unit sphere of
    :math:`T_x` and independent of ``|w|`` and of the components of ``w`` that ``P_x``
    removes (free auxiliaries); the target on ``(w, s)`` integrates to the law's mass.

    Why: a law :math:`e^{-\rho(x, y)/\tau}` has its cusp at ``y = x``. A chart fixed in
    space (the normalized Gaussian, :class:`NormalizedGaussian`) meets that cusp wherever the
    sampler moves ``x``, and the coupling of ``y`` to ``x`` at small ``τ`` is the funnel
    of hierarchical models. Here the cusp sits at ``s = -inf`` for every ``x``, and on a
    homogeneous space the law of ``(w, s)`` does not depend on ``x`` at all: ``x`` and
    ``(w, s)`` are independent a priori (the non-centred parametrization).

    For ``d = 1`` a direction is a sign, which no smooth map gives: there the chart is
    the tangent line, ``y = exp_x(h(|P_x w|) P_x w/|P_x w|)`` with the odd map
    ``h(a) = T tanh(scale a/T)`` (``scale a`` when ``T`` is infinite), and log-Jacobian
    ``log h'(|P_x w|) + log J - (|w|^2 - |P_x w|^2)/2 - (m - 1)/2 log 2π``.

    Not a bijection (the auxiliaries): :meth:`forward` returns the representative with
    ``|w| = 1`` and no removed component.

    Parameters
    ----------
    manifold : Manifold
        A manifold with a noise map (``noise_shape``, ``pt_exp_noise``,
        ``pt_noise_norm``, ``pt_log_noise``): every built-in one.
    footpoint_input, scale_input : int
        Indices of the footpoint and of ``sigma`` among the random variable's inputs
        (``ManifoldLaplace``: 2 and 3).

    Raises
    ------
    ValueError
        If ``manifold`` has no noise map.

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> t = MovingPolarChart(S)
    >>> x = pt.as_tensor([0.0, 0.0, 1.0])
    >>> y = t.backward(pt.as_tensor([3.0, 4.0, 7.0, np.log(0.2)]), None, None, x, 1.0).eval()
    >>> bool(np.isclose(S.dist([0.0, 0.0, 1.0], y), np.pi * np.tanh(0.2 / np.pi)))
    True
    """

    name = "moving"

    def __init__(self, manifold, footpoint_input: int = 2, scale_input: int = 3):
        if not isinstance(manifold, NoiseMap):
            raise ValueError(f"{manifold} has no noise map (noise_shape): no moving chart")
        self.manifold = manifold
        self.footpoint_input = footpoint_input
        self.scale_input = scale_input
        self.ndim_supp = len(manifold.point_shape)
        self._m = int(np.prod(manifold.noise_shape))

    def _split(self, value, inputs):
        value = pt.as_tensor_variable(value)
        x = pt.as_tensor_variable(inputs[self.footpoint_input])
        scale = pt.as_tensor_variable(inputs[self.scale_input])
        batch = [value.shape[i] for i in range(value.ndim - 1)]
        w = pt.reshape(value[..., : self._m], (*batch, *self.manifold.noise_shape))
        return x, scale, w

    def _radius(self, s, scale):
        big_t = self.manifold.injectivity_radius
        return polar_radius(s, scale, big_t)

    def _point(self, value, inputs):
        """The point and the log-Jacobian of the value."""
        M, d = self.manifold, self.manifold.dim
        x, scale, w = self._split(value, inputs)
        n = len(M.noise_shape)

        def pad(a):  # a number per point, broadcast over the noise's axes
            return pt.shape_padright(a, n)

        if d == 1:  # a sign has no smooth parametrization: the tangent line itself
            return tangent_line_point(M, x, scale, w)
        s = pt.as_tensor_variable(value)[..., self._m]
        norm_w2 = pt.sum(pt.reshape(w, (*[w.shape[i] for i in range(w.ndim - n)], -1)) ** 2, -1)
        norm_pw = M.pt_noise_norm(x, w)
        t, log_dt_ds = self._radius(s, scale)
        w_t = pad(t / norm_pw) * w  # P_x w_t = t u
        log_jac = (
            (d - 1) * pt.log(t)
            + log_dt_ds
            + M.pt_log_volume_density_noise(x, w_t)
            - 0.5 * norm_w2
            - 0.5 * self._m * np.log(2.0 * np.pi)
            + log_unit_sphere_volume(d)
        )
        return M.pt_exp_noise(x, w_t), log_jac

    def backward(self, value, *inputs):
        return self._point(value, inputs)[0]

    def forward(self, value, *inputs):
        M = self.manifold
        n = len(M.noise_shape)
        x = pt.as_tensor_variable(inputs[self.footpoint_input])
        scale = pt.as_tensor_variable(inputs[self.scale_input])
        v = M.pt_log_noise(x, value)
        t_exact = M.pt_noise_norm(x, v)
        # the footpoint itself (s = -inf, no direction) is sent 1e-6 scale away along a
        # fixed generic noise: forward only gives starting points, and a finite one is
        # what a sampler needs
        at_x = pt.shape_padright(t_exact < 1e-100, n)
        v = pt.switch(at_x, pt.as_tensor_variable(generic_noise(M)), v)
        t = pt.maximum(t_exact, 1e-6 * scale)
        unit = v / pt.shape_padright(M.pt_noise_norm(x, v), n)  # |P_x unit| = 1
        s_val = polar_log_radius(t, scale, M.injectivity_radius)
        line = self._line()
        if line:  # the tangent line: |P_x w| = h^{-1}(t) = e^{s(t)}
            unit = unit * pt.shape_padright(pt.exp(s_val), n)
        flat = pt.reshape(unit, (*[unit.shape[i] for i in range(unit.ndim - n)], -1))
        if line:
            return flat
        return pt.concatenate([flat, s_val[..., None]], axis=-1)

    def log_jac_det(self, value, *inputs):
        return self._point(value, inputs)[1]

    def _line(self) -> bool:
        """Whether the value is the tangent noise alone (no log-radius): ``d = 1``."""
        return self.manifold.dim == 1


class MovingTangentChart(MovingPolarChart):
    r"""Normal coordinates at a random footpoint: the non-centred form, no polar split.

    The default chart of a Laplace-like variable whose footpoint ``x`` is itself a random
    variable (a group mean around a population mean). The unconstrained value is a
    noise ``w`` of ``manifold.noise_shape`` (``m`` numbers), and

    .. math:: a = |P_x w|_x, \quad h(a) = T\tanh(\text{scale}\,a/T), \quad
              y = \exp_x\Big(h(a)\,\frac{P_x w}{a}\Big)

    (``h(a) = scale·a`` when the injectivity radius ``T`` is infinite), with ``P_x``
    the manifold's noise map (``pt_exp_noise``; see :class:`MovingPolarChart`). Since
    ``h`` is odd and ``h(a)/a`` is an even analytic function of ``a``, ``y`` is smooth
    in ``(x, w)`` everywhere: no direction ``P_x w/a`` is ever divided out. The
    log-Jacobian w.r.t. the Riemannian volume is

    .. math:: \log h'(a) + (d-1)\log\frac{h(a)}{a} + \log J_x\Big(h(a)\frac{P_x w}{a}\Big)
              - \tfrac12\big(|w|^2 - a^2\big) - \tfrac{m-d}2\log 2\pi,

    the Gaussian term making the ``m - d`` components of ``w`` that ``P_x`` removes
    standard normal (free auxiliaries); the tangent part is the coordinate itself. Under
    the Laplace law :math:`e^{-\rho(x, y)/\text{scale}}` the target in ``w`` is
    :math:`e^{-h(a)/\text{scale}}` times the Jacobian, which on a homogeneous space does
    not depend on ``x``: ``x`` and ``w`` are independent a priori.

    Why not the polar split of :class:`MovingPolarChart`: its direction ``P_x w/|P_x w|``
    turns by ``|δx|·|w_⊥|/|P_x w|`` when ``x`` moves, a force that grows without bound
    as ``|P_x w| -> 0``; NUTS diverged there (1–2 per 4,000 draws on the six-group
    model of docs/mechanisms.md). This chart keeps the Laplace cusp at ``w_∥ = 0``
    instead, a bounded jump of the gradient that NUTS crosses with no divergence
    (measured with ``docs/benchmarks/hierarchical_charts.py``: 0 divergences on eight data
    sets, step size 0.31–0.39 against 0.13–0.22 for the polar form, a similar effective
    sample size).

    Parameters
    ----------
    manifold : Manifold
        A manifold with a noise map (every built-in one).
    footpoint_input, scale_input : int
        Indices of the footpoint and of ``sigma`` among the random variable's inputs
        (``ManifoldLaplace``: 2 and 3).

    Raises
    ------
    ValueError
        If ``manifold`` has no noise map.

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> t = MovingTangentChart(S)
    >>> x = pt.as_tensor([0.0, 0.0, 1.0])
    >>> y = t.backward(pt.as_tensor([0.3, 0.4, 7.0]), None, None, x, 0.4).eval()
    >>> bool(np.isclose(S.dist([0.0, 0.0, 1.0], y), np.pi * np.tanh(0.2 / np.pi)))
    True
    """

    name = "moving"

    def _point(self, value, inputs):
        x, scale, w = self._split(value, inputs)
        return tangent_line_point(self.manifold, x, scale, w)

    def _line(self) -> bool:
        return True


def tangent_line_point(manifold, x, scale, w):
    """``exp_x(h(a) P_x w/a)`` with ``a = |P_x w|`` and its log-Jacobian w.r.t. the
    volume (:class:`MovingTangentChart`); ``w`` has shape ``(..., *noise_shape)``."""
    M, d = manifold, manifold.dim
    n = len(M.noise_shape)
    m = int(np.prod(M.noise_shape))
    norm_w2 = pt.sum(pt.reshape(w, (*[w.shape[i] for i in range(w.ndim - n)], -1)) ** 2, -1)
    a = M.pt_noise_norm(x, w)
    big_t = M.injectivity_radius
    if np.isfinite(big_t):
        # h(a) = T tanh(y), y = scale a/T: h is odd and caps the line at T (an uncapped
        # line would wrap around a circle infinitely often)
        y = scale * a / big_t
        ratio = scale * _tanh_ratio(y)  # h(a)/a
        log_dh = pt.log(scale) + 2.0 * (np.log(2.0) - y - pt.log1p(pt.exp(-2.0 * y)))
    else:
        ratio = scale * pt.ones_like(a)
        log_dh = pt.log(ratio)
    w_t = pt.shape_padright(ratio, n) * w  # P_x w_t = h(a) P_x w/a
    log_jac = (
        log_dh
        + (d - 1) * pt.log(ratio)
        + M.pt_log_volume_density_noise(x, w_t)
        - 0.5 * (norm_w2 - a**2)
        - 0.5 * (m - d) * np.log(2.0 * np.pi)
    )
    return M.pt_exp_noise(x, w_t), log_jac


def _tanh_ratio(y):
    """``tanh(y)/y``, smooth through ``y = 0`` (its Taylor series there, and a guarded
    argument so the unused branch's gradient is finite)."""
    small = y < 1e-3
    y_safe = pt.switch(small, 1.0, y)
    return pt.switch(small, 1.0 - y**2 / 3.0 + 2.0 * y**4 / 15.0, pt.tanh(y_safe) / y_safe)


def generic_noise(manifold) -> np.ndarray:
    """A fixed noise ``(*noise_shape)`` in no special position (not along a coordinate
    axis, not a multiple of a symmetric point), of unit norm: a direction to start a
    moving chart from when the value sits at its footpoint."""
    m = int(np.prod(manifold.noise_shape))
    w = np.sqrt(np.arange(2, m + 2)) * (-1.0) ** np.arange(m)
    return (w / np.linalg.norm(w)).reshape(manifold.noise_shape)


def polar_radius(s, scale, big_t):
    """``t(s)`` and ``log dt/ds`` of the polar charts: ``scale e^s``, or capped at
    ``big_t`` (a float, or a tensor of caps) as ``big_t tanh(scale e^s/big_t)``."""
    if not (isinstance(big_t, float) and not np.isfinite(big_t)):
        y = scale * pt.exp(s) / big_t
        log_sech2 = 2.0 * (np.log(2.0) - y - pt.log1p(pt.exp(-2.0 * y)))
        return big_t * pt.tanh(y), pt.log(scale) + s + log_sech2
    t = scale * pt.exp(s)
    return t, pt.log(t)


def polar_log_radius(t, scale, big_t):
    """The inverse of :func:`polar_radius`: ``s`` of a radius ``t``."""
    if not (isinstance(big_t, float) and not np.isfinite(big_t)):
        return pt.log(big_t * pt.arctanh(pt.minimum(t / big_t, 1 - 1e-16)) / scale)
    return pt.log(t / scale)


class NormalizedGaussian(Transform):
    r"""The whole of a compact manifold from a Gaussian vector.

    ``x = manifold.pt_from_gaussian(z)``, a map of degree 0 under which a standard
    normal ``z`` (shape ``manifold.gaussian_shape``) is uniform: on the sphere ``S^d_R``
    ``x = R z/|z|`` with ``z`` in :math:`\mathbb R^{d+1}`; on Kendall shapes
    ``x = H^T z/|z|`` with ``z`` in :math:`\mathbb R^{(k-1)\times 2}` and ``H`` the
    Helmert sub-matrix (the uniform law on the pre-shape sphere projects to the uniform
    law on :math:`\mathbb{CP}^{k-2}`). With the log-Jacobian

    .. math:: \log\mathrm{vol}(\mathcal M) + \log\varphi(z),

    ``φ`` the standard normal density, a law with density ``f`` w.r.t. volume on the
    manifold is the image of ``f(x(z))\,\mathrm{vol}(\mathcal M)\,φ(z)``: the uniform
    law is a standard normal ``z``. No origin is needed, so it suits variables whose
    location is itself random (a prior, a footpoint that is a random variable).

    The radius ``|z|`` is a free auxiliary, and its law is ours to choose: by default
    ``z`` has the density :math:`\propto |z|^{a} e^{-|z|^2/2}` (``a = extra_dof``), so
    ``|z|`` is chi-distributed with ``D + a`` degrees of freedom (``D`` the size of
    ``z``) and the direction ``z/|z|`` is still uniform; the log-Jacobian is then

    .. math:: \log\mathrm{vol}(\mathcal M) + a\log|z| - \tfrac12|z|^2
              - \log\mathrm{vol}(S^{D-1}) - \big(\tfrac{D+a}2 - 1\big)\log 2
              - \log\Gamma\big(\tfrac{D+a}2\big)

    (``a = 0``: the standard normal above). Why: when data pin the point to within an
    angle ``α``, the target in ``z`` is a cone of width ``α|z|``, a funnel at
    ``z = 0`` that a standard normal ``z`` visits; NUTS diverged there (the six-group
    model of docs/mechanisms.md: a divergence starting at ``|z| = 0.03``). With
    ``a = 8`` the radius stays near ``sqrt(D + 7)``, where the cone is wide, while its
    spread (about 0.7) stays that of a standard normal; NUTS's step grew by a third.

    Parameters
    ----------
    manifold : Manifold
        A compact manifold with a normalized-Gaussian map (``gaussian_shape``,
        ``pt_from_gaussian``, ``pt_to_gaussian``, ``log_volume``): the sphere, Kendall
        shapes, SO(3).
    extra_dof : float
        ``a >= 0`` above: the auxiliary radius's extra degrees of freedom.

    Raises
    ------
    ValueError
        If ``manifold`` has no such map (SPD, Euclidean, hyperbolic space: no uniform
        law).

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> import pymc_manidp as pmd
    >>> t = NormalizedGaussian(pmd.Sphere(dim=2, radius=2.0))
    >>> t.backward(pt.as_tensor([0.0, 3.0, 4.0])).eval()
    array([0. , 1.2, 1.6])
    """

    name = "gaussian"  # no "_": PyMC strips the last "_word__" of value names

    def __init__(self, manifold, extra_dof: float = 8.0):
        if not (np.isfinite(extra_dof) and extra_dof >= 0):
            raise ValueError(f"extra_dof must be a finite number >= 0, not {extra_dof!r}")
        if not isinstance(manifold, GaussianChart):
            raise ValueError(
                f"NormalizedGaussian needs a compact manifold with a normalized-Gaussian map "
                f"(a sphere, Kendall shapes, rotations), not {manifold}"
            )
        self.manifold = manifold
        self.ndim_supp = len(manifold.point_shape)
        shape = tuple(manifold.gaussian_shape)
        self._axes = tuple(range(-len(shape), 0))
        self._size = int(np.prod(shape))
        self.extra_dof = float(extra_dof)
        size, a = self._size, self.extra_dof
        self._log_norm = (
            log_unit_sphere_volume(size)
            + ((size + a) / 2 - 1) * np.log(2.0)
            + float(gammaln((size + a) / 2))
        )

    def backward(self, value, *inputs):
        return self.manifold.pt_from_gaussian(value)

    def forward(self, value, *inputs):
        # the representative at the radius's mode, sqrt(D - 1 + a): a start where the
        # funnel is wide (a unit |z| with PyMC's jitter could start near z = 0)
        mode = np.sqrt(max(self._size - 1 + self.extra_dof, 1.0))
        return mode * self.manifold.pt_to_gaussian(value)

    def log_jac_det(self, value, *inputs):
        z = pt.as_tensor_variable(value)
        norm2 = pt.sum(z**2, axis=self._axes)
        radial = -0.5 * norm2 - self._log_norm
        if self.extra_dof:
            radial = radial + 0.5 * self.extra_dof * pt.log(norm2)
        return log_volume(self.manifold) + radial


def log_volume(manifold) -> float:
    r"""Log Riemannian volume of a compact manifold (``manifold.log_volume``).

    Sphere ``S^d_R``: :math:`2\pi^{(d+1)/2} R^d/\Gamma((d+1)/2)`; Kendall shapes with
    ``k`` landmarks (:math:`\mathbb{CP}^{k-2}`, distance ``arccos|<z, w>|``):
    :math:`\pi^{k-2}/(k-2)!`. Other manifolds have infinite volume: ``ValueError``.
    """
    value = float(manifold.log_volume)
    if not np.isfinite(value):
        raise ValueError(
            f"{manifold} has infinite volume: a uniform law exists only on compact manifolds "
            "(a sphere, Kendall shapes, rotations)"
        )
    return value


def ball_exit(manifold, frame, omega, domain):
    r"""Distance ``T(ω)`` from the chart origin to the edge of ``B_r(m0)`` along ``ω``.

    ``omega``: unit chart directions ``(..., dim)`` at the frame's origin (inside the
    ball). The manifold's closed form (``manifold.pt_ball_exit``): Euclidean,
    ``|c + tω - m0| = r``; sphere of radius ``R``,
    ``<m0, γ(t)>/R^2 = a cos(t/R) + b sin(t/R) = cos(r/R)``; Kendall shapes,
    ``|<m0, γ(t)>|^2 = P + Q cos 2t + W sin 2t = cos^2 r`` (complex inner products).
    The first crossing after ``t = 0`` is taken.
    """
    if not isinstance(manifold, BallExit):
        raise ValueError(f"the ball-capped polar chart has no closed form on {manifold}")
    m0 = np.asarray(domain.center, float)
    r = float(domain.radius)
    return manifold.pt_ball_exit(frame, pt.as_tensor_variable(omega), m0, r)


def point_dims(manifold) -> dict:
    """Named dims of a point (ArviZ labels): ``ambient``, or ``row``/``col``."""
    shape = tuple(manifold.point_shape)
    names = ("ambient",) if len(shape) == 1 else ("row", "col")
    return {n: np.arange(k) for n, k in zip(names, shape, strict=True)}
