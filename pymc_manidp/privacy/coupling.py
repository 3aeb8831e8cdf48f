r"""Estimated δ for MCMC releases: L-lag couplings bound the chain's distance to its target.

**The conversion.** Let a mechanism be ε-DP with law :math:`\pi^D` on data set ``D``,
and let the released draw have law :math:`\pi_t^D` with
:math:`\mathrm{TV}(\pi_t^D, \pi^D) \le \gamma` on **every** data set. Then the release
is (ε, δ)-DP with :math:`\delta = (1 + e^\varepsilon)\,\gamma`: for adjacent ``D, D'``
and any event ``S``,

.. math:: \pi_t^D(S) \le \pi^D(S) + \gamma \le e^\varepsilon \pi^{D'}(S) + \gamma
          \le e^\varepsilon \pi_t^{D'}(S) + (1 + e^\varepsilon)\,\gamma .

(The standard argument; Wang, Fienberg & Smola 2015, "Privacy for free: posterior
sampling and stochastic gradient Monte Carlo", ICML, make it for approximate posterior
sampling.) Every mechanism is (ε, 1)-DP, so a δ of 1 or more says nothing: δ̂ is
reported as :math:`\min(1, (1 + e^\varepsilon)\,\widehat{\mathrm{TV}})`, and the TV
bound as :math:`\min(1, \cdot)` (a TV is at most 1); both stay upper bounds.

**The estimate.** This module estimates an upper bound on
:math:`\gamma = \mathrm{TV}(\pi_t, \pi)` by the L-lag couplings of Biswas, Jacob &
Vanetti (2019): run pairs of chains :math:`(X, Y)` from the same initial law
:math:`\pi_0`, ``X`` first alone for ``L`` steps, then both with a *coupled* kernel
built so that, once :math:`X_\tau = Y_{\tau - L}`, they stay equal. With the meeting
time :math:`\tau` (the first such time),

.. math:: \mathrm{TV}(\pi_t, \pi) \le \min\Big(1,
          \mathbb E\Big[\max\Big(0, \Big\lceil \frac{\tau - L - t}{L} \Big\rceil\Big)\Big]\Big),

and the average over ``R`` independent pairs estimates the right-hand side, with a
Monte Carlo standard error (:func:`tv_bound`). A release whose value is a draw at time
``t`` of *that* chain carries :math:`\hat\delta = \min(1, (1 + e^\varepsilon)\,
\widehat{\mathrm{TV}})` (:func:`estimate_delta`, :func:`coupled_release`).

**What δ̂ is not.** It is not the δ of an (ε, δ)-DP guarantee. The conversion above
needs γ to bound the TV on every data set (``D`` and ``D'`` alike); δ̂ is measured on
the actual data only, with a kernel tuned on those data (another data set would get
another step size, hence another chain), from one initial law, by a Monte Carlo
average that can miss a rare slow pair. It is a curator-side estimate with an error
bar: evidence about this run. Nor does it cover whether a release happens at all:
the diagnostics gate's refusal (``DiagnosticsError``) and the coupling's
(:class:`CouplingError`: pairs that did not meet within ``max_iter`` or the time
budget) depend on the data, and they are outside δ̂. See ``docs/mechanisms.md``.

**Cost.** Before any chain runs, the time of the parts whose length is known (the
lag phase, one coupled step, the released chains) is estimated from the measured cost
of one batched step (:func:`pymc_manidp.mcmc.kernels.step_seconds`) and refused with
the numbers when over the budget (``max_seconds``, default the MCMC budget,
``$PYMC_MANIDP_MCMC_MAX_SECONDS`` or 600 s); the coupled phase, of random length,
stops with a :class:`CouplingError` when what is left of the budget is spent.

The chains themselves — the batched target of any ``pm.Model``, the kernels ``RWMH`` and
``HMC`` with their coupled steps, the initial law, the meeting times of L-lag pairs and
the chains run to time ``t`` — are the MCMC layer's (:mod:`pymc_manidp.mcmc.kernels`).
They load on first use, so that the rest of the privacy layer (the ``Release`` record,
the audits) runs without PyMC.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from pymc_manidp._options import options
from pymc_manidp._validation import check_positive_int, check_positive_real
from pymc_manidp.rng import as_generator

#: Names of :mod:`pymc_manidp.mcmc.kernels` that belong to this module's interface too,
#: served on first use (``__getattr__``).
_FROM_KERNELS = ("CouplingError",)

__all__ = sorted(
    [
        *_FROM_KERNELS,
        "DeltaEstimate",
        "TVBound",
        "coupled_release",
        "delta_from_tv",
        "estimate_delta",
        "none_late_upper",
        "plot_tv_bound",
        "tv_bound",
    ]
)


def _kernels():
    """``pymc_manidp.mcmc.kernels``, imported on first use (the mcmc package loads PyMC)."""
    from pymc_manidp.mcmc import kernels

    return kernels


def __getattr__(name):
    # CouplingError is raised by the kernels' meeting_times: one class, defined there
    if name in _FROM_KERNELS:
        value = globals()[name] = getattr(_kernels(), name)  # later look-ups skip this
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_FROM_KERNELS})


DELTA_ESTIMATE_NOTE = (
    "estimated, not proven: delta_hat = min(1, (1 + e^epsilon) * TV_hat), TV_hat the "
    "L-lag coupling estimate (Biswas, Jacob & Vanetti 2019), capped at 1, of an upper "
    "bound on the total variation between the coupled kernel's law at time t and the "
    "mechanism's law; a Monte Carlo average with the standard error given, measured on "
    "these data only, for that kernel (tuned on these data) run from that initial law. "
    "Not the delta of an (epsilon, delta)-DP guarantee, which needs the TV bounded on "
    "every data set; a delta of 1 is vacuous"
)


def _one_plus_exp(epsilon):
    """``1 + e^epsilon``, ``inf`` where ``e^epsilon`` overflows a float (epsilon > 709.78)."""
    try:
        return 1.0 + math.exp(epsilon)
    except OverflowError:
        return math.inf


def _capped(factor, x):
    """``min(1, factor * x)`` for ``x >= 0``, with ``0 * inf`` read as 0 (x = 0 is exact)."""
    return 0.0 if x == 0 else min(1.0, factor * x)


def none_late_upper(reps, z=2.0) -> float:
    r"""Upper confidence limit on the chance of a late pair when none of ``reps`` was late.

    When every one of ``R`` pairs met in time (each term of :func:`tv_bound` is 0), the
    estimate and its standard error are both 0, and ``tv + z se`` would claim a TV of
    exactly 0. But ``R`` pairs cannot see a rare late pair: the exact one-sided upper
    limit for a probability ``p`` after 0 events in ``R`` trials is

    .. math:: 1 - \alpha^{1/R} \approx -\ln(\alpha)/R,

    at the level :math:`\alpha = 2(1 - \Phi(z))` of the ``± z se`` band (``z = 1.96``:
    :math:`\alpha = 0.05`, the rule of three, ``3/R``; ``z = 2``: ``3.09/R``). A late
    pair contributes at least 1 to the L-lag sum, so this is the smallest TV bound the
    ``R`` pairs can support; a tail of very late pairs (contributing several lags
    each) is not excluded by any finite ``R``.

    Parameters
    ----------
    reps : int
        The number of pairs ``R``.
    z : float
        The width of the band in standard errors (``> 0``).

    Returns
    -------
    float
        The upper limit, in ``(0, 1)``.

    Examples
    --------
    >>> round(none_late_upper(200, z=1.96) * 200, 2)  # the rule of three: about 3
    2.97
    >>> round(none_late_upper(200), 4)  # R = 200 cannot certify a TV below 1.5 %
    0.0153
    """
    reps = check_positive_int(reps, "reps")
    z = check_positive_real(z, "z")
    alpha = math.erfc(z / math.sqrt(2.0))  # two-sided tail of the +-z band
    return -math.expm1(math.log(alpha) / reps)


# --------------------------------------------------------------------------- bounds


@dataclass(frozen=True)
class TVBound:
    r"""The L-lag estimate of an upper bound on :math:`\mathrm{TV}(\pi_t, \pi)`, per ``t``.

    Attributes
    ----------
    t : ndarray of int, shape ``(T,)``
    estimate : ndarray, shape ``(T,)``
        ``min(1, raw)``: a TV is at most 1, so the cap keeps an upper bound (and the
        mean is capped, not each term: a mean of capped terms could fall below TV).
    se : ndarray, shape ``(T,)``
        The Monte Carlo standard error of ``raw`` (sample sd / sqrt(R)).
    lag : int
    meeting_times : ndarray of int, shape ``(R,)``
    raw : ndarray, shape ``(T,)``
        Mean over the pairs of :math:`\max(0, \lceil(\tau - L - t)/L\rceil)`, the
        unbiased estimate of the L-lag bound; above 1 it says how far the chain still
        is from its target (in lags), not a TV.
    """

    t: np.ndarray
    estimate: np.ndarray
    se: np.ndarray
    lag: int
    meeting_times: np.ndarray = field(repr=False)
    raw: np.ndarray = field(repr=False)

    def upper(self, z=2.0):
        """``min(1, raw + z * se)``: an approximate one-sided upper confidence limit.

        Where no pair was late (``raw = 0``, so ``se = 0``),
        :func:`~pymc_manidp.privacy.none_late_upper` instead (about ``3/R``): ``R``
        pairs cannot certify a TV of 0."""
        floor = none_late_upper(self.meeting_times.size, z)
        return np.minimum(1.0, np.where(self.raw > 0, self.raw + z * self.se, floor))

    def lower(self, z=2.0):
        """``min(1, max(0, raw - z * se))``: the other side of the band."""
        return np.minimum(1.0, np.maximum(0.0, self.raw - z * self.se))

    def at(self, t):
        """``(estimate, se)`` at one time ``t`` (computed from the meeting times)."""
        b = tv_bound(self.meeting_times, self.lag, [t])
        return float(b.estimate[0]), float(b.se[0])


def tv_bound(meeting_times, lag, t):
    r"""The L-lag bound on :math:`\mathrm{TV}(\pi_t, \pi)`, capped at 1, estimated at times ``t``.

    .. math:: \mathrm{TV}(\pi_t, \pi) \le
              \min\big(1, E[\max(0, \lceil(\tau - L - t)/L\rceil)]\big)

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
        The estimate (capped at 1), its uncapped mean and standard error at each of
        the times ``t``.

    Examples
    --------
    >>> b = tv_bound([5, 12, 30, 7], lag=5, t=[0, 10, 30])
    >>> b.raw.tolist()  # ceil((tau - 5 - t)/5)^+: [0,2,5,1], [0,0,3,0], [0,0,0,0]
    [2.0, 0.75, 0.0]
    >>> b.estimate.tolist()  # a TV is at most 1
    [1.0, 0.75, 0.0]
    """
    tau = np.asarray(meeting_times, float)
    if tau.ndim != 1 or tau.size < 2:
        raise ValueError("need at least two meeting times (a 1-D array)")
    lag = check_positive_int(lag, "lag")
    if np.any(tau < lag):
        raise ValueError("a meeting time is smaller than the lag: not L-lag meeting times")
    ts = np.atleast_1d(np.asarray(t, dtype=np.int64))
    terms = np.maximum(0.0, np.ceil((tau[None, :] - lag - ts[:, None]) / lag))
    raw = terms.mean(axis=1)
    se = terms.std(axis=1, ddof=1) / math.sqrt(tau.size)
    return TVBound(ts, np.minimum(1.0, raw), se, lag, np.asarray(meeting_times), raw)


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
        t, est, se, raw = bound.t, bound.estimate, bound.se, bound.raw
        lag, reps = bound.lag, bound.meeting_times.size
    else:
        curve = bound["curve"]
        t, est, se = (np.asarray(curve[k], float) for k in ("t", "tv_hat", "se"))
        raw = np.asarray(curve.get("raw", est), float)  # records before the cap had none
        lag, reps = bound["lag"], bound["reps"]
        t_mark = bound["t"] if t_mark is None else t_mark
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(t, est, color="C0", label="L-lag TV bound (estimate, capped at 1)")
    # the band of the uncapped mean, capped: a TV lies in [0, 1]
    low = np.minimum(1.0, np.maximum(raw - z * se, 0.0))
    ax.fill_between(
        t, low, np.minimum(1.0, raw + z * se), color="C0", alpha=0.25, label=f"± {z:g} s.e."
    )
    if t_mark is not None:
        ax.axvline(t_mark, color="k", ls=":", label=f"t = {t_mark}")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("upper bound on TV(π_t, π)")
    ax.set_ylim(0.0, 1.05)
    ax.set_title(f"L-lag coupling bound (L = {lag}, R = {reps})")
    ax.legend()
    return ax


@dataclass(frozen=True)
class DeltaEstimate:
    r"""Estimated δ of an MCMC draw at time ``t``: :math:`(1 + e^\varepsilon)` times the TV bound.

    Not the δ of an (ε, δ)-DP guarantee: measured on one data set (see the module
    docstring).

    Attributes
    ----------
    epsilon : float
    t : int
    tv, tv_se : float
        The TV bound's estimate at ``t`` (capped at 1) and its Monte Carlo standard error.
    delta_hat, delta_se : float
        :math:`(1 + e^\varepsilon)` times them, each capped at 1 (a δ of 1 is vacuous,
        every mechanism is (ε, 1)-DP); finite for any ε, also where
        :math:`e^\varepsilon` overflows (then δ̂ is 0 if the TV bound is 0, else 1).
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

    def tv_upper(self, z=2.0) -> float:
        """``min(1, tv + z * tv_se)``; when every pair met in time (``tv = tv_se = 0``),
        the upper limit :func:`~pymc_manidp.privacy.none_late_upper` (about ``3/R``)
        instead of 0."""
        if self.tv > 0 or self.tv_se > 0:
            return min(1.0, self.tv + z * self.tv_se)
        return none_late_upper(self.bound.meeting_times.size, z)

    def delta_upper(self, z=2.0) -> float:
        """``min(1, (1 + e^epsilon) * tv_upper(z))``: what a cautious curator would state.

        Never 0: with every one of ``R`` pairs met in time it is
        ``(1 + e^epsilon)`` times about ``3/R`` (:func:`~pymc_manidp.privacy.none_late_upper`)."""
        return delta_from_tv(self.epsilon, self.tv_upper(z))

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
            "tv_upper_2se": self.tv_upper(2.0),
            "lag": self.bound.lag,
            "reps": int(self.bound.meeting_times.size),
            "kernel": dict(self.kernel),
            "curve": {
                "t": self.bound.t.tolist(),
                "tv_hat": self.bound.estimate.tolist(),
                "se": self.bound.se.tolist(),
                "raw": self.bound.raw.tolist(),
            },
        }


