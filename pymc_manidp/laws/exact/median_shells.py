r"""The median KNG envelope on shells around the computed median (``_MedianShells``;
docs/exact.md): along geodesics from it ``|grad F|`` grows at least as fast as the
Hessian comparison allows, each record's turning bounded. It serves
:func:`~pymc_manidp.laws.exact.sample_kng_median` at large ``n·ε``, where cells cannot
follow the law in ``d >= 3``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special

from pymc_manidp.laws.exact.kng_mean import _h
from pymc_manidp.laws.exact.rejection import _ball_cover, _directions, _gamma_interval
from pymc_manidp.stats import reductions
from pymc_manidp.stats.frechet import ConvergenceWarning
from pymc_manidp.stats.median import frechet_median

#: about how many cuts the shells try for records near the computed median
_SHELL_CUTS = 8


def _sin_k(t, kappa):
    """``sin(√κ t)/√κ`` (``t`` where ``κ <= 0``): the comparison space's law of sines."""
    t = np.asarray(t, float)
    if kappa <= 0:
        return t
    k = np.sqrt(kappa)
    return np.sin(np.minimum(k * t, 0.5 * np.pi)) / k


def _shell_best(a, b):
    """Per shell, the terms ``(lam, G, g0, slopes, offsets, log_w)`` of the lower bound
    of smaller mass: each is a lower bound of ``|grad F|`` on the shell, so either is."""
    take = b[-1] < a[-1]
    return tuple(np.where(take, y, x) for x, y in zip(a, b, strict=True))


def _log_shell_mass(d, slope, sigma, lo, hi):
    """``log ∫_lo^hi t^{d-1} e^{-slope t/σ} dt`` per shell (``slope >= 0``; 0: a power)."""
    out = np.empty(len(slope))
    flat = slope <= 0.0
    out[flat] = np.log(hi[flat] ** d - lo[flat] ** d) - np.log(d)
    s = ~flat
    scale = sigma / slope[s]
    a, b = lo[s] / scale, hi[s] / scale
    # the tail that keeps the difference's digits: lower below the mode d, upper above
    lower = special.gammainc(d, b) - special.gammainc(d, a)
    upper = special.gammaincc(d, a) - special.gammaincc(d, b)
    diff = np.where(a < d, lower, upper)
    with np.errstate(divide="ignore"):
        out[s] = special.gammaln(d) + d * np.log(scale) + np.log(np.maximum(diff, 0.0))
    return out


