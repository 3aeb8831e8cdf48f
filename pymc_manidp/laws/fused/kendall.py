r"""Fused log-density pieces of :class:`~pymc_manidp.geometry.kendall.KendallShape` in numba.

Chart coordinates ``c`` (``d = 2k - 4``) at the frame ``(z, E)`` of ``chart_frame``
(the origin's pre-shape ``(k, 2)`` and its horizontal basis ``(d, k, 2)``) give the
pre-shape

.. math:: x = \cos(t)\, z + \frac{\sin t}{t}\, c^\top E, \qquad t = |c|,

and the volume density of that chart is :math:`(\sin t/t)^{2k-6}\,\sin 2t/(2t)`.

KNG's norm follows ``KendallShape.pt_frechet_gradient_norm``: with ``J`` the rotation
by 90 degrees, ``re_i = <y_i, x>``, ``im_i = <y_i, J x>``, ``q_i = re_i^2 + im_i^2``,
``c_i = sqrt(q_i) = cos(theta_i)``, ``w_i = theta_i/sin(theta_i)`` and ``h_i = w_i/c_i``,

.. math:: T = \sum_i h_i\,(re_i\, y_i - im_i\, J y_i) - \Big(\sum_i w_i c_i\Big) x,
          \qquad N = \sqrt{|T|^2 + 10^{-300}}.

Its gradient in ``x`` (all of ``re_i, im_i`` move with ``x``), with ``g = T/N``, is

.. math:: \nabla_x N = H g - (g\cdot x)\, r - \Big(\sum_i w_i c_i\Big) g,

where ``H = sum_i [y_i, J y_i] M_i [y_i, J y_i]^T`` is symmetric (``M_i`` the 2 x 2
Jacobian of ``(h re, h im)`` in ``(re, im)``, symmetric since both are derivatives of one
function of ``q``) and ``r = sum_i d(w c)/d(re, im) . (y_i, -J y_i)``. ``g`` is known only
after the sum over the records, so the records' second moments ``H`` (``2k x 2k``,
upper triangle) are summed in the same single pass as ``T``: ``O(k^2)`` per record and
no second pass (no temporary of size ``n``).
"""

from __future__ import annotations

import math

import numpy as np

from pymc_manidp.geometry._numba.cache import njit

__all__ = ["kng_norm", "log_volume_density", "params"]

# the branch points of pt_numerics (cos_sqrt, sinc_sqrt, theta_over_sin: _SMALL_SQ;
# log_sinc_sqrt: _LOG_SERIES_SQ), so each value takes the graph's branch
_SMALL_SQ = 1e-8
_LOG_SERIES_SQ = 0.05**2
_PI_SQ = math.pi**2


def params(manifold) -> np.ndarray:
    """``[2k - 6]``: the power of ``sin t / t`` in the volume density."""
    return np.array([2.0 * manifold.k_landmarks - 6.0])


@njit(cache=True, error_model="numpy", inline="always")
def _log_sinc_sqrt(s):
    """``log(sin(sqrt s)/sqrt s)`` and its derivative in ``s`` (``pt_numerics.log_sinc_sqrt``)."""
    if s < _LOG_SERIES_SQ:
        val = -(s / 6.0 + s**2 / 180.0 + s**3 / 2835.0 + s**4 / 37800.0 + s**5 / 467775.0)
        der = -(1 / 6 + s / 90 + s**2 / 945 + s**3 / 9450 + s**4 / 93555)
        return val, der
    if s < _PI_SQ:
        r = math.sqrt(s)
        sn = math.sin(r)
        return math.log(sn / r), (math.cos(r) / sn - 1.0 / r) / (2.0 * r)
    # the graph's constant -inf branch: no gradient flows through it
    return -np.inf, 0.0


@njit(cache=True, error_model="numpy")
def log_volume_density(c, frame, params, g_c):
    """``log J(c) = (2k-6) log sinc|c| + log sinc(2|c|)``; adds its gradient to ``g_c``."""
    s = 0.0
    for a in range(c.shape[0]):
        s += c[a] * c[a]
    v1, d1 = _log_sinc_sqrt(s)
    v4, d4 = _log_sinc_sqrt(4.0 * s)
    p = params[0]
    fac = 2.0 * (p * d1 + 4.0 * d4)
    for a in range(c.shape[0]):
        g_c[a] += fac * c[a]
    return p * v1 + v4


@njit(cache=True, error_model="numpy", inline="always")
def _exp_coefficients(s):
    """``cos sqrt s``, ``sinc sqrt s`` and their derivatives in ``s`` (the graph's
    ``cos_sqrt``/``sinc_sqrt``, series below ``s = 1e-8``)."""
    if s < _SMALL_SQ:
        return (
            1.0 - s / 2.0 + s * s / 24.0,
            -0.5 + s / 12.0,
            1.0 - s / 6.0 + s * s / 120.0,
            -1.0 / 6.0 + s / 60.0,
        )
    r = math.sqrt(s)
    cs, sn = math.cos(r), math.sin(r)
    return cs, -sn / (2.0 * r), sn / r, (r * cs - sn) / (2.0 * r * s)