def delta_from_tv(epsilon, tv):
    r"""``min(1, (1 + e^epsilon) * tv)``: the δ of an (ε, δ) guarantee from a TV distance γ.

    If the released law is within TV γ of an ε-DP mechanism's law on every data set,
    the release is (ε, (1 + e^ε)γ)-DP (module docstring). The value is capped at 1:
    every mechanism is (ε, 1)-DP, so a larger δ says nothing more. ``tv = 0`` gives 0
    for any ε, and an ε whose :math:`e^\varepsilon` overflows a float gives 1 for
    ``tv > 0``.

    Parameters
    ----------
    epsilon : float
        The mechanism's ε, finite and ``> 0``.
    tv : float
        A bound on the total variation, ``>= 0`` (values above 1 are allowed: capped).

    Returns
    -------
    float
        δ in ``[0, 1]``.

    Examples
    --------
    >>> round(delta_from_tv(1.0, 0.01), 6)  # (1 + e) * 0.01
    0.037183
    >>> delta_from_tv(1.0, 0.5), delta_from_tv(1e300, 0.0), delta_from_tv(1e300, 1e-12)
    (1.0, 0.0, 1.0)
    """
    epsilon = check_positive_real(epsilon, "epsilon")
    tv = _real_tv(tv)
    return _capped(_one_plus_exp(epsilon), tv)


