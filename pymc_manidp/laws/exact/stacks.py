r"""Many data sets at once (issue 26 item 1): one exact draw per data set of the Laplace
(:func:`sample_laplace_stack`) or of KNG on the mean (:func:`sample_kng_stack`), each
row following the single sampler's law, the arithmetic shared across rows.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from pymc_manidp._validation import check_positive_int, check_sigma
from pymc_manidp.laws.exact.kng_mean import _kng_shells
from pymc_manidp.laws.exact.laplace import _laplace_coords, _radial_log_ratio
from pymc_manidp.laws.exact.rejection import (
    _REMEDY,
    DEFAULT_MAX_ATTEMPTS,
    ExactSamplingError,
    _ball_cover,
    _check_domain,
    _check_exact_manifold,
    _check_max_attempts,
    _directions,
    _proposal_points,
)
from pymc_manidp.rng import as_generator
from pymc_manidp.stats.frechet import frechet_means

# many data sets at once: log maps (numbers of a point) a round of proposals may hold
_STACK_LOG_MAPS = 1_000_000


def _row_random(rng, R):
    """``(generator, None)`` for one random source shared by the ``R`` rows, or
    ``(None, generators)`` for a sequence of ``R`` sources, one per row."""
    if isinstance(rng, (list, tuple)):
        if len(rng) != R:
            raise ValueError(f"give one random source per data set: {R} expected, got {len(rng)}")
        return None, [as_generator(g) for g in rng]
    return as_generator(rng), None


def _first_accepted(ok, k_rows):
    """Per row (its proposals a segment of ``ok`` of length ``k_rows[i]``, in order):
    whether one was accepted, the flat index of the first one, and the proposals used
    (up to it, or all of the segment)."""
    starts = np.concatenate([[0], np.cumsum(k_rows)[:-1]])
    idx = np.where(ok, np.arange(len(ok)), len(ok))
    first = np.minimum.reduceat(idx, starts)
    has = first < starts + k_rows
    return has, first, np.where(has, first - starts + 1, k_rows)


def _widths(single, accepted, proposed, rounds, cap=64):
    """Proposals per pending row this round. One shared source: from the acceptance so
    far over all rows. One source per row: from the row's own rounds only (2, 4, 8,
    ...), so that what a row draws does not depend on the other rows."""
    if single:
        rate = max((accepted + 0.5) / (proposed + 1.0), 1e-3)
        return np.full(len(rounds), int(min(cap, max(1, np.ceil(1.0 / rate)))))
    return np.minimum(cap, 2 ** (rounds + 1))


def _uniforms(g, gens, rows, k_rows, cols):
    """Uniforms ``(sum(k_rows), cols)`` on [0, 1): from the shared source, or each row's
    block from its own source."""
    if gens is None:
        return g.random((int(k_rows.sum()), cols))
    return np.concatenate([gens[j].random((k, cols)) for j, k in zip(rows, k_rows, strict=True)])


def _row_directions(g, gens, rows, k_rows, d):
    """Uniform directions ``(sum(k_rows), d)`` (normalized standard normals), from the
    shared source or each row's block from its own."""
    if gens is None:
        return _directions(g, int(k_rows.sum()), d)
    return np.concatenate([_directions(gens[j], k, d) for j, k in zip(rows, k_rows, strict=True)])


def _row_coords(M, sigma, g, gens, rows, k_rows, t_max, max_attempts, what):
    """Normal coordinates of the Laplace law with scale ``sigma``, ``k_rows[i]`` for row
    ``rows[i]``, truncated to ``t_max[row]`` (or the largest of them with one source)."""
    if gens is None:
        top = None if t_max is None else float(np.max(t_max[rows]))
        return _laplace_coords(M, sigma, int(k_rows.sum()), g, top, max_attempts, what)[0]
    return np.concatenate(
        [
            _laplace_coords(
                M, sigma, k, gens[j], None if t_max is None else t_max[j], max_attempts, what
            )[0]
            for j, k in zip(rows, k_rows, strict=True)
        ]
    )


