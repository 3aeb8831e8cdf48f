"""The Release record: a private value and how it was made.

Privacy claims are data (as OpenDP's measurements carry their privacy map): a Release
states the mechanism, ``epsilon``, ``delta`` and what ``delta`` means for its sampler.
The MCMC run (``diagnostics``) depends on the data: it is for the curator, never for
publication; :meth:`Release.public` returns only what may be published.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "EXACT_NOTE",
    "FLOATING_POINT_NOTE",
    "MCMC_DELTA_ESTIMATED_NOTE",
    "MCMC_DELTA_NOTE",
    "Calibration",
    "Release",
    "Releases",
    "build_release",
]

MCMC_DELTA_NOTE = (
    "approximate DP: if the sampled law is within total variation gamma of the "
    "mechanism's law, the release is (epsilon, (1 + e^epsilon) * gamma)-DP; gamma is "
    "not bounded by any computation here, only supported by the convergence diagnostics"
)
MCMC_DELTA_ESTIMATED_NOTE = (
    "approximate DP: if the sampled law is within total variation gamma of the "
    "mechanism's law, the release is (epsilon, (1 + e^epsilon) * gamma)-DP; the value is "
    "a chain's state after a fixed number of steps of a fixed kernel, for which gamma was "
    "estimated by L-lag couplings (an estimate of an upper bound, with its standard "
    "error, measured on these data and kept by the curator): evidence, not a proof, so "
    "delta is not stated"
)
EXACT_NOTE = (
    "pure epsilon-DP (delta = 0): drawn exactly from the mechanism's law (closed-form "
    "noise or rejection sampling), without MCMC"
)
FLOATING_POINT_NOTE = (
    "sampled in floating point: not hardened against least-significant-bit attacks"
)
_EXACT_NOTES = (FLOATING_POINT_NOTE, EXACT_NOTE)
_MCMC_NOTES = (MCMC_DELTA_NOTE, FLOATING_POINT_NOTE)
_ESTIMATED_NOTES = (MCMC_DELTA_ESTIMATED_NOTE, FLOATING_POINT_NOTE)


@dataclass(frozen=True)
class Calibration:
    """The privacy map of one release: ``n``, the sensitivity Δ and the scale σ.

    A mechanism computes it once per release (``Mechanism.calibrate(n)``), draws
    with its ``sigma`` and records it in the :class:`Release`. All three are public:
    they depend on ``n``, the public ball and ε, never on the records.

    Attributes
    ----------
    n : int
        Number of records.
    sensitivity : float
        Δ: how far one record can move the mechanism's statistic.
    sigma : float
        σ, the scale of the mechanism's density (``2Δ/ε`` or ``Δ/ε``).

    Examples
    --------
    >>> Calibration(n=10, sensitivity=0.05, sigma=0.1)
    Calibration(n=10, sensitivity=0.05, sigma=0.1)
    """

    n: int
    sensitivity: float
    sigma: float


@dataclass(frozen=True)
class Release:
    """A differentially private value with its provenance.

    Attributes
    ----------
    value : ndarray
        The released point (shape ``point_shape``), a read-only copy.
    epsilon : float
    delta : float or None
        0 for exact samplers; ``None`` for MCMC, where it is not known (see
        ``delta_note``).
    mechanism : str
        The mechanism's name.
    sigma : float
        σ, the scale of the mechanism's density.
    sensitivity : float
        Δ, the sensitivity σ was calibrated to.
    n : int
        Number of records.
    sampler : str
    seed_policy : str
        ``"fixed seed"`` (reproducible, for tests) or ``"OS entropy"``.
    diagnostics : DataTree or None
        The MCMC run, for the curator only.
    opt_outs : tuple of str
        Names of the checks the caller chose to skip (``"clip"``,
        ``"skip_diagnostics"``), recorded for the audit trail. Only the names: what
        the skipped check found depends on the data (it is in ``sampler_info``).
    notes : tuple of str
    sampler_info : dict or None
        Exact samplers' rejection statistics (proposals, acceptance rates), or the
        MCMC checks that failed under ``skip_diagnostics``. They depend on the data:
        for the curator only, like ``diagnostics``.
    delta_estimate : dict or None
        MCMC releases made with ``estimate_delta=True``: the L-lag coupling
        **estimate** δ̂ (``privacy.coupling.coupled_release``), with its standard
        error. An estimate, not a proof, and computed from the data: for the curator
        only; ``delta`` stays ``None`` and :meth:`public` leaves it out.
    restricted : bool or None
        Whether the mechanism's law lives on the public ball only (KNG, the Laplace
        with ``restrict=True``); ``None`` when the record's maker did not say. Public:
        the likelihood of the value depends on it (issue 28).
    center : ndarray or None
        The public ball's center ``m0`` (shape ``point_shape``), a read-only copy.
    radius : float or None
        The public ball's radius ``r``.
    manifold : str or None
        The manifold released on, as its ``repr`` (e.g. ``"Sphere(dim=2, radius=1.0)"``).
    """

    value: np.ndarray
    epsilon: float
    delta: float | None
    mechanism: str
    sigma: float
    sensitivity: float
    n: int
    sampler: str
    seed_policy: str
    diagnostics: object = None
    opt_outs: tuple = ()
    notes: tuple = field(default_factory=tuple)
    sampler_info: dict | None = None
    # issue 17: curator-side estimate of delta; never published (public() lists its keys)
    delta_estimate: dict | None = None
    # issue 28: what a reader needs to write the value's likelihood (all public)
    restricted: bool | None = None
    center: np.ndarray | None = None
    radius: float | None = None
    manifold: str | None = None

    def __post_init__(self):
        # the record is immutable: a read-only copy, so neither the caller's array nor
        # ``rel.value[0] = ...`` can change what public() reports after the release
        value = np.array(self.value, dtype=float, copy=True)
        value.flags.writeable = False
        object.__setattr__(self, "value", value)
        if self.center is not None:
            center = np.array(self.center, dtype=float, copy=True)
            center.flags.writeable = False
            object.__setattr__(self, "center", center)

    @property
    def calibration(self) -> Calibration:
        """``n``, Δ and σ as the :class:`Calibration` the release was drawn with."""
        return Calibration(n=self.n, sensitivity=self.sensitivity, sigma=self.sigma)

    def public(self) -> dict:
        """What may be published: the value and its provenance, no data-dependent run.

        Besides the value, ε, δ, Δ, σ, ``n`` and how it was drawn, the record says
        what the likelihood of the value needs (:func:`~pymc_manidp.laws.noise_aware_model`):
        ``"manifold"`` (its ``repr``), ``"restricted"`` (whether the law lives on the
        public ball only) and ``"public_ball"`` (``center`` as nested lists,
        ``radius``; both public by the privacy rules). Each is ``None`` when unknown.
        JSON-serializable.
        """
        ball = None
        if self.center is not None and self.radius is not None:
            ball = {"center": np.asarray(self.center).tolist(), "radius": float(self.radius)}
        return {
            "value": np.asarray(self.value).tolist(),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mechanism": self.mechanism,
            "sigma": self.sigma,
            "sensitivity": self.sensitivity,
            "n": self.n,
            "sampler": self.sampler,
            "seed_policy": self.seed_policy,
            "opt_outs": list(self.opt_outs),
            "notes": list(self.notes),
            "manifold": self.manifold,
            "restricted": self.restricted,
            "public_ball": ball,
        }


def build_release(
    *,
    value,
    mechanism: str,
    epsilon: float,
    calibration: Calibration,
    sampler: str,
    seed_policy: str,
    exact: bool,
    diagnostics=None,
    opt_outs: tuple = (),
    sampler_info: dict | None = None,
    delta_estimate: dict | None = None,
    extra_notes: tuple = (),
    restricted: bool | None = None,
    domain=None,
) -> Release:
    """The one place a :class:`Release` is made: ``delta`` and the notes follow
    from whether the sampler is exact (``delta = 0``) or MCMC (``delta = None``);
    ``extra_notes`` come first (e.g. a baseline's own caveats). ``n``, Δ and σ come
    from the release's ``calibration``; the manifold and the public ball from
    ``domain`` (a ``DataDomain``), and ``restricted`` says whether the law lives on
    that ball only.

    Examples
    --------
    >>> cal = Calibration(n=10, sensitivity=0.05, sigma=0.1)
    >>> r = build_release(value=[0.0, 1.0], mechanism="KNG", epsilon=1.0, calibration=cal,
    ...                   sampler="exact", seed_policy="OS entropy", exact=True)
    >>> r.delta, r.public()["opt_outs"], r.calibration == cal
    (0.0, [], True)
    """
    if not isinstance(calibration, Calibration):
        raise TypeError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    for name in opt_outs:
        if name not in ("clip", "skip_diagnostics"):  # names only: never data-dependent text
            raise ValueError(f"unknown opt-out {name!r}")
    return Release(
        value=np.asarray(value),
        epsilon=float(epsilon),
        delta=0.0 if exact else None,
        mechanism=mechanism,
        sigma=float(calibration.sigma),
        sensitivity=float(calibration.sensitivity),
        n=int(calibration.n),
        sampler=sampler,
        seed_policy=seed_policy,
        diagnostics=diagnostics,
        opt_outs=tuple(opt_outs),
        notes=(*extra_notes, *_notes(exact, delta_estimate)),
        sampler_info=sampler_info,
        delta_estimate=delta_estimate,
        restricted=None if restricted is None else bool(restricted),
        center=None if domain is None else domain.center,
        radius=None if domain is None else float(domain.radius),
        manifold=None if domain is None else repr(domain.manifold),
    )


def _notes(exact, delta_estimate):
    """The sampler's notes: exact; MCMC with gamma estimated (``estimate_delta=True``:
    say what was estimated, not a number, which depends on the data); MCMC alone."""
    if exact:
        return _EXACT_NOTES
    return _MCMC_NOTES if delta_estimate is None else _ESTIMATED_NOTES


class Releases(tuple):
    """The releases of one ``Mechanism.release_many`` call, one per data set.

    A tuple of :class:`Release` in the order the data sets were given, with a table
    view (``values``, ``public()``). Each element is a release of its own (its own ε,
    Δ, σ, n and sampler statistics); nothing is shared between them but the call.

    Parameters
    ----------
    iterable : iterable of Release
        The releases, in order.

    Examples
    --------
    >>> cal = Calibration(n=10, sensitivity=0.05, sigma=0.1)
    >>> rel = [build_release(value=[0.0, float(i)], mechanism="KNG", epsilon=1.0,
    ...                      calibration=cal, sampler="exact", seed_policy="fixed seed",
    ...                      exact=True) for i in range(3)]
    >>> table = Releases(rel)
    >>> table.values.shape, len(table), table[2].value.tolist()
    ((3, 2), 3, [0.0, 2.0])
    """

    __slots__ = ()

    @property
    def values(self) -> np.ndarray:
        """The released values stacked, shape ``(R, *point_shape)``."""
        return np.stack([r.value for r in self])

    def public(self) -> list[dict]:
        """Each release's :meth:`Release.public` record, in order."""
        return [r.public() for r in self]
