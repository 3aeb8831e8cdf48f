"""The release procedure of every mechanism object: checks, sampling, gate, Release.

Privacy's job, so it lives in the privacy layer: it checks every premise of the
guarantee, runs the sampler, gates an MCMC run on its diagnostics and builds the
:class:`~pymc_manidp.privacy.release.Release` record. It uses the samplers (below
this layer) and a mechanism only through its public hooks (below), so it imports no
mechanism module: the mechanism objects sit above this layer and
``Mechanism.release`` calls :func:`release` (``tests/test_layers.py``).

The procedure checks every premise before any sampling. With ``sampler="exact"``
(the default) it draws the released value from the mechanism's law exactly
(:mod:`pymc_manidp.laws.exact`): a pure ε-DP release with ``delta = 0``. With an
MCMC sampler it samples, gates on the diagnostics and only then draws the released
value (a uniformly random post-tuning draw, restricted to draws inside the public ball
when the law is restricted): an approximately DP release.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pymc_manidp import mcmc
from pymc_manidp.geometry.validation import check_positive_int
from pymc_manidp.laws import exact
from pymc_manidp.privacy.diagnostics import DiagnosticsError, check_run
from pymc_manidp.privacy.release import Release, build_release
from pymc_manidp.rng import resolve_rng
from pymc_manidp.stats import reductions

__all__ = [
    "EXACT_SAMPLERS",
    "available_samplers",
    "check_sampler_args",
    "exact_release",
    "mcmc_release",
    "release",
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
    mech,
    data,
    *,
    sampler,
    random_seed,
    draws,
    tune,
    chains,
    clip,
    skip_diagnostics,
    estimate_delta=False,
) -> Release:
    """The release procedure of any mechanism object.

    ``mech`` is a :class:`~pymc_manidp.mechanisms.base.Mechanism`: ``manifold``,
    ``domain``, ``epsilon``, ``name``, ``restricted``, ``sensitivity(n)``,
    ``scale(n)``, ``model(data)`` and its public hooks: for the exact sampler
    ``exact_draws(data, size, rng) -> ExactDraws`` (data already checked); for
    MCMC, ``mcmc_cache`` (a :class:`~pymc_manidp.mcmc.SamplerCache`) and
    ``mcmc_inputs(data) -> (center, sigma, inputs)``, the values of the model's
    ``pm.Data`` (:func:`~pymc_manidp.mcmc.polar_data`).

    An MCMC release compiles ``model(data)`` on the mechanism's first release of
    ``n`` points with that sampler and reuses it for later data sets of the same
    size, every ``pm.Data`` replaced by the new data's values before sampling.

    ``estimate_delta=True`` (MCMC only, issue 17): after the gate passed, the released
    value is instead drawn at time ``tune`` from a fixed coupled kernel (HMC for
    ``"nuts"``, random-walk Metropolis for ``"metropolis"``) whose L-lag coupling
    estimate δ̂ is recorded in ``Release.delta_estimate`` (curator side; ``delta``
    stays ``None``). See :func:`pymc_manidp.privacy.coupling.coupled_release`.
    """
    draws, tune, chains = check_sampler_args(sampler, draws, tune, chains, mech.manifold)
    resolve_rng(random_seed)  # a bad seed is refused before any work on the data
    if estimate_delta and sampler in EXACT_SAMPLERS:  # issue 17
        raise ValueError("estimate_delta=True is for MCMC samplers: an exact release has delta = 0")
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
    # one pass over the data per leapfrog step: refuse runs that would take hours
    mcmc.check_mcmc_budget(mech.manifold, n, chains=chains, tune=tune, draws=draws)
    center, rate, inputs = mech.mcmc_inputs(data)
    compiled = mech.mcmc_cache.get(n, sampler, lambda: mech.model(data))
    rel = mcmc_release(
        mech,
        compiled,
        mcmc.polar_data(mech.manifold, center, rate, inputs),
        n=n,
        sigma=sigma,
        sampler=sampler,
        draws=draws,
        tune=tune,
        chains=chains,
        random_seed=random_seed,
        skip_diagnostics=skip_diagnostics,
        opt_outs=("clip",) if clip else (),
    )
    if estimate_delta:  # issue 17: the value comes from the chain whose delta is estimated
        rel = with_delta_estimate(
            rel, mech.model(data), tune, mech.domain if mech.restricted else None, random_seed
        )
    return rel


def with_delta_estimate(rel, model, tune, domain, random_seed) -> Release:
    """``rel`` with its value redrawn from a coupled kernel at time ``tune`` and δ̂ recorded.

    ``model`` is a fresh model of the same data (the cached compiled one may hold
    another data set's values). Issue 17; :func:`privacy.coupling.coupled_release`.
    """
    from pymc_manidp.privacy.coupling import coupled_release

    rng, _ = resolve_rng(random_seed)
    rng = np.random.default_rng([int(rng.integers(2**63 - 1)), 17])  # apart from the run's
    value, record = coupled_release(
        model,
        epsilon=rel.epsilon,
        t=max(int(tune), 1),
        kernel="hmc" if rel.sampler == "nuts" else "rwmh",
        domain=domain,
        random_seed=rng,
    )
    # the record carries its own note; Release.notes are published, the estimate is not
    return dataclasses.replace(rel, value=np.asarray(value), delta_estimate=record)


def exact_release(mech, data, sigma, random_seed, clip) -> Release:
    """One exact draw of the mechanism's law: pure ε-DP, ``delta = 0``.

    The rejection statistics (``sampler_info``) depend on the data: the Release keeps
    them for the curator and leaves them out of :meth:`Release.public`.
    """
    rng, policy = resolve_rng(random_seed)
    out = mech.exact_draws(data, 1, rng)
    n = len(data)
    return _record(
        mech,
        out.points[0],
        n=n,
        sigma=sigma,
        sampler="exact",
        seed_policy=policy,
        opt_outs=("clip",) if clip else (),
        sampler_info={"proposals": out.proposals, **out.info},
    )


def mcmc_release(
    mech,
    compiled,
    values,
    *,
    n: int,
    sigma: float,
    sampler: str,
    draws: int,
    tune: int,
    chains: int,
    random_seed,
    skip_diagnostics: bool,
    opt_outs: tuple = (),
) -> Release:
    """Sample ``compiled`` with the ``pm.Data`` ``values``, gate on the diagnostics,
    then release one uniformly random post-tuning draw (inside the ball if restricted)."""
    manifold, restricted, domain = mech.manifold, mech.restricted, mech.domain
    rng, policy = resolve_rng(random_seed)
    seed = int(rng.integers(2**31 - 1))
    idata = compiled.sample(values, draws=draws, tune=tune, chains=chains, random_seed=seed)
    report = check_run(idata)
    # which NUTS implementation drew the run (nutpie or PyMC's): not data-dependent
    sampler_info = {"backend": compiled.backend}
    if not report.passed:
        if not skip_diagnostics:
            raise DiagnosticsError(
                "the MCMC run failed its convergence checks, so nothing is released: "
                + "; ".join(report.failures)
                + ". Run longer (more draws/tune) or more chains; skip_diagnostics=True "
                "releases anyway and records that choice."
            )
        # the failures quote data-dependent numbers (R-hat, ESS): the curator keeps
        # them; the published record says only that the check was skipped
        opt_outs = (*opt_outs, "skip_diagnostics")
        sampler_info["failed_checks"] = list(report.failures)
    x = np.asarray(idata.posterior["release"].values)
    flat = x.reshape((-1, *manifold.point_shape))
    candidates = np.arange(len(flat))
    if restricted:
        inside = domain.distances(flat) <= domain.radius
        candidates = candidates[inside]
        if len(candidates) < 0.5 * len(flat):
            raise DiagnosticsError(
                f"only {len(candidates)} of {len(flat)} draws fell inside the public ball: "
                "the restricted law is poorly represented; use more data or a larger epsilon"
            )
    value = flat[rng.choice(candidates)]
    return _record(
        mech,
        value,
        n=n,
        sigma=sigma,
        sampler=sampler,
        seed_policy=policy,
        opt_outs=opt_outs,
        sampler_info=sampler_info,
        diagnostics=idata,
    )


def _record(mech, value, *, n, sigma, sampler, **fields) -> Release:
    """The Release of ``mech`` for ``value`` (validated), via the one builder."""
    return build_release(
        value=mech.manifold.validate(value),
        mechanism=mech.name,
        epsilon=mech.epsilon,
        sigma=sigma,
        sensitivity=mech.sensitivity(n),
        n=n,
        sampler=sampler,
        exact=sampler in EXACT_SAMPLERS,
        **fields,
    )