def sample_laplace_stack(
    M, footpoints, sigma, rng=None, *, domain=None, max_attempts=DEFAULT_MAX_ATTEMPTS
):
    r"""One exact draw of the manifold Laplace at each of ``R`` footpoints, at once.

    Row ``j`` of the result follows the law of :func:`sample_laplace` at
    ``footpoints[j]`` (size 1), independently of the other rows: the normal
    coordinates of all rows are drawn in one call of the radial sampler (the law is
    isotropic and the same at every footpoint) and mapped through each row's
    exponential chart. Restricted (``domain``): each row proposes from the law
    truncated to ``B_T(η_j)``, ``T = ρ(η_j, m0) + r`` (with one shared random source
    the largest ``T`` of the rows: a ball containing ``B_r(m0)`` for every row, so the
    law kept inside the ball is the same), and keeps its first proposal inside
    ``B_r(m0)``.

    Parameters
    ----------
    M : Manifold
        The manifold, with an exact sampler.
    footpoints : array, shape ``(R, *point_shape)``
        The footpoints ``η_j``.
    sigma : float
        The scale ``σ > 0`` (the same for every row).
    rng : Generator, int, None, or a sequence of them
        Random source: one for all rows, or one per row (a row then draws from its own
        source only, so its value does not depend on the other rows).
    domain : DataDomain, optional
        Restrict each law to ``B_r(m0)``.
    max_attempts : int
        Cap on proposals per row.

    Returns
    -------
    points : ndarray, shape ``(R, *point_shape)``
    proposals : ndarray of int, shape ``(R,)``
        Proposals each row used (1 without ``domain``).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> feet = S.exp_coords([0.0, 0.0, 1.0], np.zeros((4, 2)))
    >>> pts, used = sample_laplace_stack(S, feet, 0.05, rng=0)
    >>> pts.shape, used.tolist()
    ((4, 3), [1, 1, 1, 1])
    """
    _check_exact_manifold(M)
    feet = M.validate(footpoints)
    if feet.ndim != len(M.point_shape) + 1:
        raise ValueError(f"footpoints must have shape (R, {M.point_shape}), got {feet.shape}")
    sigma = check_sigma(sigma)
    max_attempts = _check_max_attempts(max_attempts)
    domain = _check_domain(M, domain)
    R = len(feet)
    g, gens = _row_random(rng, R)
    if domain is None:
        c = _row_coords(M, sigma, g, gens, np.arange(R), np.ones(R, int), None, max_attempts, None)
        return _proposal_points(M, feet, c, "the Laplace sampler"), np.ones(R, int)
    what = f"the restricted Laplace on {M} (ball of radius {domain.radius:.6g})"
    t_max = np.array([_ball_cover(M, f, domain) for f in feet])
    out = np.empty_like(feet)
    used, rounds = np.zeros(R, int), np.zeros(R, int)
    pending = np.ones(R, bool)
    accepted = proposed = 0
    while pending.any():
        rows = np.flatnonzero(pending)
        if used[rows].max() >= max_attempts:
            raise ExactSamplingError(
                f"{what}: a data set's draw was not accepted after {max_attempts} "
                f"proposals. {_REMEDY}"
            )
        k_rows = _widths(gens is None, accepted, proposed, rounds[rows])
        rep = np.repeat(rows, k_rows)
        c = _row_coords(M, sigma, g, gens, rows, k_rows, t_max, max_attempts, what)
        x = _proposal_points(M, feet[rep], c, what)
        has, first, n_used = _first_accepted(domain.distances(x) <= domain.radius, k_rows)
        used[rows] += n_used
        rounds[rows] += 1
        out[rows[has]] = x[first[has]]
        pending[rows[has]] = False
        accepted += int(has.sum())
        proposed += int(n_used.sum())
    return out, used


def _stack_grad_norms(M, x, data):
    """``|grad F_j(x_j)| = |(1/n) Σ_i log_{x_j}(x_{ji})|`` for proposals ``x`` ``(m,
    *shape)`` and their data sets ``data`` ``(m, n, *shape)``."""
    g, _ = M.stack_frechet_gradient(x, data)
    return M.norm(x, g)


def _gamma_shells(d, scale, lo, hi, u):
    """``Gamma(d, scale)`` conditioned on ``lo < t <= hi``, elementwise, from uniforms
    ``u`` on [0, 1).

    Inverse CDF: the lower tail (``gammaincinv``) on shells that start at 0, the upper
    tail (``gammainccinv``) on the others, each accurate where its shells lie (the same
    two formulas as :func:`_gamma_truncated` and :func:`_gamma_interval`).
    """
    t = np.empty(len(scale))
    first = lo <= 0.0
    if first.any():
        s, h = scale[first], hi[first]
        p = special.gammainc(d, h / s)
        t[first] = np.minimum(s * special.gammaincinv(d, u[first] * p), h)
    rest = ~first
    if rest.any():
        s, lo_r, hi_r = scale[rest], lo[rest], hi[rest]
        q_lo = special.gammaincc(d, lo_r / s)
        q_hi = np.where(np.isfinite(hi_r), special.gammaincc(d, hi_r / s), 0.0)
        v = q_hi + u[rest] * (q_lo - q_hi)
        t[rest] = np.clip(s * special.gammainccinv(d, v), lo_r, hi_r)
    return t


