r"""Chains and kernels on batches of points: one engine for every chain the library runs
outside PyMC/nutpie.

Every chain here is a batch: ``B`` independent chains are the rows of one array, and a
step of all of them is one vectorized call. The pieces:

- the Metropolis step (:func:`metropolis_step`): draw a proposal through a chart at the
  current point, evaluate the log-density, accept with :func:`metropolis_accept` on a
  log-uniform from :func:`log_uniform`. :class:`RWMH` proposes on the unconstrained
  coordinates of a PyMC model's transforms; the 2021 supplement's random walk
  (:func:`pymc_manidp.mcmc.random_walk.random_walk_mh`) proposes on the manifold through
  the normal coordinates at the current point;
- the chain loop (:func:`run_chain`): steps from a start, keeping the states at chosen
  times and the number of accepted moves per step;
- a batched compiled target (:class:`BatchTarget`): any ``pm.Model``'s log-density
  (Jacobians of its transforms included), gradient and deterministics, vectorized over
  a batch of raveled unconstrained points;
- kernels with coupled steps (Jacob, O'Leary & Atchadé 2020): :class:`RWMH`, coupled by
  the reflection-maximal coupling of the proposals (:func:`reflection_maximal`) and a
  shared uniform, and :class:`HMC` (fixed step size and leapfrog steps) coupled by common
  random numbers and mixed with a maximally coupled RWMH step so that close chains meet;
- chain drivers on a :class:`BatchTarget`: the initial law (:func:`initial_law`), chains
  to a time ``t`` (:func:`draw_chain`), a pilot-tuned fixed kernel (:func:`tune_kernel`)
  and the meeting times of L-lag coupled pairs (:func:`meeting_times`), from which
  :mod:`pymc_manidp.privacy.coupling` estimates a release's δ, and the measured cost of
  one batched step (:func:`step_seconds`), from which it estimates a run's time first.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.rng import as_generator

__all__ = [
    "HMC",
    "RWMH",
    "BatchTarget",
    "ChainRun",
    "CouplingError",
    "draw_chain",
    "initial_law",
    "log_uniform",
    "meeting_times",
    "metropolis_accept",
    "metropolis_step",
    "reflection_maximal",
    "run_chain",
    "tune_kernel",
]


class CouplingError(RuntimeError):
    """Some coupled pairs did not meet within ``max_iter``: no bound can be formed."""


# --------------------------------------------------------------------------- Metropolis


def log_uniform(rng, size):
    """``log U`` for ``size`` uniforms ``U`` on ``(0, 1]``: finite, never ``-inf``.

    ``log1p(-u)`` of NumPy's ``u`` in ``[0, 1)`` has the law of ``log U`` and, unlike
    ``log(u)``, cannot be ``-inf`` (which would accept any finite proposal).

    Parameters
    ----------
    rng : numpy.random.Generator
        The random source.
    size : int
        How many values.

    Returns
    -------
    ndarray, shape ``(size,)``
        Independent draws of ``log U``, each in ``(-inf, 0]``.

    Examples
    --------
    >>> import numpy as np
    >>> v = log_uniform(np.random.default_rng(0), 1000)
    >>> bool(np.all(np.isfinite(v)) and np.all(v <= 0)), round(float(np.mean(v)), 1)
    (True, -1.0)
    """
    return np.log1p(-rng.random(size))


def metropolis_accept(log_u, lp_new, lp_old):
    """The Metropolis decision ``log u < lp_new - lp_old``, row by row.

    A proposal whose log-density is not finite (``-inf`` outside a support, NaN) is
    never accepted, and ``-inf - -inf`` does not raise a NaN comparison.

    Parameters
    ----------
    log_u : ndarray, shape ``(B,)``
        Log-uniforms (:func:`log_uniform`).
    lp_new, lp_old : ndarray, shape ``(B,)``
        Log-densities (or negative energies) of the proposals and the current states.

    Returns
    -------
    ndarray of bool, shape ``(B,)``
        True where the proposal is accepted.

    Examples
    --------
    >>> import numpy as np
    >>> metropolis_accept(np.log([0.5, 0.5, 0.5]), np.array([0.0, -np.inf, -1.0]),
    ...                   np.array([-1.0, -np.inf, 0.0])).tolist()
    [True, False, False]
    """
    with np.errstate(invalid="ignore"):
        diff = lp_new - lp_old
    return np.isfinite(lp_new) & (log_u < np.where(np.isnan(diff), np.inf, diff))


def _select(accept, new, old):
    """Rows of ``new`` where ``accept``, else of ``old``; any trailing point shape."""
    accept = np.reshape(accept, accept.shape + (1,) * (np.ndim(new) - 1))
    return np.where(accept, new, old)


def metropolis_step(log_density, q, lp, propose, rng):
    r"""One Metropolis step of every row, for a proposal symmetric w.r.t. the reference measure.

    Draws ``propose(q, rng)``, then one log-uniform per row, and accepts with
    probability :math:`\min\{1, f(q')/f(q)\}`; a rejected row repeats its state.

    Parameters
    ----------
    log_density : callable
        ``(B, *point_shape) -> (B,)``, ``-inf`` outside a restricted support.
    q : ndarray, shape ``(B, *point_shape)``
        The current states.
    lp : ndarray, shape ``(B,)``
        ``log_density(q)``.
    propose : callable
        ``propose(q, rng) -> (B, *point_shape)``: the proposal, drawn through a chart at
        ``q`` (a random walk in unconstrained coordinates, or in the normal coordinates
        of a manifold).
    rng : numpy.random.Generator
        The random source: the proposal's draws, then one uniform per row.

    Returns
    -------
    q, lp : ndarray, shapes ``(B, *point_shape)`` and ``(B,)``
        The new states and their log-densities.
    accepted : ndarray of bool, shape ``(B,)``
        True where the proposal was accepted.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, lp = np.zeros((3, 1)), np.zeros(3)
    >>> never = lambda x: np.full(len(x), -np.inf)
    >>> q2, lp2, acc = metropolis_step(never, q, lp, lambda x, r: x + 1.0, rng)
    >>> q2.ravel().tolist(), acc.tolist()
    ([0.0, 0.0, 0.0], [False, False, False])
    """
    prop = propose(q, rng)
    lp_prop = np.asarray(log_density(prop), float)
    accept = metropolis_accept(log_uniform(rng, len(q)), lp_prop, lp)
    return _select(accept, prop, q), np.where(accept, lp_prop, lp), accept


# --------------------------------------------------------------------------- the chain loop


@dataclass(frozen=True)
class ChainRun:
    """What :func:`run_chain` kept of ``B`` chains run for ``steps`` steps.

    Attributes
    ----------
    q : ndarray, shape ``(B, *point_shape)``
        The states after the last step.
    lp : ndarray, shape ``(B,)``
        Their log-densities.
    times : ndarray of int, shape ``(K,)``
        The kept times, increasing (0 is the start).
    states : ndarray, shape ``(K, B, *point_shape)``
        The states at those times.
    log_density : ndarray, shape ``(K, B)``
        Their log-densities.
    accepted : ndarray of int, shape ``(steps,)``
        How many of the ``B`` chains accepted their proposal at each step.
    """

    q: np.ndarray
    lp: np.ndarray
    times: np.ndarray
    states: np.ndarray
    log_density: np.ndarray
    accepted: np.ndarray


def run_chain(step, q, lp, steps, rng, *, keep=()):
    """Run ``steps`` steps of a batch of chains, keeping the states at chosen times.

    Parameters
    ----------
    step : callable
        ``step(q, lp, rng) -> (q, lp, accepted)``: one step of every row (a kernel's
        ``step`` with its target bound, or a :func:`metropolis_step`).
    q : ndarray, shape ``(B, *point_shape)``
        The start (time 0).
    lp : ndarray, shape ``(B,)``
        Its log-densities.
    steps : int
        Number of steps, ``>= 0``.
    rng : numpy.random.Generator
        The random source, passed to every ``step``.
    keep : sequence of int
        Times in ``[0, steps]`` at which to keep the states.

    Returns
    -------
    ChainRun
        The last states, the kept ones and the acceptance counts.

    Examples
    --------
    >>> import numpy as np
    >>> def up(q, lp, rng):  # a deterministic "kernel": move by one, always accept
    ...     return q + 1.0, lp, np.ones(len(q), bool)
    >>> run = run_chain(up, np.zeros((2, 1)), np.zeros(2), 5, None, keep=[4, 0, 2])
    >>> run.times.tolist(), run.states[:, 0, 0].tolist(), run.q[:, 0].tolist()
    ([0, 2, 4], [0.0, 2.0, 4.0], [5.0, 5.0])
    """
    steps = check_positive_int(steps, "steps", minimum=0)
    times = np.unique(np.asarray(keep, dtype=np.int64))
    if times.size and (times[0] < 0 or times[-1] > steps):
        raise ValueError(f"keep times must lie in [0, {steps}] (the number of steps)")
    slot = {int(t): k for k, t in enumerate(times)}
    states = np.empty((times.size, *np.shape(q)))
    kept_lp = np.empty((times.size, len(q)))
    accepted = np.zeros(steps, dtype=np.int64)
    for i in range(steps + 1):
        if i > 0:
            q, lp, acc = step(q, lp, rng)
            accepted[i - 1] = np.count_nonzero(acc)
        if i in slot:
            states[slot[i]], kept_lp[slot[i]] = q, lp
    return ChainRun(q, lp, times, states, kept_lp, accepted)


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
        The means of the two Gaussians, one pair per row.
    scale : float or ndarray ``(B, 1)``
        Their common standard deviation ``s`` per coordinate.
    rng : numpy.random.Generator
        The random source.

    Returns
    -------
    x, y : ndarray, shape ``(B, D)``
        The coupled draws: ``x`` of the first Gaussian, ``y`` of the second.
    same : ndarray of bool, shape ``(B,)``
        Rows where the two proposals are the same point.
    """
    z = (mu_x - mu_y) / scale
    xi = rng.standard_normal(mu_x.shape)
    log_u = log_uniform(rng, mu_x.shape[0])
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

    def propose(self, q, rng):
        """The Gaussian random-walk proposal ``q + step_size * N(0, I)`` of every row."""
        return q + self.step_size * rng.standard_normal(q.shape)

    def step(self, target, q, lp, rng):
        """One step of every row; returns ``(q, lp, accepted)``."""
        return metropolis_step(target.logp, q, lp, self.propose, rng)

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
    log_u = log_uniform(rng, len(qx))  # one uniform for both chains of a pair
    ax, ay = metropolis_accept(log_u, lp_px, lpx), metropolis_accept(log_u, lp_py, lpy)
    return (
        _select(ax, px, qx),
        np.where(ax, lp_px, lpx),
        _select(ay, py, qy),
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
        acc = metropolis_accept(log_u, h_new, h_old) & np.all(np.isfinite(qn), axis=1)
        return _select(acc, qn, q), np.where(acc, lpn, lp), _select(acc, gn, grad), acc

    def step(self, target, q, lp, rng, grad=None):
        """One step of every row; returns ``(q, lp, accepted)``."""
        if grad is None:
            lp, grad = target.logp_grad(q)
        coin = rng.random(len(q)) < self.mh_prob
        p = rng.standard_normal(q.shape)
        log_u = log_uniform(rng, len(q))
        qh, lph, _, acc_h = self._hmc(target, q, lp, grad, p, log_u)
        prop = q + self.mh_scale * p  # the RWMH branch reuses the normal draw
        lp_prop = target.logp(prop)
        acc_m = metropolis_accept(log_u, lp_prop, lp)
        qm, lpm = _select(acc_m, prop, q), np.where(acc_m, lp_prop, lp)
        return _select(coin, qm, qh), np.where(coin, lpm, lph), np.where(coin, acc_m, acc_h)

    def coupled_step(self, target, qx, lpx, qy, lpy, rng):
        """One coupled step of the pairs ``(qx[i], qy[i])``; returns the new four arrays."""
        n = len(qx)
        coin = rng.random(n) < self.mh_prob
        p = rng.standard_normal(qx.shape)
        log_u = log_uniform(rng, n)
        both = np.concatenate([qx, qy])
        lp_both, g_both = target.logp_grad(both)
        qh, lph, _, _ = self._hmc(
            target, both, lp_both, g_both, np.concatenate([p, p]), np.concatenate([log_u, log_u])
        )
        mx, mlx, my, mly = _coupled_rwmh(
            target, self.mh_scale, qx, lp_both[:n], qy, lp_both[n:], rng
        )
        return (
            _select(coin, mx, qh[:n]),
            np.where(coin, mlx, lph[:n]),
            _select(coin, my, qh[n:]),
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


# --------------------------------------------------------------------------- chain drivers


def initial_law(target, jitter=1.0):
    """Default initial law: the model's initial point plus ``U(-jitter, jitter)`` per coordinate.

    PyMC's default initialisation (``"jitter+adapt_diag"``) jitters the same way.

    Parameters
    ----------
    target : BatchTarget
        The model whose initial point (``target.start``) is jittered.
    jitter : float, default 1.0
        Half-width of the uniform jitter.

    Returns
    -------
    callable
        ``init(size, rng) -> (size, dim)``.
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

    The states at time ``t`` are draws of :math:`\\pi_t`, the law that
    :func:`pymc_manidp.privacy.coupling.tv_bound` compares with the target: a release
    drawn this way is the one δ̂ speaks of.

    Parameters
    ----------
    target : BatchTarget
        The model's batched log-density.
    kernel : RWMH or HMC
        The (fixed) kernel.
    t : int
        Number of steps (0 returns the initial draws).
    size : int
        Number of independent chains.
    init : callable, optional
        ``init(size, rng) -> (size, dim)``; default :func:`initial_law`.
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.
    record : sequence of int, optional
        Times at which to keep the states too (times outside ``[0, t]`` are ignored).

    Returns
    -------
    ndarray or dict
        The states at time ``t``, ``(size, dim)``; with ``record``, a dict
        ``{time: (size, dim)}`` holding the recorded times and ``t``.
    """
    rng = as_generator(random_seed)
    t = check_positive_int(t, "t", minimum=0)
    init = initial_law(target) if init is None else init
    q, lp = _finite_start(target, init, check_positive_int(size, "size"), rng)
    keep = [] if record is None else [int(i) for i in record if 0 <= int(i) <= t]
    run = run_chain(partial(kernel.step, target), q, lp, t, rng, keep=keep)
    if record is None:
        return run.q
    out = {int(i): s for i, s in zip(run.times, run.states, strict=True)}
    out[t] = run.q
    return out


def tune_kernel(target, kind="rwmh", *, iterations=300, chains=64, init=None, random_seed=None):
    """A fixed kernel whose step size was adapted on a pilot run of independent chains.

    The pilot (``chains`` chains from the initial law, ``iterations`` steps) adapts one
    log step size by Robbins–Monro to an acceptance rate of 0.3 (RWMH) or 0.8 (HMC,
    with ``n_steps = ceil(1.5 / step_size)`` capped at 30). The returned kernel is then
    fixed: the chain δ̂ speaks of never adapts.

    Parameters
    ----------
    target : BatchTarget
        The model's batched log-density.
    kind : {"rwmh", "hmc"}
        The kernel to tune.
    iterations, chains : int
        Length and width of the pilot run.
    init : callable, optional
        ``init(size, rng) -> (size, dim)``; default :func:`initial_law`.
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    RWMH or HMC
        The kernel with the adapted step size, fixed from then on.
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


def meeting_times(
    target, kernel, *, lag, reps, init=None, max_iter=100_000, max_seconds=None, random_seed=None
):
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
    max_seconds : float, optional
        A time limit on the whole call: the coupled phase, whose length is random,
        stops once it is spent (checked after every coupled step). ``None``: only
        ``max_iter`` bounds it. :func:`pymc_manidp.privacy.coupling.estimate_delta`
        passes what its budget leaves after the parts it can cost in advance.
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    ndarray of int, shape ``(reps,)``
        The meeting times, each ``> lag``.

    Raises
    ------
    CouplingError
        When some pair has not met after ``max_iter`` steps of ``X``, or within
        ``max_seconds``.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0, shape=2)
    >>> tau = meeting_times(BatchTarget(m), RWMH(1.5), lag=5, reps=20, random_seed=0)
    >>> tau.shape, bool(tau.min() > 5)
    ((20,), True)
    """
    start = time.monotonic()
    rng = as_generator(random_seed)
    lag = check_positive_int(lag, "lag")
    reps = check_positive_int(reps, "reps")
    if max_seconds is not None:
        max_seconds = check_positive_real(max_seconds, "max_seconds")
    init = initial_law(target) if init is None else init
    qx, lpx = _finite_start(target, init, reps, rng)
    qy, lpy = _finite_start(target, init, reps, rng)
    ahead = run_chain(partial(kernel.step, target), qx, lpx, lag, rng)
    deadline = None if max_seconds is None else (start + max_seconds, max_seconds)
    return _couple_until_met(
        target, kernel, (ahead.q, ahead.lp), (qy, lpy), lag, max_iter, rng, deadline
    )


def _couple_until_met(target, kernel, x, y, lag, max_iter, rng, deadline=None):
    """Coupled steps of the pairs ``(X_s, Y_{s-L})`` from ``s = lag`` until each has met.

    ``deadline``: ``(monotonic time, the budget it came from)`` or None.
    """
    (qx, lpx), (qy, lpy) = x, y
    reps = len(qx)
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
        if deadline is not None and s > lag and time.monotonic() > deadline[0]:
            raise CouplingError(
                f"{active.size} of {reps} coupled pairs had not met after {s - lag} coupled "
                f"steps, when the time budget of {deadline[1]:.3g} s for the meeting times "
                "ran out: no TV bound can be estimated. Raise the budget, use fewer pairs, "
                "or a better-mixing kernel (tune_kernel, HMC)"
            )
        s += 1
        qx[active], lpx[active], qy[active], lpy[active] = kernel.coupled_step(
            target, qx[active], lpx[active], qy[active], lpy[active], rng
        )
        met = np.all(qx[active] == qy[active], axis=1)
        tau[active[met]] = s
        active = active[~met]
    return tau


def step_seconds(target, kernel, size, *, coupled=False, init=None, repeats=3):
    """Seconds one batched step of ``size`` chains (or coupled step of ``size`` pairs) takes.

    The least of ``repeats`` timed steps, after one untimed step that compiles what
    the kernel needs: a measured cost per step, from which a caller estimates a run's
    time before running it (:func:`pymc_manidp.privacy.coupling.estimate_delta`).
    The starts are drawn with a generator of its own, so that measuring leaves the
    caller's random stream alone.

    Parameters
    ----------
    target : BatchTarget
        The model's batched log-density.
    kernel : RWMH or HMC
        The kernel.
    size : int
        Number of chains (pairs when ``coupled``).
    coupled : bool, default False
        Time ``kernel.coupled_step`` of ``size`` pairs instead of ``kernel.step``.
    init : callable, optional
        ``init(size, rng) -> (size, dim)``; default :func:`initial_law`.
    repeats : int, default 3
        Timed steps.

    Returns
    -------
    float
        Seconds, ``> 0``.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0, shape=2)
    >>> step_seconds(BatchTarget(m), RWMH(1.0), 10, coupled=True) > 0
    True
    """
    size = check_positive_int(size, "size")
    rng = np.random.default_rng(0)
    init = initial_law(target) if init is None else init
    q, lp = _finite_start(target, init, size, rng)
    if coupled:
        q2, lp2 = _finite_start(target, init, size, rng)

        def step():
            kernel.coupled_step(target, q, lp, q2, lp2, rng)
    else:

        def step():
            kernel.step(target, q, lp, rng)

    step()
    best = math.inf
    for _ in range(check_positive_int(repeats, "repeats")):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    # a clock tick can read 0 on a trivial target; the budget divides by nothing
    return max(best, 1e-9)