def _real_tv(tv):
    tv = float(tv)
    if not tv >= 0.0:  # NaN too
        raise ValueError(f"tv must be a number >= 0, got {tv!r}")
    return tv


def _check_t(t):
    """``t`` as int if it is an integer ``>= 1`` (the released draw's time)."""
    if isinstance(t, numbers.Integral) and not isinstance(t, bool) and t < 1:
        raise ValueError(
            f"t must be an integer >= 1, got {t}: the released draw is the chain's state "
            "after t steps, and at t = 0 it would be a draw of the initial law, not of "
            "the mechanism. Use t >= 1 (a release's tune length)"
        )
    return check_positive_int(t, "t")  # TypeError for a non-integer


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
    max_seconds=None,
    random_seed=None,
):
    r"""Estimate δ for a draw at time ``t`` of a fixed MCMC kernel on ``model``.

    Measured on this model's data only: not the δ of an (ε, δ)-DP guarantee (see the
    module docstring).

    Parameters
    ----------
    model : pm.Model or pymc_manidp.mcmc.BatchTarget
        The mechanism's model (e.g. ``mech.model(data)``).
    epsilon : float
        The release's privacy budget, finite and ``> 0`` (an ε whose
        :math:`e^\varepsilon` overflows gives δ̂ = 1, or 0 when the TV bound is 0).
    t : int
        The time of the released draw (a release's tune length), ``>= 1``.
    kernel : "hmc", "rwmh", pymc_manidp.mcmc.RWMH or pymc_manidp.mcmc.HMC
        A name tunes one (by short coupled runs); an instance is used as is.
    lag : int, optional
        ``L``; default ``t``.
    reps : int
        Number of coupled pairs ``R``.
    t_grid : array of int, optional
        Times of the curve kept in the result (default 0 .. ``2t`` in about 100 steps).
    init : callable, optional
        The initial law ``init(size, rng) -> (size, dim)``; default: the model's
        initial point jittered by ``U(-1, 1)`` per coordinate.
    max_iter : int
        Cap on the steps of a pair (see :func:`pymc_manidp.mcmc.meeting_times`).
    max_seconds : float, optional
        Time budget (default: ``$PYMC_MANIDP_MCMC_MAX_SECONDS``, else 600 s). The lag
        phase and one coupled step are costed first, from the measured cost of one
        batched step, and refused when over it; the coupled phase stops when the
        budget is spent.
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    DeltaEstimate
        The estimate δ̂ at ``t`` with its standard error, the TV curve and the kernel's settings.

    Raises
    ------
    ValueError
        For ``t < 1``, or a run whose estimated time exceeds the budget (with the numbers).
    CouplingError
        When some pair has not met within ``max_iter`` steps or the time budget.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0, shape=2)
    >>> est = estimate_delta(m, epsilon=1.0, t=50, kernel="rwmh", reps=50, random_seed=1)
    >>> est.delta_hat < 0.1, est.kernel["kernel"]
    (True, 'RWMH')
    """
    t = _check_t(t)
    epsilon = check_positive_real(epsilon, "epsilon")
    lag = t if lag is None else check_positive_int(lag, "lag")
    reps = check_positive_int(reps, "reps")
    rng = as_generator(random_seed)
    target, kernel = _target_and_kernel(model, kernel, init, rng)
    plan = _plan(
        target, kernel, t=t, lag=lag, reps=reps, chains=0, init=init, max_seconds=max_seconds
    )
    return _estimate(
        target, kernel, epsilon, t, lag, reps, t_grid, init, max_iter, plan.meeting_seconds, rng
    )