def sample_kng_stack(M, data, sigma, rng=None, *, n, domain, max_attempts=DEFAULT_MAX_ATTEMPTS):
    r"""One exact draw of KNG (Fréchet mean) for each of ``R`` data sets, at once.

    The data sets are given end to end, ``data[j*n:(j+1)*n]`` the ``j``-th: records
    are checked as records (one pass, named by row; an array this check already
    returned is not checked again). Row ``j`` of the result follows the law of
    :func:`sample_kng` for data set ``j`` (size 1): the same envelope (the computed
    mean ``x̂_j``, from :func:`~pymc_manidp.stats.frechet.frechet_means`, its error
    bound ``e_j``, the shells of ``_kng_shells`` on positively curved spaces, the
    Laplace at ``x̂_j`` with scale ``σ/H`` elsewhere) and the same acceptance ratio
    ``exp(-(|grad F_j(x)| - g_j(t))/σ)``, each row keeping its first accepted
    proposal. What is shared across rows is only the arithmetic: one array pass per
    round of proposals, for all rows still pending. On the shells, ``t`` is drawn by
    the inverse CDF on every shell (the single sampler draws the first shell by plain
    rejection when it holds most of the mass: the same law). Without curvature, the
    envelope's truncation ball is the largest of the pending rows' ``B_T(x̂_j)`` (each
    contains ``B_r(m0)``, outside of which nothing is kept: the same law); with one
    source per row, each row's own.

    Parameters
    ----------
    M : Manifold
        The manifold, with an exact sampler.
    data : array, shape ``(R * n, *point_shape)``
        ``R`` data sets of ``n`` records each, end to end, all inside ``domain``.
    sigma : float
        KNG's scale ``2Δ/ε`` (the same ``n`` for every data set, so the same σ).
    rng : Generator, int, None, or a sequence of them
        Random source: one for all rows, or one per row (a row then draws from its own
        source only, so its value does not depend on the other rows).
    n : int
        Records per data set.
    domain : DataDomain
        The public ball ``B_r(m0)``.
    max_attempts : int
        Cap on proposals per row.

    Returns
    -------
    points : ndarray, shape ``(R, *point_shape)``
    proposals : ndarray of int, shape ``(R,)``
        Envelope proposals each row used (for the curator: they depend on the data).

    Raises
    ------
    ExactSamplingError
        A row hit the cap, or a proposal violated the bound (nothing is released).

    Examples
    --------
    >>> import pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> dom = pmd.DataDomain(S, [0.0, 0.0, 1.0], np.pi / 8)
    >>> noise = np.random.default_rng(0).normal(size=(3 * 50, 2)) * 0.1
    >>> data = S.exp_coords([0.0, 0.0, 1.0], noise)  # 3 data sets of 50 records
    >>> pts, used = sample_kng_stack(S, data, 0.05, rng=1, n=50, domain=dom)
    >>> pts.shape, bool((used >= 1).all())
    ((3, 3), True)
    """
    _check_exact_manifold(M)
    if domain is None:
        raise ValueError("KNG's law lives on the public ball: pass domain=DataDomain(...)")
    domain = _check_domain(M, domain)
    n = check_positive_int(n, "n")
    data = domain.check(data)
    if len(data) % n:
        raise ValueError(f"{len(data)} records do not split into data sets of n = {n}")
    stack = np.asarray(data).reshape((len(data) // n, n, *M.point_shape))
    return _sample_kng_checked_stack(
        M, stack, check_sigma(sigma), rng, domain, _check_max_attempts(max_attempts)
    )


def _sample_kng_checked_stack(M, stack, sigma, rng, domain, max_attempts):
    """:func:`sample_kng_stack` for a stack already checked against ``domain``."""
    R, n = stack.shape[:2]
    g, gens = _row_random(rng, R)
    r, H, d = domain.radius, domain.curvature_factor, M.dim
    what = f"KNG's exact sampler on {M}"
    res = frechet_means(M, stack, tol=1e-12, atol=1e-3 * sigma * H, warn=False)
    x_hat, g_hat = res.means, res.grad_norms
    out_ball = ~(domain.distances(x_hat) <= r)
    for j in np.flatnonzero(out_ball):  # Lemma 1 needs x_hat in the ball
        x_hat[j] = domain.check(x_hat[j][None], clip=True)[0]
        g_hat[j] = float(_stack_grad_norms(M, x_hat[j][None], stack[j][None])[0])
    # as _KNGEnvelope._build: the space's rounding bound eta enters twice
    e = np.minimum((g_hat + 2.0 * domain.rounding_error) / H, 2.0 * r) + 1e-12 * r
    t_max = np.array([min(_ball_cover(M, x, domain), M.injectivity_radius) for x in x_hat])
    curved = M.curvature_bounds[1] > 0
    if curved:  # the shells of each row, padded to one table (zero weight beyond)
        rho = np.minimum(M.dist(np.expand_dims(x_hat, 1), stack), 2.0 * r)
        shells = []
        for j in range(R):
            rho_j, w_j = rho[j], None
            if n > 4 * 1024:  # as reductions.distance_profile: a histogram's upper edges
                edges = np.linspace(0.0, 2.0 * r, 1024 + 1)
                rho_j, w_j = edges[1:], np.histogram(rho[j], bins=edges)[0] / n
            shells.append(_kng_shells(M, sigma, H, r, rho_j, e[j], t_max[j], rho_weights=w_j))
        K = max(len(s[1]) for s in shells)
        edges = np.full((R, K + 1), np.inf)
        slopes, offsets, cum = np.ones((R, K)), np.zeros((R, K)), np.ones((R, K))
        for j, (ed, sl, of, lw) in enumerate(shells):
            k = len(sl)
            edges[j, : k + 1], slopes[j, :k], offsets[j, :k] = ed, sl, of
            w = np.exp(lw - np.max(lw))
            cum[j, :k] = np.cumsum(w / w.sum())
            cum[j, k - 1 :] = 1.0  # the rounding of the sum must not leave a gap at the top
    used, rounds = np.zeros(R, int), np.zeros(R, int)
    out = np.empty((R, *M.point_shape))
    pending = np.ones(R, bool)
    accepted = proposed = 0
    # proposals per round: each gradient is a pass over its row's n records
    row_cap = max(1, _STACK_LOG_MAPS // (n * int(np.prod(M.point_shape))))
    while pending.any():
        rows = np.flatnonzero(pending)[:row_cap]
        if used[rows].max() >= max_attempts:
            raise ExactSamplingError(
                f"{what}: a data set's draw was not accepted after {max_attempts} "
                f"proposals. {_REMEDY}"
            )
        k_rows = _widths(gens is None, accepted, proposed, rounds[rows])
        if gens is None:  # the round's size stays within the cap
            k_rows = np.minimum(k_rows, max(1, row_cap // len(rows)))
        rep = np.repeat(rows, k_rows)
        m = len(rep)
        if curved:
            # per proposal: shell, radius, the volume step, direction (each row's block
            # from its own source when there is one per row)
            U = _uniforms(g, gens, rows, k_rows, 3)
            # the first shell whose cumulative weight reaches u, u uniform on (0, 1]: a
            # shell of zero weight is never chosen (as rng.choice(p=weights) would not)
            shell = (cum[rep] < (1.0 - U[:, 0])[:, None]).sum(axis=1)
            lo, hi = edges[rep, shell], edges[rep, shell + 1]
            t = _gamma_shells(d, sigma / slopes[rep, shell], lo, hi, U[:, 1])
            ok = U[:, 2] < np.exp(_radial_log_ratio(M, t))
            c = t[:, None] * _row_directions(g, gens, rows, k_rows, d)
            bound = offsets[rep, shell] + slopes[rep, shell] * t
        else:
            c = _row_coords(M, sigma / H, g, gens, rows, k_rows, t_max, max_attempts, what)
            bound = H * (np.linalg.norm(c, axis=-1) - e[rep])
            ok = np.ones(m, bool)
        x = _proposal_points(M, x_hat[rep], c, what)
        ok &= domain.distances(x) <= r
        accept_u = _uniforms(g, gens, rows, k_rows, 1)[:, 0]  # KNG's ratio step
        idx = np.flatnonzero(ok)
        if len(idx):
            gn = _stack_grad_norms(M, x[idx], stack[rep[idx]])
            log_ratio = -(gn - bound[idx]) / sigma
            if np.any(log_ratio > 0):
                raise ExactSamplingError(
                    "a proposal violated the KNG envelope bound (2022 Lemma 1) by "
                    f"{float(log_ratio.max() * sigma):.3g}: a premise (data in the ball, "
                    "r < r*) failed at working precision, so nothing is released"
                )
            ok[idx] = accept_u[idx] < np.exp(log_ratio)
        has, first, n_used = _first_accepted(ok, k_rows)
        used[rows] += n_used
        rounds[rows] += 1
        out[rows[has]] = x[first[has]]
        pending[rows[has]] = False
        accepted += int(has.sum())
        proposed += int(n_used.sum())
    return out, used
