r"""Estimated δ for MCMC releases: L-lag couplings bound the chain's distance to its target.

An MCMC release is (ε, δ)-DP with :math:`\delta = (1 + e^\varepsilon)\,\gamma` when the
released draw's law :math:`\pi_t` is within total variation :math:`\gamma` of the
mechanism's law :math:`\pi`. This module estimates an upper bound on
:math:`\gamma = \mathrm{TV}(\pi_t, \pi)` by the L-lag couplings of Biswas, Jacob &
Vanetti (2019): run pairs of chains :math:`(X, Y)` from the same initial law
:math:`\pi_0`, ``X`` first alone for ``L`` steps, then both with a *coupled* kernel
built so that, once :math:`X_\tau = Y_{\tau - L}`, they stay equal. With the meeting
time :math:`\tau` (the first such time),

.. math:: \mathrm{TV}(\pi_t, \pi) \le
          \mathbb E\Big[\max\Big(0, \Big\lceil \frac{\tau - L - t}{L} \Big\rceil\Big)\Big],

and the average over ``R`` independent pairs estimates the right-hand side, with a
Monte Carlo standard error (:func:`tv_bound`). The bound holds for the kernel that was
coupled, run with fixed settings from :math:`\pi_0`: a release whose value is a draw of
*that* chain at time ``t`` (:func:`draw_chain`) carries
:math:`\hat\delta = (1 + e^\varepsilon)\,\widehat{\mathrm{TV}}` (:func:`estimate_delta`).
It is an estimate with error bars, not a proof: see ``docs/mechanisms.md``.

Coupled kernels (Jacob, O'Leary & Atchadé 2020), on the model's unconstrained space,
every pair run side by side as rows of one NumPy batch:

- :class:`RWMH`: random-walk Metropolis with Gaussian proposals, coupled by the
  reflection-maximal coupling (the proposals coincide with the largest possible
  probability, otherwise mirror each other) and a shared accept/reject uniform.
- :class:`HMC`: Hamiltonian Monte Carlo with fixed step size and number of leapfrog
  steps, coupled by common random numbers (the same momentum, the same uniform),
  which contracts the pair without ever making it meet exactly; with probability
  ``mh_prob`` a step is instead a reflection-maximal RWMH step with a small proposal
  scale, which makes close chains meet.

The target is any ``pm.Model`` (:class:`BatchTarget`): its joint log-density with the
Jacobians of its transforms, the gradient, and any deterministic, as PyTensor graphs
vectorized over a batch of raveled unconstrained points (``DictToArrayBijection``'s
order), compiled once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pymc_manidp.geometry.validation import check_positive_int, check_positive_real
from pymc_manidp.rng import as_generator

__all__ = [
    "HMC",
    "RWMH",
    "BatchTarget",
    "CouplingError",
    "DeltaEstimate",
    "TVBound",
    "coupled_release",
    "delta_from_tv",
    "draw_chain",
    "estimate_delta",
    "initial_law",
    "meeting_times",
    "plot_tv_bound",
    "reflection_maximal",
    "tune_kernel",
    "tv_bound",
]

DELTA_ESTIMATE_NOTE = (
    "estimated, not proven: delta_hat = (1 + e^epsilon) * TV_hat, TV_hat the L-lag "
    "coupling estimate (Biswas, Jacob & Vanetti 2019) of an upper bound on the total "
    "variation between the coupled kernel's law at time t and the mechanism's law; "
    "a Monte Carlo average with the standard error given, valid for that kernel run "
    "from that initial law"
)


class CouplingError(RuntimeError):
    """Some coupled pairs did not meet within ``max_iter``: no bound can be formed."""


# --------------------------------------------------------------------------- target


class BatchTarget:
    r"""A ``pm.Model``'s log-density, gradient and deterministics on batches of points.

    The model's free variables, on their unconstrained (transformed) space, are raveled
    into one vector of length ``dim`` in the order of
    ``DictToArrayBijection.map(model.initial_point())``. Each graph (``model.logp``
    with the transforms' Jacobians, its gradient, a deterministic with its random
    variables replaced by the values) is vectorized over a leading batch axis
    (``pytensor.graph.replace.vectorize_graph``) and compiled once, so that a step
    of ``B`` chains is one call.

    Parameters
    ----------
    model : pm.Model
        Every free variable must have a value variable (no discrete variables: the
        kernels here are for continuous targets).

    Attributes
    ----------
    dim : int
    start : ndarray, shape ``(dim,)``
        The model's initial point, raveled.
    names : tuple of (name, shape, size)
        The raveled layout.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 1.0, 2.0, shape=2)
    ...     _ = pm.HalfNormal("b", 1.0)
    >>> target = BatchTarget(m)
    >>> target.dim, target.names[1][0]
    (3, 'b_log__')
    >>> lp = target.logp(np.zeros((4, 3)))
    >>> lp.shape, bool(np.allclose(lp, lp[0]))
    ((4,), True)
    """

    def __init__(self, model):
        from pymc.blocking import DictToArrayBijection

        self.model = model
        point = model.initial_point()
        raveled = DictToArrayBijection.map({v.name: point[v.name] for v in model.value_vars})
        self.start = np.asarray(raveled.data, float)
        self.dim = int(self.start.size)
        self.names = tuple(
            (name, tuple(shape), int(size)) for name, shape, size, _ in raveled.point_map_info
        )
        self._fns: dict = {}

    def _compile(self, key, build):
        """The compiled batch function of ``build()`` (graphs of the value variables).

        Built and compiled on first use only: building a model's logp graph alone
        costs tens of milliseconds, far more than one batched call.
        """
        import pytensor
        import pytensor.tensor as pt
        from pytensor.graph.replace import graph_replace, vectorize_graph

        if key in self._fns:
            return self._fns[key]
        outputs = build()
        by_name = {v.name: v for v in self.model.value_vars}
        q = pt.vector("q", dtype="float64")
        replace, start = {}, 0
        for name, shape, size in self.names:
            replace[by_name[name]] = q[start : start + size].reshape(shape)
            start += size
        single = graph_replace(outputs, replace, strict=False)
        batch = pt.matrix("q_batch", dtype="float64")
        batched = vectorize_graph(single, {q: batch})
        fn = pytensor.function([batch], batched, on_unused_input="ignore")
        self._fns[key] = fn
        return fn

    def logp(self, q):
        """Log-density (Jacobians included) at ``q`` ``(B, dim)`` -> ``(B,)``; NaN becomes -inf."""
        fn = self._compile("logp", lambda: [self.model.logp(jacobian=True)])
        (lp,) = fn(_batch(q, self.dim))
        return _finite_or_minus_inf(lp)

    def logp_grad(self, q):
        """``(logp, grad)`` at ``q`` ``(B, dim)``: shapes ``(B,)`` and ``(B, dim)``."""
        import pytensor.tensor as pt

        def build():
            lp = self.model.logp(jacobian=True)
            grads = pt.grad(lp, self.model.value_vars)
            return [lp, pt.concatenate([pt.flatten(g) for g in grads])]

        fn = self._compile("logp_grad", build)
        lp, grad = fn(_batch(q, self.dim))
        return _finite_or_minus_inf(lp), np.asarray(grad, float)

    def deterministic(self, name, q):
        """The model variable ``name`` (e.g. ``"distance"``) at ``q`` ``(B, dim)``: ``(B, ...)``."""
        fn = self._compile(
            ("det", name), lambda: self.model.replace_rvs_by_values([self.model[name]])
        )
        (out,) = fn(_batch(q, self.dim))
        return np.asarray(out)


def _batch(q, dim):
    q = np.asarray(q, float)
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"points must have shape (batch, {dim}), got {q.shape}")
    return q


def _finite_or_minus_inf(lp):
    lp = np.asarray(lp, float)
    return np.where(np.isnan(lp), -np.inf, lp)


# --------------------------------------------------------------------------- kernels


def _accept(log_u, lp_new, lp_old):
    """MH acceptance ``log u < lp_new - lp_old`` without NaN (-inf - -inf) surprises."""
    with np.errstate(invalid="ignore"):
        diff = lp_new - lp_old
    return np.isfinite(lp_new) & (log_u < np.where(np.isnan(diff), np.inf, diff))


def reflection_maximal(mu_x, mu_y, scale, rng):
    r"""Reflection-maximal coupling of :math:`N(\mu_x, s^2 I)` and :math:`N(\mu_y, s^2 I)`.

    Rows are independent pairs. With :math:`z = (\mu_x - \mu_y)/s` and
    :math:`\xi \sim N(0, I)`: if :math:`\log U \le \log\varphi(\xi + z) - \log\varphi(\xi)`
    the proposals coincide (:math:`\eta = \xi + z`), otherwise
    :math:`\eta = \xi - 2 (e\cdot\xi)\,e`, :math:`e = z/|z|`. Both marginals are exact;
    the proposals coincide with probability :math:`1 - \mathrm{TV}`, the largest possible.

    Parameters
    ----------
    mu_x, mu_y : ndarray, shape ``(B, D)``
    scale : float or ndarray ``(B, 1)``
    rng : numpy.random.Generator

    Returns
    -------
    x, y : ndarray, shape ``(B, D)``
    same : ndarray of bool, shape ``(B,)``
        Rows where the two proposals are the same point.
    """
    z = (mu_x - mu_y) / scale
    xi = rng.standard_normal(mu_x.shape)
    log_u = np.log(rng.random(mu_x.shape[0]))
    zn = np.linalg.norm(z, axis=1, keepdims=True)
    same = log_u <= -0.5 * np.sum((xi + z) ** 2 - xi**2, axis=1)
    e = np.divide(z, zn, out=np.zeros_like(z), where=zn > 0)
    eta = np.where(same[:, None], xi + z, xi - 2.0 * np.sum(e * xi, axis=1, keepdims=True) * e)
    x = mu_x + scale * xi
    y = np.where(same[:, None], x, mu_y + scale * eta)
    return x, y, same


@dataclass(frozen=True)
class RWMH:
    """Random-walk Metropolis on the unconstrained space, proposal ``N(q, step_size^2 I)``.

    Coupled by the reflection-maximal coupling of the proposals and a common uniform:
    once two chains are equal they stay equal.

    Parameters
    ----------
    step_size : float
        The proposal's standard deviation per coordinate, ``> 0``.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0)
    >>> target, rng = BatchTarget(m), np.random.default_rng(0)
    >>> q = np.array([[0.0], [0.0], [3.0]])
    >>> lp = target.logp(q)
    >>> qx, _, qy, _ = RWMH(1.0).coupled_step(target, q, lp, q[[0, 2, 2]], lp[[0, 2, 2]], rng)
    >>> bool(qx[0, 0] == qy[0, 0])  # a pair that has met stays together
    True
    """

    step_size: float

    def __post_init__(self):
        check_positive_real(self.step_size, "step_size")

    def step(self, target, q, lp, rng):
        """One step of every row; returns ``(q, lp, accepted)``."""
        prop = q + self.step_size * rng.standard_normal(q.shape)
        lp_prop = target.logp(prop)
        acc = _accept(np.log(rng.random(len(q))), lp_prop, lp)
        return np.where(acc[:, None], prop, q), np.where(acc, lp_prop, lp), acc

    def coupled_step(self, target, qx, lpx, qy, lpy, rng):
        """One coupled step of the pairs ``(qx[i], qy[i])``; returns the new four arrays."""
        return _coupled_rwmh(target, self.step_size, qx, lpx, qy, lpy, rng)

    def describe(self) -> dict:
        """The kernel's settings, for the record of a release's δ̂."""
        return {"kernel": "RWMH", "step_size": float(self.step_size)}


def _coupled_rwmh(target, scale, qx, lpx, qy, lpy, rng):
    px, py, _ = reflection_maximal(qx, qy, scale, rng)
    lp_both = target.logp(np.concatenate([px, py]))
    lp_px, lp_py = lp_both[: len(px)], lp_both[len(px) :]
    log_u = np.log(rng.random(len(qx)))  # one uniform for both chains of a pair
    ax, ay = _accept(log_u, lp_px, lpx), _accept(log_u, lp_py, lpy)
    return (
        np.where(ax[:, None], px, qx),
        np.where(ax, lp_px, lpx),
        np.where(ay[:, None], py, qy),
        np.where(ay, lp_py, lpy),
    )


@dataclass(frozen=True)
class HMC:
    """HMC (identity mass, fixed ``step_size`` and ``n_steps``) mixed with an RWMH step.

    Each step is, with probability ``mh_prob``, a random-walk Metropolis step of scale
    ``mh_scale``, otherwise an HMC step; both leave the target invariant, so their
    mixture does. The coupled version shares the coin, the momentum and the
    accept/reject uniform of a pair (common random numbers), and couples the RWMH
    proposals maximally so that close chains meet.

    Parameters
    ----------
    step_size : float
        The leapfrog step ``h > 0``.
    n_steps : int
        Leapfrog steps per HMC move.
    mh_prob : float, default 0.1
        Probability, in ``[0, 1]``, of a random-walk step instead of an HMC step.
    mh_scale : float, default 0.05
        The random-walk step's proposal standard deviation.

    Examples
    --------
    >>> HMC(0.2, 10).describe()["kernel"]
    'HMC+RWMH'
    """

    step_size: float
    n_steps: int
    mh_prob: float = 0.1
    mh_scale: float = 0.05

    def __post_init__(self):
        check_positive_real(self.step_size, "step_size")
        check_positive_int(self.n_steps, "n_steps")
        check_positive_real(self.mh_scale, "mh_scale")
        if not 0.0 <= self.mh_prob <= 1.0:
            raise ValueError(f"mh_prob must lie in [0, 1], got {self.mh_prob}")

    def _leapfrog(self, target, q, p, grad):
        h = self.step_size
        p = p + 0.5 * h * grad
        for i in range(self.n_steps):
            q = q + h * p
            lp, grad = target.logp_grad(q)
            grad = np.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)
            p = p + (h if i < self.n_steps - 1 else 0.5 * h) * grad
        return q, p, lp, grad

    def _hmc(self, target, q, lp, grad, p, log_u):
        qn, pn, lpn, gn = self._leapfrog(target, q, p, grad)
        h_old = lp - 0.5 * np.sum(p**2, axis=1)
        h_new = lpn - 0.5 * np.sum(pn**2, axis=1)
        acc = _accept(log_u, h_new, h_old) & np.all(np.isfinite(qn), axis=1)
        return (
            np.where(acc[:, None], qn, q),
            np.where(acc, lpn, lp),
            np.where(acc[:, None], gn, grad),
            acc,
        )

    def step(self, target, q, lp, rng, grad=None):
        """One step of every row; returns ``(q, lp, accepted)``."""
        if grad is None:
            lp, grad = target.logp_grad(q)
        coin = rng.random(len(q)) < self.mh_prob
        p = rng.standard_normal(q.shape)
        log_u = np.log(rng.random(len(q)))
        qh, lph, _, acc_h = self._hmc(target, q, lp, grad, p, log_u)
        prop = q + self.mh_scale * p  # the RWMH branch reuses the normal draw
        lp_prop = target.logp(prop)
        acc_m = _accept(log_u, lp_prop, lp)
        qm = np.where(acc_m[:, None], prop, q)
        lpm = np.where(acc_m, lp_prop, lp)
        return (
            np.where(coin[:, None], qm, qh),
            np.where(coin, lpm, lph),
            np.where(coin, acc_m, acc_h),
        )

    def coupled_step(self, target, qx, lpx, qy, lpy, rng):
        """One coupled step of the pairs ``(qx[i], qy[i])``; returns the new four arrays."""
        n = len(qx)
        coin = rng.random(n) < self.mh_prob
        p = rng.standard_normal(qx.shape)
        log_u = np.log(rng.random(n))
        both = np.concatenate([qx, qy])
        lp_both, g_both = target.logp_grad(both)
        qh, lph, _, _ = self._hmc(
            target, both, lp_both, g_both, np.concatenate([p, p]), np.concatenate([log_u, log_u])
        )
        mx, mlx, my, mly = _coupled_rwmh(
            target, self.mh_scale, qx, lp_both[:n], qy, lp_both[n:], rng
        )
        c = coin[:, None]
        return (
            np.where(c, mx, qh[:n]),
            np.where(coin, mlx, lph[:n]),
            np.where(c, my, qh[n:]),
            np.where(coin, mly, lph[n:]),
        )

    def describe(self) -> dict:
        """The kernel's settings, for the record of a release's δ̂."""
        return {
            "kernel": "HMC+RWMH",
            "step_size": float(self.step_size),
            "n_steps": int(self.n_steps),
            "mh_prob": float(self.mh_prob),
            "mh_scale": float(self.mh_scale),
        }


# --------------------------------------------------------------------------- chains


def initial_law(target, jitter=1.0):
    """Default initial law: the model's initial point plus ``U(-jitter, jitter)`` per coordinate.

    PyMC's default initialisation (``"jitter+adapt_diag"``) jitters the same way.
    Returns ``init(size, rng) -> (size, dim)``.
    """
    jitter = float(jitter)

    def init(size, rng):
        return target.start + rng.uniform(-jitter, jitter, size=(size, target.dim))

    return init


def _finite_start(target, init, size, rng, tries=100):
    """Draws of the initial law with a finite log-density (redrawn rows where not)."""
    q = np.asarray(init(size, rng), float)
    lp = target.logp(q)
    for _ in range(tries):
        bad = ~np.isfinite(lp)
        if not bad.any():
            return q, lp
        q[bad] = init(int(bad.sum()), rng)
        lp[bad] = target.logp(q[bad])
    raise ValueError("the initial law gives points of zero density: choose another init")


def draw_chain(target, kernel, t, size, *, init=None, random_seed=None, record=None):
    """Run ``size`` independent chains of ``kernel`` for ``t`` steps from the initial law.

    The states at time ``t`` are draws of :math:`\\pi_t`, the law that :func:`tv_bound`
    compares with the target: a release drawn this way is the one δ̂ speaks of.

    Parameters
    ----------
    target : BatchTarget
    kernel : RWMH or HMC
    t : int
        Number of steps (0 returns the initial draws).
    size : int
        Number of independent chains.
    init : callable, optional
        ``init(size, rng) -> (size, dim)``; default :func:`initial_law`.
    random_seed : int, Generator or None
    record : sequence of int, optional
        Times at which to keep the states too.

    Returns
    -------
    ndarray ``(size, dim)``, or with ``record`` a dict ``{time: (size, dim)}`` holding
    the recorded times and ``t``.
    """
    rng = as_generator(random_seed)
    t = check_positive_int(t, "t", minimum=0)
    init = initial_law(target) if init is None else init
    q, lp = _finite_start(target, init, check_positive_int(size, "size"), rng)
    keep = set() if record is None else {int(i) for i in record}
    out = {0: q.copy()} if 0 in keep else {}
    for i in range(1, t + 1):
        q, lp, _ = kernel.step(target, q, lp, rng)
        if i in keep:
            out[i] = q.copy()
    if record is None:
        return q
    out[t] = q
    return out


def tune_kernel(target, kind="rwmh", *, iterations=300, chains=64, init=None, random_seed=None):
    """A fixed kernel whose step size was adapted on a pilot run of independent chains.

    The pilot (``chains`` chains from the initial law, ``iterations`` steps) adapts one
    log step size by Robbins–Monro to an acceptance rate of 0.3 (RWMH) or 0.8 (HMC,
    with ``n_steps = ceil(1.5 / step_size)`` capped at 30). The returned kernel is then
    fixed: the chain δ̂ speaks of never adapts.
    """
    if kind not in ("rwmh", "hmc"):
        raise ValueError(f"kind must be 'rwmh' or 'hmc', got {kind!r}")
    rng = as_generator(random_seed)
    init = initial_law(target) if init is None else init
    q, lp = _finite_start(target, init, chains, rng)
    goal = 0.3 if kind == "rwmh" else 0.8
    log_h = math.log(2.38 / math.sqrt(target.dim) if kind == "rwmh" else 0.3)

    def make(h):
        if kind == "rwmh":
            return RWMH(h)
        # the meeting step only has to close the last gap CRN leaves: a sixth of a
        # leapfrog step is accepted often and still overlaps close proposals
        return HMC(h, min(30, math.ceil(1.5 / h)), mh_scale=h / 6.0)

    for i in range(iterations):
        q, lp, acc = make(math.exp(log_h)).step(target, q, lp, rng)
        log_h += (acc.mean() - goal) * 2.0 / math.sqrt(i + 1.0)
    return make(math.exp(log_h))


def meeting_times(target, kernel, *, lag, reps, init=None, max_iter=100_000, random_seed=None):
    r"""Meeting times :math:`\tau` of ``reps`` independent L-lag coupled pairs.

    ``X`` and ``Y`` start from the initial law, ``X`` runs ``lag`` steps alone, then
    the pairs :math:`(X_s, Y_{s-L})` take coupled steps until they are equal;
    :math:`\tau` is the time ``s`` of ``X`` at the meeting. Only the pairs that have not
    met are stepped.

    Parameters
    ----------
    target : BatchTarget
        The model's batched log-density.
    kernel : RWMH or HMC
        The coupled kernel.
    lag : int
        The lag ``L``.
    reps : int
        Number of independent pairs ``R``.
    init : callable, optional
        The initial law ``init(size, rng) -> (size, dim)``; default: the model's
        initial point jittered by ``U(-1, 1)`` per coordinate.
    max_iter : int
        Cap on the steps of ``X``.
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    ndarray of int, shape ``(reps,)``
        The meeting times, each ``> lag``.

    Raises
    ------
    CouplingError
        When some pair has not met after ``max_iter`` steps of ``X``.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0, shape=2)
    >>> tau = meeting_times(BatchTarget(m), RWMH(1.5), lag=5, reps=20, random_seed=0)
    >>> tau.shape, bool(tau.min() > 5)
    ((20,), True)
    """
    rng = as_generator(random_seed)
    lag = check_positive_int(lag, "lag")
    reps = check_positive_int(reps, "reps")
    init = initial_law(target) if init is None else init
    qx, lpx = _finite_start(target, init, reps, rng)
    qy, lpy = _finite_start(target, init, reps, rng)
    for _ in range(lag):
        qx, lpx, _ = kernel.step(target, qx, lpx, rng)
    tau = np.full(reps, -1, dtype=np.int64)
    active = np.arange(reps)
    s = lag
    while active.size:
        if s >= max_iter:
            raise CouplingError(
                f"{active.size} of {reps} coupled pairs did not meet within max_iter = "
                f"{max_iter} steps: no TV bound can be estimated. Raise max_iter, or use a "
                "better-mixing kernel (tune_kernel, HMC)"
            )
        s += 1
        qx[active], lpx[active], qy[active], lpy[active] = kernel.coupled_step(
            target, qx[active], lpx[active], qy[active], lpy[active], rng
        )
        met = np.all(qx[active] == qy[active], axis=1)
        tau[active[met]] = s
        active = active[~met]
    return tau


# --------------------------------------------------------------------------- bounds


@dataclass(frozen=True)
class TVBound:
    r"""The L-lag estimate of an upper bound on :math:`\mathrm{TV}(\pi_t, \pi)`, per ``t``.

    Attributes
    ----------
    t : ndarray of int, shape ``(T,)``
    estimate : ndarray, shape ``(T,)``
        Mean over the pairs of :math:`\max(0, \lceil(\tau - L - t)/L\rceil)`.
    se : ndarray, shape ``(T,)``
        Its Monte Carlo standard error (sample sd / sqrt(R)).
    lag : int
    meeting_times : ndarray of int, shape ``(R,)``
    """

    t: np.ndarray
    estimate: np.ndarray
    se: np.ndarray
    lag: int
    meeting_times: np.ndarray = field(repr=False)

    def upper(self, z=2.0):
        """``estimate + z * se``: an approximate one-sided upper confidence limit."""
        return self.estimate + z * self.se

    def at(self, t):
        """``(estimate, se)`` at one time ``t`` (computed from the meeting times)."""
        b = tv_bound(self.meeting_times, self.lag, [t])
        return float(b.estimate[0]), float(b.se[0])


def tv_bound(meeting_times, lag, t):
    r"""Estimate :math:`\mathrm{TV}(\pi_t, \pi) \le E[\max(0, \lceil(\tau - L - t)/L\rceil)]`.

    Parameters
    ----------
    meeting_times : array of int, shape ``(R,)``
        Independent L-lag meeting times (:func:`meeting_times`).
    lag : int
        The lag ``L`` they were drawn with.
    t : int or array of int
        Times at which to bound the chain's distance to its target.

    Returns
    -------
    TVBound
        The estimate and its standard error at each of the times ``t``.

    Examples
    --------
    >>> b = tv_bound([5, 12, 30, 7], lag=5, t=[0, 10, 30])
    >>> b.estimate.tolist()  # ceil((tau - 5 - t)/5)^+: [0,2,5,1], [0,0,3,0], [0,0,0,0]
    [2.0, 0.75, 0.0]
    """
    tau = np.asarray(meeting_times, float)
    if tau.ndim != 1 or tau.size < 2:
        raise ValueError("need at least two meeting times (a 1-D array)")
    lag = check_positive_int(lag, "lag")
    if np.any(tau < lag):
        raise ValueError("a meeting time is smaller than the lag: not L-lag meeting times")
    ts = np.atleast_1d(np.asarray(t, dtype=np.int64))
    terms = np.maximum(0.0, np.ceil((tau[None, :] - lag - ts[:, None]) / lag))
    est = terms.mean(axis=1)
    se = terms.std(axis=1, ddof=1) / math.sqrt(tau.size)
    return TVBound(ts, est, se, lag, np.asarray(meeting_times))


def plot_tv_bound(bound, *, ax=None, t_mark=None, z=2.0):
    """Plot the TV bound against ``t`` with a ``± z·se`` band; mark ``t_mark`` if given.

    Parameters
    ----------
    bound : TVBound, DeltaEstimate or dict
        The curve: a :class:`TVBound`, a :class:`DeltaEstimate` or the dict of
        ``Release.delta_estimate`` (its ``curve``; then ``t_mark`` defaults to its ``t``).
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure).
    t_mark : int, optional
        A time to mark with a vertical line (the released draw's).
    z : float, default 2.0
        Half-width of the band in standard errors.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_tv_bound(tv_bound([5, 12, 30, 7], lag=5, t=[0, 10, 30]), t_mark=10)
    >>> ax.get_xlabel()
    'iteration t'
    """
    import matplotlib.pyplot as plt

    if isinstance(bound, DeltaEstimate):
        bound = bound.as_dict()
    if isinstance(bound, TVBound):
        t, est, se = bound.t, bound.estimate, bound.se
        lag, reps = bound.lag, bound.meeting_times.size
    else:
        curve = bound["curve"]
        t, est, se = (np.asarray(curve[k], float) for k in ("t", "tv_hat", "se"))
        lag, reps = bound["lag"], bound["reps"]
        t_mark = bound["t"] if t_mark is None else t_mark
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(t, est, color="C0", label="L-lag TV bound (estimate)")
    ax.fill_between(
        t, np.maximum(est - z * se, 0), est + z * se, color="C0", alpha=0.25, label=f"± {z:g} s.e."
    )
    if t_mark is not None:
        ax.axvline(t_mark, color="k", ls=":", label=f"t = {t_mark}")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("upper bound on TV(π_t, π)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"L-lag coupling bound (L = {lag}, R = {reps})")
    ax.legend()
    return ax


@dataclass(frozen=True)
class DeltaEstimate:
    r"""Estimated δ of an MCMC draw at time ``t``: :math:`(1 + e^\varepsilon)` times the TV bound.

    Attributes
    ----------
    epsilon : float
    t : int
    tv, tv_se : float
        The TV bound's estimate at ``t`` and its Monte Carlo standard error.
    delta_hat, delta_se : float
        :math:`(1 + e^\varepsilon)` times them.
    bound : TVBound
        The whole curve (for plots).
    kernel : dict
        The coupled kernel's settings: δ̂ is about that chain.
    """

    epsilon: float
    t: int
    tv: float
    tv_se: float
    delta_hat: float
    delta_se: float
    bound: TVBound = field(repr=False)
    kernel: dict = field(default_factory=dict)

    def delta_upper(self, z=2.0) -> float:
        """``delta_hat + z * delta_se``: what a cautious curator would state."""
        return self.delta_hat + z * self.delta_se

    def as_dict(self) -> dict:
        """Plain values for ``Release.delta_estimate`` (curator side, never published)."""
        return {
            "label": "ESTIMATE (not a proof)",
            "note": DELTA_ESTIMATE_NOTE,
            "epsilon": self.epsilon,
            "t": self.t,
            "tv_hat": self.tv,
            "tv_se": self.tv_se,
            "delta_hat": self.delta_hat,
            "delta_se": self.delta_se,
            "delta_upper_2se": self.delta_upper(2.0),
            "lag": self.bound.lag,
            "reps": int(self.bound.meeting_times.size),
            "kernel": dict(self.kernel),
            "curve": {
                "t": self.bound.t.tolist(),
                "tv_hat": self.bound.estimate.tolist(),
                "se": self.bound.se.tolist(),
            },
        }


def delta_from_tv(epsilon, tv):
    """``(1 + e^epsilon) * tv``: the δ of an (ε, δ) guarantee from a TV distance γ."""
    return (1.0 + math.exp(check_positive_real(epsilon, "epsilon"))) * tv


def estimate_delta(
    model,
    *,
    epsilon,
    t,
    kernel="hmc",
    lag=None,
    reps=200,
    t_grid=None,
    init=None,
    max_iter=100_000,
    random_seed=None,
):
    r"""Estimate δ for a draw at time ``t`` of a fixed MCMC kernel on ``model``.

    Parameters
    ----------
    model : pm.Model or BatchTarget
        The mechanism's model (e.g. ``mech.model(data)``).
    epsilon : float
        The release's privacy budget ``> 0``.
    t : int
        The time of the released draw (a release's tune length).
    kernel : "hmc", "rwmh", RWMH or HMC
        A name tunes one (by short coupled runs); an instance is used as is.
    lag : int, optional
        ``L``; default ``max(t, 1)``.
    reps : int
        Number of coupled pairs ``R``.
    t_grid : array of int, optional
        Times of the curve kept in the result (default 0 .. ``2t`` in about 100 steps).
    init : callable, optional
        The initial law ``init(size, rng) -> (size, dim)``; default: the model's
        initial point jittered by ``U(-1, 1)`` per coordinate.
    max_iter : int
        Cap on the steps of a pair (see :func:`meeting_times`).
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    DeltaEstimate
        The estimate δ̂ at ``t`` with its standard error, the TV curve and the kernel's settings.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0, shape=2)
    >>> est = estimate_delta(m, epsilon=1.0, t=50, kernel="rwmh", reps=50, random_seed=1)
    >>> est.delta_hat < 0.1, est.kernel["kernel"]
    (True, 'RWMH')
    """
    rng = as_generator(random_seed)
    t = check_positive_int(t, "t", minimum=0)
    target = model if isinstance(model, BatchTarget) else BatchTarget(model)
    if isinstance(kernel, str):
        kernel = tune_kernel(target, kernel, init=init, random_seed=rng)
    lag = max(t, 1) if lag is None else check_positive_int(lag, "lag")
    tau = meeting_times(
        target, kernel, lag=lag, reps=reps, init=init, max_iter=max_iter, random_seed=rng
    )
    if t_grid is None:
        t_grid = np.unique(np.linspace(0, max(2 * t, 10), 101).astype(int))
    grid = np.union1d(np.asarray(t_grid, dtype=np.int64), [t])
    bound = tv_bound(tau, lag, grid)
    tv, se = bound.at(t)
    factor = 1.0 + math.exp(check_positive_real(epsilon, "epsilon"))
    return DeltaEstimate(
        float(epsilon), t, tv, se, factor * tv, factor * se, bound, kernel.describe()
    )


def coupled_release(
    model,
    *,
    epsilon,
    t,
    kernel="hmc",
    domain=None,
    name="release",
    reps=200,
    chains=200,
    random_seed=None,
):
    r"""A released value drawn from the assessed chain, with its δ̂ (curator side).

    The value is the state at time ``t`` of a fresh chain of the coupled kernel (its
    ``name`` deterministic), started from the initial law: exactly the law
    :math:`\pi_t` whose distance to the mechanism's law :func:`estimate_delta`
    bounds. For a law restricted to a public ball (``domain``) the value is drawn
    from :math:`\pi_t` conditioned on the ball ``A``: among ``chains`` independent
    chains the first inside is released, and since
    :math:`\mathrm{TV}(\pi_t(\cdot\mid A), \pi(\cdot\mid A)) \le 2\gamma/\pi_t(A)`
    the recorded δ̂ uses :math:`2\widehat{\mathrm{TV}}/\hat p`, ``p`` the fraction of
    the chains inside.

    Parameters
    ----------
    model : pm.Model or BatchTarget
        The mechanism's model (e.g. ``mech.model(data)``).
    epsilon : float
        The release's privacy budget ``> 0``.
    t : int
        Steps of the released chain (a release's tune length).
    kernel : "hmc", "rwmh", RWMH or HMC
        A name tunes one; an instance is used as is.
    domain : DataDomain, optional
        The public ball of a restricted law (the model samples the unrestricted one).
    name : str
        The manifold-valued deterministic.
    reps : int
        Coupled pairs for the estimate.
    chains : int
        Chains run to time ``t`` for the draw (and for ``p``).
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    value : ndarray
        The point (``name``'s shape).
    record : dict
        :meth:`DeltaEstimate.as_dict`, with for restricted laws ``inside_fraction``
        and ``tv_conditioned_hat``; ``delta_hat`` is computed from the latter.
    """
    rng = as_generator(random_seed)
    target = model if isinstance(model, BatchTarget) else BatchTarget(model)
    if isinstance(kernel, str):
        kernel = tune_kernel(target, kernel, random_seed=rng)
    est = estimate_delta(target, epsilon=epsilon, t=t, kernel=kernel, reps=reps, random_seed=rng)
    q = draw_chain(target, kernel, est.t, check_positive_int(chains, "chains"), random_seed=rng)
    points = target.deterministic(name, q)
    record = est.as_dict()
    record["applies_to"] = (
        f"the released value: the state at t = {est.t} of a fresh chain of this kernel "
        "from PyMC's jittered initial point"
    )
    if domain is None:
        return points[0], record
    inside = np.asarray(domain.distances(points) <= domain.radius)
    if not inside.any():
        raise CouplingError(
            f"none of {chains} chains at t = {est.t} lies inside the public ball: "
            "nothing is released; use more data or a larger epsilon"
        )
    p = float(inside.mean())
    factor = 1.0 + math.exp(epsilon)
    record.update(
        inside_fraction=p,
        tv_conditioned_hat=min(1.0, 2.0 * est.tv / p),
        delta_hat=factor * min(1.0, 2.0 * est.tv / p),
        delta_se=factor * 2.0 * est.tv_se / p,
        delta_upper_2se=factor * min(1.0, 2.0 * (est.tv + 2.0 * est.tv_se) / p),
    )
    return points[int(np.argmax(inside))], record