def _estimate(target, kernel, epsilon, t, lag, reps, t_grid, init, max_iter, seconds, rng):
    """The meeting times and the DeltaEstimate, arguments checked and the time planned."""
    tau = _kernels().meeting_times(
        target,
        kernel,
        lag=lag,
        reps=reps,
        init=init,
        max_iter=max_iter,
        max_seconds=seconds,
        random_seed=rng,
    )
    if t_grid is None:
        t_grid = np.unique(np.linspace(0, max(2 * t, 10), 101).astype(int))
    grid = np.union1d(np.asarray(t_grid, dtype=np.int64), [t])
    bound = tv_bound(tau, lag, grid)
    tv, se = bound.at(t)
    factor = _one_plus_exp(epsilon)
    return DeltaEstimate(
        float(epsilon),
        t,
        tv,
        se,
        _capped(factor, tv),
        _capped(factor, se),  # the capped estimate lies in [0, 1]: so does its spread
        bound,
        kernel.describe(),
    )


@dataclass(frozen=True)
class _Plan:
    """Seconds the known parts of a coupled estimate will take at least, and what is left."""

    meeting_seconds: float  # the budget of meeting_times (lag phase + coupled phase)
    estimate: float


def _plan(target, kernel, *, t, lag, reps, chains, init, max_seconds):
    r"""Cost the lag phase, one coupled step and ``chains`` chains run ``t`` steps; refuse.

    Each part is a number of batched steps times the measured cost of one
    (:func:`pymc_manidp.mcmc.kernels.step_seconds`, the least of three timings: an
    estimate from below). Raises a ``ValueError`` with the numbers when their sum
    exceeds the budget, before any of them runs.
    """
    from pymc_manidp.mcmc.time_limit import MAX_SECONDS_ENV

    if max_seconds is None:
        max_seconds = options["mcmc_max_seconds"]
    else:
        max_seconds = check_positive_real(max_seconds, "max_seconds")
    k = _kernels()
    step = k.step_seconds(target, kernel, reps, init=init)
    coupled = k.step_seconds(target, kernel, reps, coupled=True, init=init)
    parts = [
        (f"the lag phase: L = {lag} steps of {reps} chains at {step * 1e3:.3g} ms", lag * step),
        (f"at least one coupled step of {reps} pairs, {coupled * 1e3:.3g} ms", coupled),
    ]
    if chains:
        draw = step if chains == reps else k.step_seconds(target, kernel, chains, init=init)
        parts.append(
            (
                f"the released chains: t = {t} steps of {chains} chains at {draw * 1e3:.3g} ms",
                t * draw,
            )
        )
    estimate = sum(seconds for _, seconds in parts)
    if estimate > max_seconds:
        raise ValueError(
            f"the coupled delta estimate at t = {t} would take at least "
            f"{_duration(estimate)} here ({'; '.join(what for what, _ in parts)}), over "
            f"the {max_seconds:.3g} s budget. Use a smaller t (or lag), fewer reps or "
            f"chains, or raise the budget (max_seconds=, or ${MAX_SECONDS_ENV})"
        )
    draw_seconds = parts[2][1] if chains else 0.0
    return _Plan(meeting_seconds=max_seconds - draw_seconds, estimate=estimate)