@dataclass
class _MedianShells:
    r"""The median envelope around the computed median ``x_hat`` (large ``n·ε``).

    On the shell ``edges[k] < t <= edges[k+1]`` (``t = ρ(x_hat, x)``, the radius of
    the normal coordinates ``c`` at ``x_hat``): ``|grad F(x)| >= g(t) = G[k] +
    lam[k] (t - edges[k]) - g0`` (:meth:`grad_bound`), and ``β_k(t) = offsets[k] +
    slopes[k] t <= g(t) - σ log J(c)`` with ``slopes >= 0`` (``J`` the chart's volume
    density, ``log J <= G_vol t``); ``log_w[k]`` is the log mass of
    ``e^{-β_k(t)/σ} t^{d-1}`` on the shell.

    Why ``g`` is a lower bound (docs/exact.md). For ``x`` in the ball, ``γ`` the
    unit-speed geodesic from ``x_hat`` to ``x`` (in the convex ball), ``u =
    ρ(x_hat, x)`` and ``φ = F∘γ`` (convex): ``|grad F(x)| >= φ'(u)``, ``φ'(0+) >=
    -g0`` with ``g0 = |U_far(x_hat)| + (weight of the records at x_hat)``, and
    ``φ''(u) >= lam[k]`` on shell ``k``: the Hessian comparison gives ``Hess ρ_i >=
    ct(κ_max, ρ_i) (I - w_i w_i^T)`` (``w_i`` the unit direction to record ``i``;
    records that may be crossed count 0 by convexity), ``ct`` decreases, and
    transported back to ``x_hat`` each ``w_i`` has turned by an angle ``<= u
    |Hess ρ_i|`` (``reductions.turn_rate``), which moves ``I - w_i w_i^T`` by at most
    its sine in operator norm: ``lam = λ_min(Σ_S a_i (I - ũ_i ũ_i^T))/n - Σ_S a_i
    min(1, u c_i)/n`` over a subset ``S`` of the records (the best of a few).
    """

    x_hat: np.ndarray
    edges: np.ndarray
    lam: np.ndarray
    G: np.ndarray
    #: ``-φ'(0+)``'s bound per shell (the first differs where records sit exactly at x_hat)
    g0: np.ndarray
    slopes: np.ndarray
    offsets: np.ndarray
    log_w: np.ndarray

    @classmethod
    def build(cls, M, data, sigma, domain):
        d, r = M.dim, domain.radius
        kappa_min, kappa_max = (float(k) for k in M.curvature_bounds)
        with warnings.catch_warnings():
            # an unconverged median is still a valid center: g0 accounts for it
            warnings.simplefilter("ignore", ConvergenceWarning)
            x_hat = frechet_median(M, data, tol=min(1e-3, 0.05 * sigma)).median
        if not domain.distances(x_hat) <= r:  # the geodesics from x_hat stay in the ball
            x_hat = domain.check(x_hat[None], clip=True)[0]
        # x_hat may be any point of the ball: at a record within zero_distance of it,
        # that record itself (below: records exactly at x_hat are not a worst case)
        n = reductions.n_rows(data)
        rows_at = reductions.rows_per_block(M.point_shape, 1)
        best, nearest = np.inf, None  # block by block: memory O(block), as the slopes
        for s in range(0, n, rows_at):
            rho_b = M.dist(x_hat, data[s : s + rows_at])
            j = int(np.argmin(rho_b))
            if rho_b[j] < best:
                best, nearest = float(rho_b[j]), data[s + j]
        if best <= reductions.zero_distance(M) and domain.distances(nearest) <= r:
            x_hat = np.array(nearest, dtype=float)
        u, _, eta, _, _, _ = reductions.median_terms(M, x_hat[None], data)
        # records bit-identical to x_hat: rho(gamma(u), x_i) = u exactly (unit-speed
        # geodesic from x_i itself, within the injectivity radius), so each adds its
        # weight to φ'(u) for every u > 0 instead of the worst case -weight: all records
        # at one point give g = 1, the law itself (issue 43: the cap at sigma < 0.002)
        point = x_hat.reshape(1, -1)

        def at_x_hat(block):
            return np.all(np.asarray(block, dtype=float).reshape(len(block), -1) == point, axis=1)

        exact_weight = sum(int(at_x_hat(data[s : s + rows_at]).sum()) for s in range(0, n, rows_at))
        exact_weight /= n
        # -φ'(0+) <= |U_far| + (the weight within zero_distance, each turning by <= 1).
        # The gradient drops records within zero_distance of x (reductions.median_terms),
        # so records exactly at x_hat count 0 within twice that distance (rounding of
        # rho) and +1 beyond: g0 per shell, the first shell [0, 2 zero_distance] apart
        g0_near = float(M.norm(x_hat, u[0])) + float(eta[0]) - exact_weight
        g0 = g0_near - exact_weight
        near_edge = 2.0 * reductions.zero_distance(M) if exact_weight > 0 else 0.0
        t_max = min(_ball_cover(M, x_hat, domain), M.injectivity_radius)
        qs = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)

        def records(m):
            """Per block of records: distances and projections ``(b,)``, ``(b, d, d)``
            at ``x_hat``; blocks of the passes' size for ``m`` shells, so that memory
            is O(block × shells), not O(n × shells) (issue 43 item 13)."""
            rows = reductions.rows_per_block(M.point_shape, m)
            for s in range(0, n, rows):
                block = data[s : s + rows]
                coords = M.log_coords(x_hat, block)  # in the chart at x_hat
                # a record exactly at x_hat is counted in g0 (slope exactly +1): its
                # rounded log (SPD: ~1e-17) must not count it as one about to be crossed
                rho = np.where(at_x_hat(block), 0.0, np.linalg.norm(coords, axis=-1))
                off = rho > reductions.zero_distance(M)
                dirs = np.where(off[:, None], coords / np.where(off, rho, 1.0)[:, None], 0.0)
                yield rho, np.eye(d)[None] - dirs[:, :, None] * dirs[:, None, :], dirs

        def slope_on(hi, cut=0.0):
            """``lam``: a lower bound of ``φ''`` on ``[0, hi]`` (per ``hi``, ``(m,)``),
            from the records farther than ``cut`` from ``x_hat`` only."""
            # the sums over the records, per q, added block by block in record order
            A = np.zeros((len(qs), len(hi), d, d))
            moved = np.zeros((len(qs), len(hi)))
            for rho, proj, _ in records(len(hi)):
                # records that cannot be crossed (and, for a cut, are not near x_hat)
                far = (rho[None, :] > hi[:, None]) & (rho[None, :] > cut)
                # in the ball every record is within 2r of every point
                rho_hi = np.minimum(rho[None, :] + hi[:, None], 2.0 * r)
                a_hi = _h(rho_hi, max(kappa_max, 0.0)) / rho_hi  # ct(κ_max) at the far side
                near_side = np.where(far, rho[None, :] - hi[:, None], 1.0)
                turn = reductions.turn_rate(
                    near_side, np.where(far, rho_hi, 1.0), kappa_min, kappa_max
                )
                move = np.minimum(1.0, hi[:, None] * turn)  # sine of the turned angle, bounded
                # any subset of the records gives a bound (each term is >= 0): those that
                # may turn by q or more are left out, for the best of a few q
                for j, q in enumerate(qs):
                    wa = np.where(far & (move <= q), a_hi, 0.0) / n
                    A[j] += np.einsum("mi,ijk->mjk", wa, proj)
                    moved[j] += (wa * move).sum(1)
            best = np.zeros(len(hi))
            for j in range(len(qs)):
                best = np.maximum(best, np.linalg.eigvalsh(A[j])[:, 0] - moved[j])
            # eigvalsh's rounding is a few ulps of |A|: a relative margin absorbs it
            return np.maximum(best - 1e-12 * np.abs(A[-1]).max(axis=(1, 2)), 0.0)

        zd = reductions.zero_distance(M)

        def near_bounds(cuts, lo):
            """``g0`` per cut and shell ``(c, m)`` of the split bound: ``-φ'(u) <=
            |U_far| - (1/n) Σ_near b_i(u)``, ``U_far`` the mean unit vector at ``x_hat``
            of the records farther than the cut, and for a record near it (within the
            cut) ``φ_i'(u) >= b_i(u) = max(-1, 1 - 2 ρ_i/u)`` (convexity: ``φ_i'(u) >=
            (φ_i(u) - φ_i(0))/u``, and ``φ_i(u) >= u - ρ_i``), at most 0 where the
            gradient may drop it (``u < ρ_i + zero_distance``); ``b_i`` increases with
            ``u``: its value at the shell's inner edge ``lo`` holds on the shell."""
            U = np.zeros((len(cuts), d))
            near = np.zeros((len(cuts), len(lo)))
            with np.errstate(divide="ignore", invalid="ignore"):
                for rho, _, dirs in records(len(lo)):
                    is_far = rho[None, :] > cuts[:, None]
                    U += np.einsum("ci,ij->cj", is_far.astype(float), dirs)
                    close = ~is_far.all(axis=0)
                    if not close.any():
                        continue
                    # an upper bound of the true distance (a record at x_hat: 2 zd)
                    up = rho[close] * (1.0 + 1e-9) + 2.0 * zd
                    b = np.where(lo[:, None] > 0, 1.0 - 2.0 * up[None, :] / lo[:, None], -1.0)
                    b = np.maximum(b, -1.0)
                    # the angle at x between the directions to x_hat and to the record is
                    # acute with sine <= s(ρ_i)/s(u) (CAT(κ_max) comparison, sides < r*)
                    ratio = _sin_k(up, kappa_max)[None, :] / _sin_k(lo, kappa_max)[:, None]
                    b = np.maximum(
                        b,
                        np.where(
                            ratio < 1.0,
                            np.sqrt(np.maximum(0.0, 1.0 - ratio**2)) * (1 - 1e-12),
                            -1.0,
                        ),
                    )
                    b = np.where(lo[:, None] < up[None, :] + zd, np.minimum(b, 0.0), b)
                    near += (~is_far[:, close]).astype(float) @ b.T
            g0_far = np.linalg.norm(U / n, axis=1) * (1.0 + 1e-12)
            return g0_far[:, None] - near / n

        def micro_bound(w_e):
            """``|grad F(x)| >=`` this for ``ρ(x_hat, x) <= 2 zd``: the records exactly
            at ``x_hat`` (weight ``w_e``) are all dropped by the gradient at ``x``
            (bit-identical: one computed distance) or all kept, along ``γ'`` then; the
            records within ``4 zd`` of ``x_hat`` (weight ``w_u``) may be either and
            turn any way; the others ``O`` are kept and their mean unit vector moves
            by at most ``T = Σ_O min(2, 2 zd turn_rate)/n`` from ``U_O(x_hat)``. So
            ``|grad F(x)| >= min(a, max(a - w_e, w_e - |U_O| - T - w_u))`` with ``a =
            |U_O| - T - w_u``."""
            U, T, w_u = np.zeros(d), 0.0, 0.0
            for rho, _, dirs in records(1):
                sure = rho > 4.0 * zd
                U += dirs[sure].sum(axis=0)
                w_u += float(np.count_nonzero(~sure))
                rate = reductions.turn_rate(
                    rho[sure] - 2.0 * zd, rho[sure] + 2.0 * zd, kappa_min, kappa_max
                )
                T += float(np.minimum(2.0, 2.0 * zd * rate).sum())
            u_o = float(np.linalg.norm(U / n))
            # the exact records (rho = 0 above) are w_e; rounding of the sums: 1e-12
            w_u = w_u / n - w_e
            a = u_o * (1.0 - 1e-12) - T / n - w_u - 1e-12
            return min(a, max(a - w_e, w_e - u_o * (1.0 + 1e-12) - T / n - w_u - 1e-12))

        # shells growing geometrically from a quarter of the law's scale at x_hat
        lam0 = float(slope_on(np.full(1, 1e-300))[0])
        step = min(sigma / max(lam0, 1e-12) / 4.0, t_max / 64.0)
        tau = [0.0] if near_edge == 0.0 else [0.0, near_edge]
        while tau[-1] < t_max:
            tau.append(min(tau[-1] + step, t_max))
            step *= 1.3
        tau = np.array(tau)
        lam = slope_on(tau[1:])  # valid on the whole shell: the bound at its outer edge
        G = np.concatenate([[0.0], np.cumsum(lam * np.diff(tau))])[:-1]
        g0s = np.full(len(lam), g0)
        if near_edge > 0.0:
            g0s[0] = g0_near
        best = cls._shell_terms(M, sigma, tau, lam, G, g0s)
        # records near x_hat (a tight cluster: its records are crossed within a few of
        # its radii, and the bound above counts them at their value at x_hat, about 0,
        # where the gradient is about their weight beyond; issue 43): the split bound
        # with each of a few cuts, per shell the tightest (docs/exact.md, "near records")
        # |grad F| >= 0: where a bound is below 0 on a whole shell, 0 is tighter
        zero = np.zeros(len(lam))
        best = _shell_best(best, cls._shell_terms(M, sigma, tau, zero, zero, zero))
        if near_edge > 0.0:
            # the micro-ball [0, 2 zd] around records exactly at x_hat: a bound of the
            # norm itself, not of φ' (docs/exact.md, "records exactly at the median")
            micro = zero.copy()
            micro[0] = -micro_bound(exact_weight)
            best = _shell_best(best, cls._shell_terms(M, sigma, tau, zero, zero, micro))
        cuts = cls._cuts(tau, 2.0 * zd)
        if cuts:
            g0_cuts = near_bounds(np.array(cuts), tau[:-1])
            for cut, g0_c in zip(cuts, g0_cuts, strict=True):
                lam_c = slope_on(tau[1:], cut)
                G_c = np.concatenate([[0.0], np.cumsum(lam_c * np.diff(tau))])[:-1]
                best = _shell_best(best, cls._shell_terms(M, sigma, tau, lam_c, G_c, g0_c))
        return cls(x_hat, tau, *best)

    @staticmethod
    def _cuts(tau, floor):
        """The near records' cuts tried: a few shell edges, each above ``floor``."""
        inner = tau[1:][tau[1:] > floor]
        if len(inner) == 0:
            return []
        return list(np.unique(inner[:: max(1, len(inner) // _SHELL_CUTS)]))

    @staticmethod
    def _shell_terms(M, sigma, tau, lam, G, g0s):
        """``(lam, G, g0, slopes, offsets, log_w)`` of the shells for one lower bound
        ``G + lam (t - tau_k) - g0`` of ``|grad F|`` per shell."""
        d = M.dim
        slopes = lam - sigma * M.log_volume_growth  # J <= e^{G_vol t}
        offsets = G - lam * tau[:-1] - g0s - 1e-12  # the rounding of the computed norms
        # a slope too small for a Gamma law (or negative): the shell's minimum, constant
        flat = slopes * tau[1:] / sigma < 1e-6
        low_end = np.where(slopes < 0.0, tau[1:], tau[:-1])
        offsets = np.where(flat, offsets + slopes * low_end, offsets)
        slopes = np.where(flat, 0.0, slopes)
        log_w = -offsets / sigma + _log_shell_mass(d, slopes, sigma, tau[:-1], tau[1:])
        return lam, G, np.asarray(g0s, float), slopes, offsets, log_w

    def grad_bound(self, t):
        """``g(t) <= |grad F(x)|`` at ``t = ρ(x_hat, x)`` ``(m,)``, ``x`` in the ball."""
        t = np.asarray(t, float)
        k = np.clip(np.searchsorted(self.edges, t, side="left") - 1, 0, len(self.lam) - 1)
        return self.G[k] + self.lam[k] * (t - self.edges[k]) - self.g0[k]

    def log_mass(self, M) -> float:
        """Log of the envelope's integral over the normal coordinates at ``x_hat``."""
        d = M.dim
        sphere = np.log(2.0) + 0.5 * d * np.log(np.pi) - special.gammaln(0.5 * d)
        return float(special.logsumexp(self.log_w)) + sphere

    @property
    def flat_share(self) -> float:
        """The share of the envelope's mass on shells where the bound stopped growing."""
        w = np.exp(self.log_w - special.logsumexp(self.log_w))
        return float(w[self.slopes <= 0.0].sum())

    def draw(self, M, m, sigma, rng):
        """``(c, beta)``: ``m`` normal coordinates at ``x_hat`` and the bound there."""
        p = np.exp(self.log_w - special.logsumexp(self.log_w))
        shell = rng.choice(len(p), size=m, p=p)
        t = np.empty(m)
        d = M.dim
        for k in np.unique(shell):
            at = shell == k
            lo, hi, s = self.edges[k], self.edges[k + 1], self.slopes[k]
            if s > 0:
                t[at] = _gamma_interval(d, sigma / s, lo, hi, int(at.sum()), rng)
            else:
                v = rng.random(int(at.sum()))
                t[at] = np.clip((lo**d + v * (hi**d - lo**d)) ** (1.0 / d), lo, hi)
        c = t[:, None] * _directions(rng, m, d)
        return c, self.offsets[shell] + self.slopes[shell] * t