@njit(cache=True, error_model="numpy", inline="always")
def _theta_over_sin(q, cc):
    """``w = theta/sin theta`` from ``q = cos^2`` and ``cc = cos`` (the graph's
    ``theta_over_sin(1 - q, c)``) and ``dw/dq`` (``cc = sqrt(q)`` moving with ``q``)."""
    sp = 1.0 - q
    if sp < _SMALL_SQ and cc > 0.0:
        return 1.0 + sp / 6.0 + 3.0 * sp * sp / 40.0, -(1.0 / 6.0 + 3.0 * sp / 20.0)
    r = math.sqrt(sp)
    th = math.atan2(r, cc)
    return th / r, th / (2.0 * r * sp) - 1.0 / (2.0 * sp * cc)


@njit(cache=True, error_model="numpy")
def kng_norm(c, frame, params, data, weight, g_c):
    """``||sum_i log_x(y_i)||`` at ``x = exp_frame(frame, c)`` (module docstring); adds
    ``weight`` times its gradient in ``c`` to ``g_c``."""
    origin, basis = frame
    d = c.shape[0]
    k = origin.shape[0]
    m2 = 2 * k
    n = data.shape[0]
    s = 0.0
    for a in range(d):
        s += c[a] * c[a]
    cs, dcs, sc, dsc = _exp_coefficients(s)
    z0 = np.empty(m2)
    v = np.zeros(m2)
    for j in range(k):
        for e in range(2):
            z0[2 * j + e] = origin[j, e]
            acc = 0.0
            for a in range(d):
                acc += c[a] * basis[a, j, e]
            v[2 * j + e] = acc
    x = np.empty(m2)
    for b in range(m2):
        x[b] = cs * z0[b] + sc * v[b]

    y = np.empty(m2)
    yj = np.empty(m2)  # J y: (-y1, y0) per landmark
    tot = np.zeros(m2)
    rr = np.zeros(m2)
    hh = np.zeros((m2, m2))
    big_s = 0.0
    for i in range(n):
        re = 0.0
        im = 0.0
        for j in range(k):
            y0 = data[i, j, 0]
            y1 = data[i, j, 1]
            y[2 * j] = y0
            y[2 * j + 1] = y1
            yj[2 * j] = -y1
            yj[2 * j + 1] = y0
            re += y0 * x[2 * j] + y1 * x[2 * j + 1]
            im += y1 * x[2 * j] - y0 * x[2 * j + 1]
        q = re * re + im * im
        cc = math.sqrt(q)
        w, dw = _theta_over_sin(q, cc)
        h = w / cc
        dh = dw / cc - w / (2.0 * cc * q)
        big_s += w * cc
        dr = dw * cc + w / (2.0 * cc)  # d(w c)/dq
        p = h * re
        qq = h * im
        # the Jacobian of (h re, h im) in (re, im) and the gradient of w c
        p_re = h + 2.0 * dh * re * re
        mix = 2.0 * dh * re * im
        q_im = h + 2.0 * dh * im * im
        r_re = 2.0 * dr * re
        r_im = 2.0 * dr * im
        for a in range(m2):
            tot[a] += p * y[a] - qq * yj[a]
            rr[a] += r_re * y[a] - r_im * yj[a]
            ua = p_re * y[a] - mix * yj[a]
            va = q_im * yj[a] - mix * y[a]
            for b in range(a, m2):
                hh[a, b] += ua * y[b] + va * yj[b]

    f = 0.0
    for a in range(m2):
        tot[a] -= big_s * x[a]
        f += tot[a] * tot[a]
    f += 1e-300
    norm = math.sqrt(f)
    g = np.empty(m2)
    gx = 0.0
    for a in range(m2):
        g[a] = tot[a] / norm
        gx += g[a] * x[a]
    # the gradient in x, then through the exp chart
    grad_x = np.empty(m2)
    for a in range(m2):
        acc = 0.0
        for b in range(a):
            acc += hh[b, a] * g[b]
        for b in range(a, m2):
            acc += hh[a, b] * g[b]
        grad_x[a] = acc - gx * rr[a] - big_s * g[a]
    gz0 = 0.0
    gv = 0.0
    for b in range(m2):
        gz0 += grad_x[b] * z0[b]
        gv += grad_x[b] * v[b]
    radial = 2.0 * (dcs * gz0 + dsc * gv)
    for a in range(d):
        acc = 0.0
        for j in range(k):
            for e in range(2):
                acc += basis[a, j, e] * grad_x[2 * j + e]
        g_c[a] += weight * (radial * c[a] + sc * acc)
    return norm
