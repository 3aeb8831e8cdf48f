r"""Calibration studies of a model: simulation-based calibration with one compiled sampler.

A calibration study (Talts et al. 2018, simulation-based calibration) draws a truth
:math:`\theta_i` from the model's prior and data :math:`y_i` from its likelihood, samples
the posterior given :math:`y_i`, and records the rank of each statistic of
:math:`\theta_i` among its posterior draws. If the sampler draws the model's posterior,
the ranks are uniform on :math:`\{0, \dots, L\}` and a central :math:`\ell`-interval
covers the truth in a fraction :math:`\ell` of the replicates, whatever the prior: the
study checks the likelihood, the prior and the sampler together, on the user's own
prior (issue 28).

Every replicate samples the same compiled model: the observed data are ``pm.Data``
(:func:`~pymc_manidp.laws.noise_aware_model` makes them so) and each replicate only
replaces their values, so a study compiles once per chunk of replicates (nutpie: the
model; PyMC: the NUTS step's log-density and gradient, the initial point and the ranked
variable, in a :class:`~pymc_manidp.mcmc.FreshNUTS`). Only compiled functions
are shared: every replicate's chains adapt from scratch, draw for draw the run of a
``pm.NUTS`` built for that replicate (issue 28, item 6; ``tests/mcmc/test_fresh_nuts.py``).
The chunks run on Dask: on the current ``distributed`` client when there is one (one
chunk per worker), else on Dask's local scheduler.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pymc as pm

from pymc_manidp._progress import progress_bar
from pymc_manidp.mcmc.sampling import CompiledSampler, FreshNUTS, nuts_backend
from pymc_manidp.mcmc.settings import MCMCSettings
from pymc_manidp.rng import resolve_rng

__all__ = ["CalibrationResult", "calibration_study"]

LEVELS = (0.5, 0.8, 0.9, 0.95)


@dataclass(frozen=True)
class CalibrationResult:
    """The outcome of :func:`calibration_study`.

    Attributes
    ----------
    ranks : ndarray of int, shape ``(replicates, k)``
        Rank of each statistic of the truth among the ``n_draws`` posterior draws
        (the number of draws below it), in ``0 .. n_draws``.
    n_draws : int
        Posterior draws per replicate the ranks are taken among.
    statistics : tuple of str
        Names of the ``k`` statistics.
    histogram : ndarray of int, shape ``(bins, k)``
        The rank histogram: counts of ranks per bin of ``0 .. n_draws``.
    expected : ndarray, shape ``(bins,)``
        The counts uniform ranks would give on average (the bins hold whole ranks).
    pvalues : ndarray, shape ``(k,)``
        Chi-square p-value of uniform ranks, per statistic.
    coverage : pandas.DataFrame
        Rows: the levels ``l``; columns: the statistics; values: the fraction of the
        replicates whose truth lies in the central ``l``-interval of its posterior.
        The interval is read off ``n_draws = L`` draws (NumPy's interpolated
        quantiles), so a calibrated study covers ``l (L - 1)/(L + 1)`` of the time on
        average, not ``l`` (the order statistics of ``L`` uniforms have means
        ``(j + 1)/(L + 1)``): 0.865 for ``l = 0.9``, ``L = 50``.
    divergences : ndarray of int, shape ``(replicates,)``
        Divergent transitions per replicate.
    truths : ndarray, shape ``(replicates, *point_shape)``
        The truths drawn from the prior.
    compilations : int
        Samplers compiled for the study (one per chunk).
    """

    ranks: np.ndarray
    n_draws: int
    statistics: tuple
    histogram: np.ndarray
    expected: np.ndarray
    pvalues: np.ndarray
    coverage: object
    divergences: np.ndarray
    truths: np.ndarray
    compilations: int


def _coordinates(points, shape):
    """The default statistics: a point's embedding coordinates, flattened."""
    points = np.asarray(points, float)
    return points.reshape((*points.shape[: points.ndim - len(shape)], -1))


