"""What both mechanisms share: argument checks and the release procedures.

The procedure checks every premise before any sampling. With ``sampler="exact"``
(the default) it draws the released value from the mechanism's law exactly
(:mod:`pymc_manidp.samplers.exact`): a pure ε-DP release with ``delta = 0``. With an
MCMC sampler it samples, gates on the diagnostics and only then draws the released
value (a uniformly random post-tuning draw, restricted to draws inside the public ball
when the law is restricted): an approximately DP release.
"""

from __future__ import annotations

import numpy as np

from pymc_manidp.geometry.validation import check_positive_int
from pymc_manidp.privacy.diagnostics import DiagnosticsError, check_run
from pymc_manidp.privacy.release import (
    EXACT_NOTE,
    FLOATING_POINT_NOTE,
    MCMC_DELTA_NOTE,
    Release,
)
from pymc_manidp.rng import resolve_rng
from pymc_manidp.samplers import exact, mcmc
from pymc_manidp.stats import reductions

__all__ = [
    "EXACT_SAMPLERS",
    "available_samplers",
    "check_sampler_args",
    "exact_release",
    "mcmc_release",
    "release",
    "resolve_rng",
]

EXACT_SAMPLERS: tuple[str, ...] = ("exact",)


def available_samplers(manifold) -> tuple[str, ...]:
    """Samplers that exist for this manifold: ``"exact"`` where an exact sampler does."""
    return (*(EXACT_SAMPLERS if exact.has_exact_sampler(manifold) else ()), *mcmc.SAMPLERS)


def check_sampler_args(sampler, draws, tune, chains, manifold=None):
    """Check the sampler's name (for ``manifold``, if given) and the MCMC arguments."""
    known = (*EXACT_SAMPLERS, *mcmc.SAMPLERS)
    available = known if manifold is None else available_samplers(manifold)
    if sampler not in available:
        if sampler in known:
            raise ValueError(
                f"no {sampler!r} sampler exists for {manifold}: available samplers for it "
                f"are {', '.join(available)}"
            )
        raise ValueError(f"unknown sampler {sampler!r}; available: {', '.join(available)}")
    if sampler in EXACT_SAMPLERS:
        return draws, tune, chains  # MCMC settings play no part in an exact release
    return (
        check_positive_int(draws, "draws"),
        check_positive_int(tune, "tune", minimum=0),
        check_positive_int(chains, "chains", minimum=2),
    )


def release(
    mech, data, *, sampler, random_seed, draws, tune, chains, clip, skip_diagnostics
) -> Release:
    """The release procedure of any mechanism object.

    ``mech`` provides ``manifold``, ``domain``, ``epsilon``, ``name``, ``restricted``,
    ``sensitivity(n)``, ``scale(n)``, ``model(data)`` and, for the exact sampler,
    ``_exact_draws(data, size, rng) -> ExactDraws`` (data already checked); for
    MCMC, ``mcmc_cache`` (a :class:`~pymc_manidp.samplers.mcmc.SamplerCache`) and
    ``_polar_args(data) -> (centre, rate, inputs)``, the values of the model's
    ``pm.Data`` (:func:`~pymc_manidp.samplers.mcmc.polar_data`).

    An MCMC release compiles ``model(data)`` on the mechanism's first release of
    ``n`` points with that sampler and reuses it for later data sets of the same
    size, every ``pm.Data`` replaced by the new data's values before sampling.
    """
    draws, tune, chains = check_sampler_args(sampler, draws, tune, chains, mech.manifold)
    if sampler not in EXACT_SAMPLERS and reductions.is_dask(data):
        raise ValueError(
            f"the {sampler} sampler keeps the data in its model: with a Dask array use "
            "sampler='exact', which reads it in passes and never gathers it"
        )
    data = mech.domain.check(data, clip=clip)
    n = len(data)
    sigma = mech.scale(n)  # raises before sampling if the law does not exist
    if sampler in EXACT_SAMPLERS:
        return exact_release(mech, data, sigma, random_seed, clip)
    center, rate, inputs = mech._polar_args(data)
    compiled = mech.mcmc_cache.get(n, sampler, lambda: mech.model(data))
    return mcmc_release(
        compiled=compiled,
        values=mcmc.polar_data(mech.manifold, center, rate, inputs),
        manifold=mech.manifold,
        domain=mech.domain,
        restricted=mech.restricted,
        mechanism=mech.name,
        epsilon=mech.epsilon,
        sigma=sigma,
        sensitivity=mech.sensitivity(n),
        n=n,
        sampler=sampler,
        draws=draws,
        tune=tune,
        chains=chains,
        random_seed=random_seed,
        skip_diagnostics=skip_diagnostics,
        opt_outs=("clip",) if clip else (),
    )