def _duration(seconds):
    """``seconds`` in the unit a reader grasps: s, min, h or days."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


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
    max_seconds=None,
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
    the recorded δ̂ uses :math:`\min(1, 2\widehat{\mathrm{TV}}/\hat p)`, ``p`` the
    fraction of the chains inside. δ̂ is capped at 1 and is measured on these data
    only: not the δ of an (ε, δ)-DP guarantee (module docstring).

    Parameters
    ----------
    model : pm.Model or pymc_manidp.mcmc.BatchTarget
        The mechanism's model (e.g. ``mech.model(data)``).
    epsilon : float
        The release's privacy budget, finite and ``> 0``.
    t : int
        Steps of the released chain (a release's tune length), ``>= 1``.
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
    max_seconds : float, optional
        Time budget of the whole (default: ``$PYMC_MANIDP_MCMC_MAX_SECONDS``, else
        600 s): the lag phase, one coupled step and the released chains are costed
        before any chain runs and refused with the numbers when over it; the coupled
        phase stops (``CouplingError``) when what is left is spent.
    random_seed : int, Generator or None
        Random source; a fixed seed is for tests only.

    Returns
    -------
    value : ndarray
        The point (``name``'s shape).
    record : dict
        :meth:`DeltaEstimate.as_dict`, with for restricted laws ``inside_fraction``
        and ``tv_conditioned_hat``; ``delta_hat`` is computed from the latter.

    Raises
    ------
    ValueError
        For ``t < 1``, or a run whose estimated time exceeds the budget (with the numbers).
    CouplingError
        When some pair has not met within the budget, or no chain ends inside the ball.
    """
    t = _check_t(t)
    epsilon = check_positive_real(epsilon, "epsilon")
    reps = check_positive_int(reps, "reps")
    chains = check_positive_int(chains, "chains")
    rng = as_generator(random_seed)
    target, kernel = _target_and_kernel(model, kernel, None, rng)
    plan = _plan(
        target, kernel, t=t, lag=t, reps=reps, chains=chains, init=None, max_seconds=max_seconds
    )
    est = _estimate(
        target, kernel, epsilon, t, t, reps, None, None, 100_000, plan.meeting_seconds, rng
    )
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
    factor = _one_plus_exp(est.epsilon)
    tv = min(1.0, 2.0 * est.tv / p)
    record.update(
        inside_fraction=p,
        tv_conditioned_hat=tv,
        delta_hat=_capped(factor, tv),
        delta_se=_capped(factor, 2.0 * est.tv_se / p),
        delta_upper_2se=_capped(factor, min(1.0, 2.0 * est.tv_upper(2.0) / p)),
    )
    return points[int(np.argmax(inside))], record