def _observed_data(model):
    """``{observed variable name: pm.Data name}``; every observed must be a pm.Data."""
    data_names = {v.name for v in model.data_vars}
    out = {}
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        if getattr(value, "name", None) not in data_names:
            raise ValueError(
                f"the observed {rv.name!r} is not a pm.Data: a study replaces the data of one "
                "compiled model, so every observed value must be a pm.Data"
            )
        out[rv.name] = value.name
    return out


def _default_data_fn(model):
    """How drawn observations become the values of every pm.Data of the model."""
    observed = _observed_data(model)
    structure = getattr(model, "noise_aware", None)
    if structure is not None:  # a noise-aware model: its chart follows the releases
        from pymc_manidp.laws.inference import noise_aware_data

        names = list(observed)

        def data_fn(drawn):
            values = [drawn[n] for n in names]
            return noise_aware_data(model, values[0] if structure.single else values)

        return data_fn
    others = {v.name for v in model.data_vars} - set(observed.values())
    if others:
        raise ValueError(
            f"the model's pm.Data {sorted(others)} are not observed values: pass data= "
            "(a function of the drawn observations giving every pm.Data's value)"
        )
    return lambda drawn: {observed[k]: v for k, v in drawn.items()}


def _run_chunk(
    blob, var, drawn, truths, seeds, settings, backend, statistics, thin, levels, advance=None
):
    """Sample the posterior of each replicate of the chunk with one compiled sampler;
    ``advance()`` (in this process only) after each replicate."""
    import cloudpickle

    model, data_fn = cloudpickle.loads(blob)  # a copy per chunk: set_data stays local
    shape = truths.shape[1:]
    ranks, covered, divergences = [], [], []
    if backend == "nutpie":
        compiled = CompiledSampler(model, "nuts", backend="nutpie")
    else:  # compiled once; every replicate's chains adapt from scratch
        compiled = FreshNUTS(model, var_names=[var], target_accept=settings.target_accept)
    for i, seed in enumerate(seeds):
        values = data_fn({k: v[i] for k, v in drawn.items()})
        if backend == "nutpie":
            # the study's bar, not one per run
            idata = compiled.sample(values, settings, random_seed=int(seed), progressbar=False)
            post = np.asarray(idata.posterior[var].values)
            diverging = np.asarray(idata.sample_stats["diverging"])
        else:
            pm.set_data(values, model=model)
            chains, diverging = compiled.sample(
                draws=settings.draws,
                tune=settings.tune,
                chains=settings.chains,
                random_seed=int(seed),
            )
            post = chains[var]
        post = post[:, ::thin]
        stats_post = statistics(post.reshape((-1, *shape)))  # (L, k)
        stats_true = statistics(truths[i][None])[0]  # (k,)
        ranks.append(np.sum(stats_post < stats_true, axis=0))
        lo = np.quantile(stats_post, [(1 - lv) / 2 for lv in levels], axis=0)
        hi = np.quantile(stats_post, [(1 + lv) / 2 for lv in levels], axis=0)
        covered.append((lo <= stats_true) & (stats_true <= hi))  # (levels, k)
        divergences.append(int(diverging.sum()))
        if advance is not None:
            advance()
    return np.array(ranks), np.array(covered), np.array(divergences)


def _gather_advancing(client, parts, sizes, advance):
    """The chunks computed on a ``distributed`` client, in order; ``advance(size)``
    as each one ends."""
    from distributed import as_completed

    futures = client.compute(parts)
    size_of = {f.key: k for f, k in zip(futures, sizes, strict=True)}
    for done in as_completed(futures):
        advance(size_of[done.key])
    return client.gather(futures)


def _client(client):
    if client is not None:
        return client
    if "distributed" not in sys.modules:  # a user who made a client imported it
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        return None