def exact_release(mech, data, sigma, random_seed, clip) -> Release:
    """One exact draw of the mechanism's law: pure ε-DP, ``delta = 0``.

    The rejection statistics (``sampler_info``) depend on the data: the Release keeps
    them for the curator and leaves them out of :meth:`Release.public`.
    """
    rng, policy = resolve_rng(random_seed)
    out = mech._exact_draws(data, 1, rng)
    n = len(data)
    return Release(
        value=mech.manifold.validate(out.points[0]),
        epsilon=mech.epsilon,
        delta=0.0,
        mechanism=mech.name,
        sigma=sigma,
        sensitivity=mech.sensitivity(n),
        n=n,
        sampler="exact",
        seed_policy=policy,
        diagnostics=None,
        opt_outs=("clip",) if clip else (),
        notes=(FLOATING_POINT_NOTE, EXACT_NOTE),
        sampler_info={"proposals": out.proposals, **out.info},
    )


def mcmc_release(
    *,
    compiled,
    values,
    manifold,
    domain,
    restricted: bool,
    mechanism: str,
    epsilon: float,
    sigma: float,
    sensitivity: float,
    n: int,
    sampler: str,
    draws: int,
    tune: int,
    chains: int,
    random_seed,
    skip_diagnostics: bool,
    opt_outs: tuple = (),
) -> Release:
    rng, policy = resolve_rng(random_seed)
    seed = int(rng.integers(2**31 - 1))
    idata = compiled.sample(values, draws=draws, tune=tune, chains=chains, random_seed=seed)
    report = check_run(idata)
    if not report.passed:
        if not skip_diagnostics:
            raise DiagnosticsError(
                "the MCMC run failed its convergence checks, so nothing is released: "
                + "; ".join(report.failures)
                + ". Run longer (more draws/tune) or more chains; skip_diagnostics=True "
                "releases anyway and records that choice."
            )
        opt_outs = (*opt_outs, "skip_diagnostics: " + "; ".join(report.failures))
    x = np.asarray(idata.posterior["release"].values)
    flat = x.reshape((-1, *manifold.point_shape))
    candidates = np.arange(len(flat))
    if restricted:
        inside = np.asarray(idata.posterior["in_domain"].values).ravel().astype(bool)
        candidates = candidates[inside]
        if len(candidates) < 0.5 * len(flat):
            raise DiagnosticsError(
                f"only {len(candidates)} of {len(flat)} draws fell inside the public ball: "
                "the restricted law is poorly represented; use more data or a larger epsilon"
            )
    value = flat[rng.choice(candidates)]
    return Release(
        value=manifold.validate(value),
        epsilon=epsilon,
        delta=None,
        mechanism=mechanism,
        sigma=sigma,
        sensitivity=sensitivity,
        n=n,
        sampler=sampler,
        seed_policy=policy,
        diagnostics=idata,
        opt_outs=tuple(opt_outs),
        notes=(MCMC_DELTA_NOTE, FLOATING_POINT_NOTE),
    )
