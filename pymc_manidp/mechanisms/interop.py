r"""Our releases in the other DP libraries' accountants (the ``[budget]`` extra).

- :func:`opendp_measurement`: a mechanism's exact release as an OpenDP
  ``Measurement`` (``opendp.measurements.make_user_measurement``), so that OpenDP's
  compositors can account for it beside OpenDP's own measurements. Its input metric is
  ``ChangeOneDistance`` (replace-one, n fixed: docs/mechanisms.md) and its privacy map
  is ``d_in -> epsilon * d_in``: one replaced record costs ε (the mechanism's theorem),
  ``k`` replaced records ``k·ε`` (group privacy: a chain of ``k`` neighbouring data sets).
- :func:`dp_event`: a pure ε-DP release as a ``dp_accounting`` event, the binary
  randomized response with the same ε (whose privacy loss is ±ε: it dominates every
  ε-DP mechanism, Kairouz, Oh & Viswanath 2015), to be composed by a ``PLDAccountant``
  with ``NeighboringRelation.REPLACE_ONE``.

Both libraries are optional: ``pip install 'pymc-manidp[budget]'``.
"""

from __future__ import annotations

import contextvars
import math

from pymc_manidp.privacy.release import Release

__all__ = ["dp_event", "opendp_measurement"]


def _need(module: str, package: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{package} is not installed: pip install 'pymc-manidp[budget]' (or {package})"
        ) from None


def opendp_measurement(mech, *, input_domain=None, **release_kwargs):
    r"""The exact release of ``mech`` as an OpenDP measurement.

    .. math::

        \text{privacy map: } d_{\text{in}} \mapsto \varepsilon \, d_{\text{in}}
        \quad (d_{\text{in}} = \text{records replaced})

    Enables OpenDP's ``"contrib"`` and ``"honest-but-curious"`` features, which a
    user measurement needs: OpenDP trusts the privacy map it is given, here the
    mechanism's theorem. The measurement releases with the exact sampler only (an
    MCMC release has no proved ε-DP guarantee to state as a max-divergence), outside
    any :class:`~pymc_manidp.privacy.budget.PrivacyBudget` (OpenDP's compositor is its
    accountant then).

    Parameters
    ----------
    mech : Mechanism
        The mechanism whose exact release the measurement runs.
    input_domain : opendp Domain or None
        Default: a user domain of arrays of records inside the mechanism's public ball.
    **release_kwargs
        Passed to ``mech.release`` (e.g. ``clip=True``); not ``sampler`` or ``budget``.

    Returns
    -------
    opendp.mod.Measurement
        Input metric ``ChangeOneDistance``, output measure ``MaxDivergence``; its
        output is the released point (an ndarray).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=0.5, center=[0, 0, 1.0],
    ...                         radius=0.7)
    >>> meas = opendp_measurement(mech)
    >>> meas.map(1), meas.map(3)
    (0.5, 1.5)
    >>> meas(np.array([[0, 0, 1.0], [0, 0.6, 0.8]])).shape
    (3,)
    """
    dp = _need("opendp.prelude", "opendp")
    for key in ("sampler", "budget", "delta"):
        if key in release_kwargs:
            raise ValueError(
                f"{key}= is not for an OpenDP measurement: it releases exactly (pure "
                "epsilon-DP) and OpenDP's compositor does the accounting"
            )
    dp.enable_features("contrib", "honest-but-curious")
    epsilon = float(mech.epsilon)

    if input_domain is None:

        def member(x) -> bool:
            try:
                mech.domain.check(x)
            except (TypeError, ValueError):
                return False
            return True

        input_domain = dp.user_domain(
            f"PointsInPublicBall({mech.manifold}, radius={mech.domain.radius:g})", member
        )

    def function(data):
        # a fresh context holds no entered budget: OpenDP accounts for this release
        run = contextvars.Context().run
        return run(mech.release, data, sampler="exact", **release_kwargs).value

    def privacy_map(d_in):
        if isinstance(d_in, bool) or not isinstance(d_in, int) or d_in < 0:
            raise ValueError(f"d_in must be a number of replaced records >= 0, got {d_in!r}")
        return epsilon * d_in  # group privacy over d_in replacements

    return dp.m.make_user_measurement(
        input_domain,
        dp.change_one_distance(),
        dp.max_divergence(),
        function,
        privacy_map,
    )