def calibration_study(
    model,
    *,
    replicates=100,
    var=None,
    draws=500,
    tune=500,
    chains=2,
    thin=1,
    statistics=None,
    statistic_names=None,
    levels=LEVELS,
    bins=10,
    backend=None,
    data=None,
    chunks=None,
    client=None,
    random_seed=None,
    progressbar=None,
) -> CalibrationResult:
    r"""Simulation-based calibration of ``model``: rank histogram and coverage table.

    For each replicate: a truth and observations drawn jointly from the model (its
    prior, then its likelihood: ``pm.draw``), the observations put into the model's
    ``pm.Data``, NUTS on the posterior, and the rank of each statistic of the truth
    among the posterior draws. Uniform ranks (and coverage at each nominal level) are
    what a correct likelihood, prior and sampler give:

    .. math:: \Pr(\text{rank} = j) = \frac{1}{L + 1}, \quad j = 0, \dots, L.

    Parameters
    ----------
    model : pm.Model
        One free variable (or name it: ``var``) whose prior is the model's, and
        observed values that are all ``pm.Data``: e.g.
        :func:`~pymc_manidp.laws.noise_aware_model` with the user's prior.
    replicates : int
        Number of simulated data sets.
    var : str, optional
        The variable whose truth is ranked; default the model's only free variable.
    draws, tune, chains : int
        Per replicate (posterior draws per chain, tuning steps, chains ``>= 2``).
    thin : int
        Keep every ``thin``-th draw for the ranks: autocorrelated draws make the rank
        histogram over-dispersed (a U shape) even for a correct posterior.
    statistics : callable, optional
        ``statistics(points)`` maps draws ``(m, *point_shape)`` to ``(m, k)`` numbers.
        Default: the embedding coordinates.
    statistic_names : list of str, optional
        Names of the ``k`` statistics (default ``"x0"``, ``"x1"``, ...).
    levels : tuple of float
        Nominal levels of the coverage table's central intervals.
    bins : int
        Bins of the rank histogram.
    backend : {None, "auto", "nutpie", "pymc"}
        The NUTS implementation (:func:`~pymc_manidp.mcmc.nuts_backend`).
    data : callable, optional
        ``data(drawn)`` maps ``{observed name: value}`` to the values of every
        ``pm.Data`` of the model; needed only when the model has ``pm.Data`` other
        than its observed values (a noise-aware model's chart is handled).
    chunks : int, optional
        Chunks of replicates (each compiles the model once). Default: one per worker
        of the current ``distributed`` client, else 1.
    client : distributed.Client, optional
        Run the chunks on it (default: the current client when ``distributed`` is
        imported and one exists; else Dask's local scheduler).
    random_seed : int, Generator or None
        Makes the study reproducible: the truths, the observations and every run's
        seed are drawn from it first, so the result does not depend on the chunking.
    progressbar : bool or None
        A bar over the replicates on stderr (on a ``distributed`` cluster, advanced
        as each chunk ends); ``None``: only when stderr is a terminal and ``$CI`` is
        unset. It never changes the result.

    Returns
    -------
    CalibrationResult
        The ranks, their histogram and p-values, the coverage table, the divergences
        per replicate and the truths.

    Examples
    --------
    >>> import numpy as np, pymc_manidp as pmd
    >>> S = pmd.Sphere(dim=2)
    >>> rec = {"value": [0.0, 0.0, 1.0], "mechanism": "manifold Laplace", "sigma": 0.3,
    ...        "restricted": False}
    >>> res = pmd.calibration_study(pmd.noise_aware_model(rec, S), replicates=2,
    ...                             draws=50, tune=50, random_seed=0)  # doctest: +SKIP
    >>> res.ranks.shape, res.coverage.shape  # doctest: +SKIP
    ((2, 3), (4, 3))
    """
    import cloudpickle
    import dask
    import pandas as pd
    from scipy import stats as sps

    settings = MCMCSettings(draws=draws, tune=tune, chains=chains)
    backend = nuts_backend(backend)
    free = [v.name for v in model.free_RVs]
    if var is None:
        if len(free) != 1:
            raise ValueError(f"the model has free variables {free}: name the one to rank (var=)")
        var = free[0]
    elif var not in free:
        raise ValueError(f"{var!r} is not a free variable of the model ({free})")
    thin = int(thin)
    if thin < 1:
        raise ValueError(f"thin must be an integer >= 1, got {thin}")
    data_fn = _default_data_fn(model) if data is None else data
    observed = list(_observed_data(model))
    rng, _ = resolve_rng(random_seed)
    # the whole study's randomness first: independent of chunks and schedulers
    draw_seed = int(rng.integers(2**31 - 1))
    seeds = rng.integers(2**31 - 1, size=replicates)
    # a few hundred draws at once: compiling them with numba cost 1.4-2.3 s a study on
    # SPD(3) and Kendall(6), the Python linker 0.1 s, for the same values
    out = pm.draw(
        [model[var], *(model[n] for n in observed)],
        draws=replicates,
        random_seed=draw_seed,
        mode="FAST_COMPILE",
    )
    # pm.draw drops the leading axis when it draws once
    out = [np.asarray(v)[None] if replicates == 1 else np.asarray(v) for v in out]
    truths = out[0]
    drawn = dict(zip(observed, out[1:], strict=True))
    shape = truths.shape[1:]
    stat_fn = statistics if statistics is not None else (lambda p: _coordinates(p, shape))

    cl = _client(client)
    if chunks is None:
        chunks = len(cl.scheduler_info()["workers"]) if cl is not None else 1
    chunks = max(1, min(int(chunks), replicates))
    parts_idx = np.array_split(np.arange(replicates), chunks)
    blob = cloudpickle.dumps((model, data_fn))
    task = dask.delayed(_run_chunk, pure=False)
    with progress_bar("calibration study", replicates, progressbar) as advance:
        # a closure reaches the chunks only where they run in this process
        local = advance if cl is None else None
        parts = [
            task(
                blob,
                var,
                {k: v[idx] for k, v in drawn.items()},
                truths[idx],
                seeds[idx],
                settings,
                backend,
                stat_fn,
                thin,
                tuple(levels),
                local,
            )
            for idx in parts_idx
        ]
        if cl is not None:
            results = _gather_advancing(cl, parts, [len(idx) for idx in parts_idx], advance)
        else:
            results = dask.compute(*parts, scheduler="sync" if chunks == 1 else "threads")
    ranks = np.concatenate([r[0] for r in results])
    covered = np.concatenate([r[1] for r in results])  # (R, levels, k)
    divergences = np.concatenate([r[2] for r in results])

    n_draws = settings.chains * len(range(0, settings.draws, thin))
    k = ranks.shape[1]
    names = (
        tuple(statistic_names) if statistic_names is not None else tuple(f"x{j}" for j in range(k))
    )
    edges = np.linspace(0, n_draws + 1, bins + 1)
    # bins hold whole ranks: each rank has probability 1/(L + 1), a bin its share
    per_bin = np.histogram(np.arange(n_draws + 1), bins=edges)[0]
    expected = replicates * per_bin / (n_draws + 1)
    histogram = np.stack([np.histogram(ranks[:, j], bins=edges)[0] for j in range(k)], axis=1)
    pvalues = np.array(
        [sps.chisquare(histogram[:, j], expected).pvalue for j in range(k)], dtype=float
    )
    coverage = pd.DataFrame(
        covered.mean(axis=0), index=pd.Index(levels, name="level"), columns=list(names)
    )
    return CalibrationResult(
        ranks=ranks,
        n_draws=n_draws,
        statistics=names,
        histogram=histogram,
        expected=expected,
        pvalues=pvalues,
        coverage=coverage,
        divergences=divergences,
        truths=truths,
        compilations=len(parts),
    )
