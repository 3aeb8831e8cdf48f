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
*that* chain at time ``t`` carries
:math:`\hat\delta = (1 + e^\varepsilon)\,\widehat{\mathrm{TV}}` (:func:`estimate_delta`,
:func:`coupled_release`). It is an estimate with error bars, not a proof: see
``docs/mechanisms.md``.

The chains themselves — the batched target of any ``pm.Model``, the kernels ``RWMH`` and
``HMC`` with their coupled steps, the initial law, the meeting times of L-lag pairs and
the chains run to time ``t`` — are the MCMC layer's (:mod:`pymc_manidp.mcmc.kernels`).
They load on first use, so that the rest of the privacy layer (the ``Release`` record,
the audits) runs without PyMC. Their old names here and in :mod:`pymc_manidp.privacy`
still work for one release, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from pymc_manidp.geometry.validation import check_positive_int, check_positive_real
from pymc_manidp.rng import as_generator

#: Names of :mod:`pymc_manidp.mcmc.kernels` that belong to this module's interface too,
#: served on first use (``__getattr__``) like the moved names below, without a warning.
_FROM_KERNELS = ("CouplingError",)

__all__ = sorted(
    [
        *_FROM_KERNELS,
        "DeltaEstimate",
        "TVBound",
        "coupled_release",
        "delta_from_tv",
        "estimate_delta",
        "plot_tv_bound",
        "tv_bound",
    ]
)

#: The names that moved to :mod:`pymc_manidp.mcmc.kernels` (served here, and by
#: :mod:`pymc_manidp.privacy`, with a ``DeprecationWarning`` for one release).
MOVED_TO_MCMC = frozenset(
    {
        "HMC",
        "RWMH",
        "BatchTarget",
        "draw_chain",
        "initial_law",
        "meeting_times",
        "reflection_maximal",
        "tune_kernel",
    }
)


def _kernels():
    """``pymc_manidp.mcmc.kernels``, imported on first use (the mcmc package loads PyMC)."""
    from pymc_manidp.mcmc import kernels

    return kernels


def moved_to_mcmc(name, where):
    """The object ``name`` of :mod:`pymc_manidp.mcmc.kernels`, with a ``DeprecationWarning``.

    Parameters
    ----------
    name : str
        One of ``MOVED_TO_MCMC``.
    where : str
        The module the caller reached it through (``"pymc_manidp.privacy"``).

    Returns
    -------
    object
        The class or function itself.
    """
    warnings.warn(
        f"{where}.{name} has moved to pymc_manidp.mcmc: import it from there "
        f"(from pymc_manidp.mcmc import {name}); the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,  # the line that read the attribute, past the module's __getattr__
    )
    return getattr(_kernels(), name)


def __getattr__(name):
    # CouplingError is raised by the kernels' meeting_times: one class, defined there
    if name in _FROM_KERNELS:
        value = globals()[name] = getattr(_kernels(), name)  # later look-ups skip this
        return value
    if name in MOVED_TO_MCMC:
        return moved_to_mcmc(name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_FROM_KERNELS})


DELTA_ESTIMATE_NOTE = (
    "estimated, not proven: delta_hat = (1 + e^epsilon) * TV_hat, TV_hat the L-lag "
    "coupling estimate (Biswas, Jacob & Vanetti 2019) of an upper bound on the total "
    "variation between the coupled kernel's law at time t and the mechanism's law; "
    "a Monte Carlo average with the standard error given, valid for that kernel run "
    "from that initial law"
)


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
        Independent L-lag meeting times (:func:`pymc_manidp.mcmc.meeting_times`).
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
    model : pm.Model or pymc_manidp.mcmc.BatchTarget
        The mechanism's model (e.g. ``mech.model(data)``).
    epsilon : float
        The release's privacy budget ``> 0``.
    t : int
        The time of the released draw (a release's tune length).
    kernel : "hmc", "rwmh", pymc_manidp.mcmc.RWMH or pymc_manidp.mcmc.HMC
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
        Cap on the steps of a pair (see :func:`pymc_manidp.mcmc.meeting_times`).
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
    target, kernel = _target_and_kernel(model, kernel, init, rng)
    lag = max(t, 1) if lag is None else check_positive_int(lag, "lag")
    tau = _kernels().meeting_times(
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
    model : pm.Model or pymc_manidp.mcmc.BatchTarget
        The mechanism's model (e.g. ``mech.model(data)``).
    epsilon : float
        The release's privacy budget ``> 0``.
    t : int
        Steps of the released chain (a release's tune length).
    kernel : "hmc", "rwmh", pymc_manidp.mcmc.RWMH or pymc_manidp.mcmc.HMC
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
    target, kernel = _target_and_kernel(model, kernel, None, rng)
    est = estimate_delta(target, epsilon=epsilon, t=t, kernel=kernel, reps=reps, random_seed=rng)
    chains = check_positive_int(chains, "chains")
    q = _kernels().draw_chain(target, kernel, est.t, chains, random_seed=rng)
    points = target.deterministic(name, q)
    record = est.as_dict()
    record["applies_to"] = (
        f"the released value: the state at t = {est.t} of a fresh chain of this kernel "
        "from PyMC's jittered initial point"
    )
    if domain is None:
        return points[0], record
    return _inside_the_ball(points, domain, est, record)


def _target_and_kernel(model, kernel, init, rng):
    """The batched target of ``model`` and the kernel (tuned on it when given by name)."""
    k = _kernels()
    target = model if isinstance(model, k.BatchTarget) else k.BatchTarget(model)
    if isinstance(kernel, str):
        kernel = k.tune_kernel(target, kernel, init=init, random_seed=rng)
    return target, kernel


def _inside_the_ball(points, domain, est, record):
    r"""The first of the chains' ``points`` inside the public ball, and δ̂ conditioned on it.

    :math:`\mathrm{TV}(\pi_t(\cdot\mid A), \pi(\cdot\mid A)) \le 2\gamma/\pi_t(A)`, with
    :math:`\pi_t(A)` estimated by the fraction ``p`` of the chains inside.
    """
    inside = np.asarray(domain.distances(points) <= domain.radius)
    if not inside.any():
        raise _kernels().CouplingError(
            f"none of {len(points)} chains at t = {est.t} lies inside the public ball: "
            "nothing is released; use more data or a larger epsilon"
        )
    p = float(inside.mean())
    factor = 1.0 + math.exp(est.epsilon)
    record.update(
        inside_fraction=p,
        tv_conditioned_hat=min(1.0, 2.0 * est.tv / p),
        delta_hat=factor * min(1.0, 2.0 * est.tv / p),
        delta_se=factor * 2.0 * est.tv_se / p,
        delta_upper_2se=factor * min(1.0, 2.0 * (est.tv + 2.0 * est.tv_se) / p),
    )
    return points[int(np.argmax(inside))], record