def dp_event(release: Release):
    """A pure ε-DP release, or a tangent Gaussian one, as a ``dp_accounting`` event.

    The event is ``RandomizedResponseDpEvent(noise_parameter=2/(1 + e^ε),
    num_buckets=2)``: binary randomized response reports the truth with probability
    e^ε/(1 + e^ε), so its privacy loss is exactly ±ε, and it dominates any ε-DP
    mechanism; composing it is composing our release. Compose it with a
    ``PLDAccountant(NeighboringRelation.REPLACE_ONE)`` (our neighbouring relation;
    dp_accounting refuses the event under add/remove).

    A tangent Gaussian release (``release.tangent["noise"] == "gaussian"``,
    docs/tangent.md) is its own Gaussian event: ``GaussianDpEvent(noise_multiplier =
    2/mu)``, ``mu = Delta_T/sigma``, for the same ``REPLACE_ONE`` accountant (which
    reads the event's sensitivity as add/remove and doubles it for a replacement).

    Parameters
    ----------
    release : Release
        An exact release (``delta == 0``), or a tangent Gaussian release.

    Returns
    -------
    dp_accounting.RandomizedResponseDpEvent or dp_accounting.GaussianDpEvent
        Binary randomized response with the release's ε; or the Gaussian event.

    Raises
    ------
    ValueError
        For an MCMC release (no proved δ) or another ``delta > 0``: dp_accounting 0.6 has no
        event for a generic (ε, δ) mechanism; charge it to a
        :class:`~pymc_manidp.privacy.budget.PrivacyBudget` with
        ``composition="optimal"`` instead.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> mech = pmd.KNGMechanism(pmd.Sphere(dim=2), epsilon=0.5, center=[0, 0, 1.0],
    ...                         radius=0.7)
    >>> event = dp_event(mech.release(np.array([[0, 0, 1.0], [0, 0.6, 0.8]])))
    >>> p = event.noise_parameter
    >>> round(float(np.log((1 - p / 2) / (p / 2))), 12)
    0.5
    """
    dpa = _need("dp_accounting", "dp-accounting")
    if not isinstance(release, Release):
        raise TypeError(f"release must be a Release, got {type(release).__name__}")
    if release.delta is None:
        raise ValueError(
            "an MCMC release has no proved delta, so it is no dp_accounting event; release "
            "with sampler='exact' (pure epsilon-DP)"
        )
    tangent = release.tangent
    # a two-stage release has Gaussian noise but no mu (its first stage is pure eps):
    # a generic (eps, delta) release, refused below
    if tangent is not None and tangent["noise"] == "gaussian" and tangent["mu"] is not None:
        # issue 39: a tangent Gaussian release is a Gaussian mechanism of replace-one
        # sensitivity Delta_T = mu sigma. dp_accounting reads a GaussianDpEvent's
        # sensitivity 1 as add/remove and doubles it under REPLACE_ONE (its PLD at
        # noise_multiplier 4.2247 gives eps 2.12 at 1e-6, and 1.00 at 2 * 4.2247): so
        # the multiplier is 2 sigma/Delta_T = 2/mu
        return dpa.GaussianDpEvent(noise_multiplier=2.0 / float(tangent["mu"]))
    if release.delta > 0:
        raise ValueError(
            "dp_accounting has no event for a generic (epsilon, delta) mechanism: charge the "
            "release to a PrivacyBudget(composition='optimal') instead"
        )
    noise = 2.0 / (1.0 + math.exp(release.epsilon))
    return dpa.RandomizedResponseDpEvent(noise_parameter=noise, num_buckets=2)
