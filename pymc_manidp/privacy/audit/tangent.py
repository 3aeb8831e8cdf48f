r"""The quadrature audit in the tangent chart: tangent Gaussian and K-norm releases.

A tangent mechanism (``pmd.TangentGaussianMechanism``, ``pmd.TangentLaplaceMechanism``)
publishes ``u = E_p^T Log_p(x_bar) + Z`` in ``R^d``: its law, given a dataset ``D``,
is the known density ``f_D(u) = f(u - g(D))`` with ``g(D) = E_p^T Log_p x_bar(D)``.
The audit computes ``g`` for both datasets of each neighbouring pair, normalizes both
densities by a midpoint rule on a box of ``R^d`` centered at each one's mode (as the
manifold audit does for unrestricted laws), and reads off

- **K-norm** (pure ε): the privacy loss ``sup_u |log f_D(u) - log f_D'(u)|`` over the
  nodes of both grids and probes on the line through ``g(D)`` and ``g(D')`` (where it
  peaks), against ε;
- **Gaussian** ((ε, δ) and μ-GDP): the privacy loss is unbounded, so its *privacy
  profile* ``delta_hat(eps) = max over the two orders of int (f_D - e^eps f_D')_+ du``
  is integrated on the grid and compared with the claimed δ at the mechanism's ε, and
  with the μ-GDP profile ``gaussian_delta(eps, mu)`` on a grid of ε (the μ the budget
  composes).

Either verdict counts the quadrature error (the change when the grid is halved). The
pair search is :func:`neighbour_pairs`, as for the manifold audit.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from pymc_manidp._validation import check_positive_int
from pymc_manidp.privacy.audit import _cost
from pymc_manidp.privacy.audit.neighbours import (
    NeighbourPair,
    as_pairs,
    audited_epsilon,
    neighbour_pairs,
)
from pymc_manidp.stats.gaussian import gaussian_delta

__all__ = ["TANGENT_PROFILE_EPSILONS", "TangentAuditResult", "tangent_audit"]

#: The ε at which a Gaussian's numerical profile is held against its μ-GDP profile
#: (besides the mechanism's own ε).
TANGENT_PROFILE_EPSILONS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)

# Box half-widths in units of sigma. Gaussian: the mass outside [-10, 10] per axis is
# 1.5e-23, far below any delta the audit can resolve. K-norm: P(|Z| > 40 sigma) is
# below 1e-14 for d <= 3 (Gamma(d, 1) tail).
_HALF_WIDTH = {"gaussian": 10.0, "k-norm": 40.0}
# Nodes along g - g' per node across: the Gaussian's hockey-stick integrand has its
# kink across that axis (the midpoint rule's error there is O(h^2), elsewhere it is
# spectrally small for these smooth, fast-decaying integrands)
_ALONG = {"gaussian": 8, "k-norm": 1}
# ray probes beyond each mode, in units of sigma: the K-norm loss is |g - g'|/sigma on
# the whole ray from g away from g' (and the reverse), which a grid node misses
_RAY = (0.0, 0.5, 1.0, 2.0, 5.0)


@dataclass(frozen=True)
class TangentAuditResult:
    """Figures of a tangent-chart quadrature audit.

    Attributes
    ----------
    mechanism, manifold, noise : str
        ``noise`` is ``"gaussian"`` or ``"k-norm"``.
    epsilon : float
        The claimed ε.
    delta : float
        The claimed δ (0 for K-norm).
    n : int
    worst : float
        K-norm: the largest ``sup |log f_D - log f_D'|`` over the pairs. Gaussian: the
        largest ``delta_hat(epsilon)``.
    ratio : float
        ``worst / epsilon`` (K-norm) or ``worst / delta`` (Gaussian).
    grid_error : float
        ``|fine - coarse|`` of ``worst`` for its pair.
    profile : tuple of (eps, delta_hat, delta_mu)
        Gaussian only: the worst pair's numerical profile and the μ-GDP one at
        :data:`TANGENT_PROFILE_EPSILONS` (μ = ``mech.mu(n)``).
    resolution : int
        Nodes per axis of the fine grid.
    pair : NeighbourPair
        The worst pair.
    pairs_tried : int
    passed : bool
        ``worst + grid_error <= epsilon`` (K-norm); ``delta_hat + grid_error <= delta``
        at ε and below the μ-GDP profile at every profile ε (Gaussian).
    """

    mechanism: str
    manifold: str
    noise: str
    epsilon: float
    delta: float
    n: int
    worst: float
    ratio: float
    grid_error: float
    resolution: int
    pair: NeighbourPair
    pairs_tried: int
    passed: bool
    profile: tuple = field(default=(), repr=False)

    def summary(self) -> str:
        """One paragraph in words: the verdict and the worst pair."""
        verdict = "PASSED" if self.passed else "FAILED"
        if self.noise == "gaussian":
            what = (
                f"(eps, delta) = ({self.epsilon:g}, {self.delta:.3g}), worst delta_hat(eps) "
                f"= {self.worst:.4g} ± {self.grid_error:.2g} (quadrature), ratio to delta "
                f"{self.ratio:.3f}"
            )
        else:
            what = (
                f"eps = {self.epsilon:g}, worst sup|log f_D - log f_D'| = {self.worst:.4g} "
                f"± {self.grid_error:.2g} (quadrature), ratio to eps {self.ratio:.3f}"
            )
        return (
            f"tangent-chart audit of {self.mechanism} on {self.manifold}, n = {self.n}: "
            f"{what}; worst of {self.pairs_tried} pairs: '{self.pair.label}'; grid "
            f"{self.resolution}^d: {verdict}"
        )


def _noise(mech) -> str:
    noise = getattr(mech, "noise", None)
    if noise not in _HALF_WIDTH or not hasattr(mech, "mean_coords"):
        raise TypeError(
            f"tangent_audit needs a tangent mechanism (pmd.TangentGaussianMechanism or "
            f"pmd.TangentLaplaceMechanism), got {type(mech).__name__}: audit a manifold "
            "law with quadrature_audit"
        )
    if hasattr(mech, "coarse"):
        raise TypeError(
            f"tangent_audit audits one tangent release at a fixed point; {_label(mech)} "
            "draws its point from the data first (two stages, composed by basic "
            "composition): audit its stages, mech.coarse (tangent Laplace) and a "
            "pmd.TangentGaussianMechanism at epsilon_2, separately"
        )
    return noise


def _label(mech) -> str:
    return getattr(mech, "name", type(mech).__name__)


def _frame(shift):
    """An orthonormal basis whose first vector is along ``shift`` (any if zero)."""
    d = len(shift)
    length = float(np.linalg.norm(shift))
    e = shift / length if length > 0 else np.eye(d)[0]
    q, _ = np.linalg.qr(np.column_stack([e, np.eye(d)]))
    return q[:, :d] * np.sign(q[:, :1].T @ e)[0] if d else q


def _box(center, sigma, half_width, nodes, frame, along=1):
    """Midpoint nodes of the cube ``center ± half_width sigma`` with axes ``frame``,
    and the log weight of each (one number: the rule is uniform).

    The first axis is along ``g - g'``: both laws are isotropic, so the privacy loss
    varies only along it, and the hockey-stick integrand's kink (where the loss
    crosses ε) lies on a hyperplane of the grid's orientation, not across its cells
    at a slant (which costs the midpoint rule much more accuracy)."""
    d = len(center)
    h = 2.0 * half_width * sigma / nodes
    axis = (np.arange(nodes) + 0.5) * h - half_width * sigma
    h1 = h / along
    first = (np.arange(nodes * along) + 0.5) * h1 - half_width * sigma
    mesh = np.stack(np.meshgrid(first, *([axis] * (d - 1)), indexing="ij"), -1).reshape(-1, d)
    return center + mesh @ frame.T, math.log(h1) + (d - 1) * math.log(h)


def _logf(noise, u, center, sigma):
    r = np.linalg.norm(u - center, axis=-1)
    return -0.5 * (r / sigma) ** 2 if noise == "gaussian" else -r / sigma


def _pair_figures(noise, g, g2, sigma, nodes, epsilons):
    """K-norm: ``(loss,)``; Gaussian: ``delta_hat`` at each of ``epsilons``."""
    half = _HALF_WIDTH[noise]
    frame = _frame(g - g2)
    along = _ALONG[noise]
    (ua, lw), (ub, _) = (_box(c, sigma, half, nodes, frame, along) for c in (g, g2))
    a_a, b_b = _logf(noise, ua, g, sigma), _logf(noise, ub, g2, sigma)
    za, zb = special.logsumexp(a_a + lw), special.logsumexp(b_b + lw)
    if noise == "k-norm":
        e = frame[:, 0]
        ray = np.array(_RAY)[:, None] * sigma * e
        probes = np.concatenate([g + ray, g2 - ray])
        a = np.concatenate([a_a, _logf(noise, ub, g, sigma), _logf(noise, probes, g, sigma)])
        b = np.concatenate([_logf(noise, ua, g2, sigma), b_b, _logf(noise, probes, g2, sigma)])
        return (float(np.max(np.abs((a - za) - (b - zb)))),)
    # hockey-stick divergences, both orders, each on the grid at its own mode
    la, lb_on_a = a_a + lw - za, _logf(noise, ua, g2, sigma) + lw - zb
    lb, la_on_b = b_b + lw - zb, _logf(noise, ub, g, sigma) + lw - za
    out = []
    for eps in epsilons:
        d1 = np.sum(np.clip(np.exp(la) - np.exp(eps + lb_on_a), 0.0, None))
        d2 = np.sum(np.clip(np.exp(lb) - np.exp(eps + la_on_b), 0.0, None))
        out.append(float(max(d1, d2)))
    return tuple(out)


def tangent_audit(
    mech,
    pairs=None,
    *,
    n: int = 10,
    epsilon=None,
    resolution: int = 64,
    random_seed=0,
    max_bytes=None,
) -> TangentAuditResult:
    """Quadrature audit of a tangent mechanism's release ``u`` in ``T_pM``.

    Parameters
    ----------
    mech : TangentGaussianMechanism or TangentLaplaceMechanism
        Duck-typed: ``manifold``, ``domain``, ``epsilon``, ``noise``
        (``"gaussian"``/``"k-norm"``), ``sigma(n)``, ``mean_coords(data)``, and for
        the Gaussian ``delta`` and ``mu(n)``.
    pairs : iterable of NeighbourPair or (data, neighbour), optional
        Default: :func:`neighbour_pairs` of ``mech.domain`` with ``n`` records.
    n : int
        Records per dataset for the default pairs.
    epsilon : float, optional
        The ε to audit against (default ``mech.epsilon``).
    resolution : int
        Midpoint nodes per axis of the fine grid (even, ``>= 8``); the error estimate
        halves it. The grid has ``resolution^d`` nodes.
    random_seed : int, Generator or None
        Source of the default pairs' random directions (public).
    max_bytes : float, optional
        Memory the audit may take (default: half of this machine's memory).

    Returns
    -------
    TangentAuditResult
        The largest privacy loss (K-norm) or privacy profile (Gaussian) found over the
        pairs (``worst``), its grid error, and ``passed``: whether the mechanism's
        claim survives.

    Raises
    ------
    TypeError
        ``mech`` is not a tangent mechanism; ``resolution`` not an int.
    ValueError
        A bad ``resolution``/``epsilon``, non-neighbouring pairs, or a grid whose
        memory exceeds ``max_bytes`` (refused before anything is built).

    Examples
    --------
    >>> import numpy as np, pymc_manidp as pmd
    >>> from pymc_manidp.privacy import boundary_pair
    >>> mech = pmd.TangentLaplaceMechanism(pmd.Sphere(dim=2), epsilon=1.0,
    ...                                    center=[0, 0, 1.0], radius=np.pi / 8)
    >>> res = tangent_audit(mech, boundary_pair(mech.domain, 10))
    >>> res.passed, res.ratio < 1
    (True, True)
    """
    noise = _noise(mech)
    M = mech.manifold
    eps = audited_epsilon(mech, epsilon)
    if isinstance(resolution, bool) or not isinstance(resolution, numbers.Integral):
        raise TypeError(f"resolution must be an int, got {type(resolution).__name__}")
    nodes = check_positive_int(resolution, "resolution", minimum=8)
    if nodes % 2:
        raise ValueError(
            f"resolution must be even (the error estimate halves it), got {nodes}: use {nodes + 1}"
        )
    d = int(M.dim)
    limit = _cost.memory_limit(max_bytes)
    # two grids of nodes^d points (d coordinates) and about 8 arrays of log densities
    along = _ALONG[noise]
    nbytes = _cost.nbytes_of(8, along, nodes**d, 2 * d + 8)
    if nbytes > limit:
        top = _cost.largest(lambda k: _cost.nbytes_of(8, along, k**d, 2 * d + 8) <= limit, 8, nodes)
        _cost.refuse(
            f"the tangent-chart audit ({nodes}^{d} grid)",
            nbytes,
            None,
            limit,
            _cost.time_limit(),
            f"choose resolution <= {top - top % 2}",
        )
    delta = float(getattr(mech, "delta", 0.0)) if noise == "gaussian" else 0.0
    if pairs is None:
        pairs = neighbour_pairs(mech.domain, check_positive_int(n, "n"), random_seed=random_seed)
    pairs = as_pairs(M, pairs)
    epsilons = (eps, *TANGENT_PROFILE_EPSILONS) if noise == "gaussian" else ()
    best = None
    for p in pairs:
        size = len(p.data)
        sigma = float(mech.sigma(size))
        g, g2 = (np.asarray(mech.mean_coords(x), float) for x in (p.data, p.neighbour))
        fine = _pair_figures(noise, g, g2, sigma, nodes, epsilons)
        coarse = _pair_figures(noise, g, g2, sigma, nodes // 2, epsilons)
        errs = tuple(abs(f - c) for f, c in zip(fine, coarse, strict=True))
        if noise == "gaussian":
            mu = float(mech.mu(size))
            ref = [gaussian_delta(e, mu) for e in TANGENT_PROFILE_EPSILONS]
            # refuted only beyond the quadrature error: the analytic Gaussian is exact,
            # so a pair attaining Delta_T (L = 1, the boundary pair) meets delta to
            # within rounding, which no grid can certify from below
            ok = fine[0] - errs[0] <= delta and all(
                f - e <= r for f, e, r in zip(fine[1:], errs[1:], ref, strict=True)
            )
            profile = tuple(zip(TANGENT_PROFILE_EPSILONS, fine[1:], ref, strict=True))
            score = (not ok, fine[0] / delta)
        else:
            ok, profile = fine[0] + errs[0] <= eps, ()
            score = (not ok, fine[0] / eps)
        if best is None or score > best[0]:
            best = (score, p, fine[0], errs[0], ok, profile)
    _, pair, worst, err, ok, profile = best
    return TangentAuditResult(
        mechanism=_label(mech),
        manifold=repr(M),
        noise=noise,
        epsilon=eps,
        delta=delta,
        n=len(pair.data),
        worst=worst,
        ratio=worst / (delta if noise == "gaussian" else eps),
        grid_error=err,
        resolution=nodes,
        pair=pair,
        pairs_tried=len(pairs),
        passed=ok,
        profile=profile,
    )
