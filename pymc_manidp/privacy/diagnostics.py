"""The diagnostics gate: MCMC output is released only from a run that looks converged.

An MCMC release is only approximately DP: if the draw's law is within total variation
``gamma`` of the mechanism's law, the release is ``(eps, (1 + e^eps) gamma)``-DP.
Nothing computable bounds ``gamma``; R-hat, effective sample sizes and divergences
are the evidence a curator has. The gate refuses a release when they fail, unless the
caller opts out explicitly (and the opt-out is recorded in the Release).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import arviz_stats as azs  # the gate's statistics; the plots (arviz_plots) load on use
import numpy as np
import xarray as xr

__all__ = [
    "CuratorReport",
    "DiagnosticsError",
    "DiagnosticsReport",
    "chart_draws",
    "check_run",
    "report",
    "summary",
]

MAX_RHAT = 1.01
MIN_ESS = 400


class DiagnosticsError(RuntimeError):
    """The MCMC run failed a convergence check: nothing is released from it."""


@dataclass(frozen=True)
class DiagnosticsReport:
    """Convergence figures of a run, computed on the monitored quantities.

    ``failures`` lists each failed check in words; empty means the run passed.

    Attributes
    ----------
    rhat : dict of str to float
        R-hat of each monitored quantity (``"distance"``, ``"release[j]"``).
    ess_bulk : dict of str to float
        Bulk effective sample size of each monitored quantity.
    ess_tail : dict of str to float
        Tail effective sample size of each monitored quantity.
    divergences : int
        Divergent transitions over all chains.
    draws : int
        Draws over all chains (``chains * draws``).
    failures : list of str
        The failed checks, in words.
    """

    rhat: dict
    ess_bulk: dict
    ess_tail: dict
    divergences: int
    draws: int
    failures: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every check passed (``failures`` is empty)."""
        return not self.failures


def _monitored(idata, name):
    post = idata.posterior
    out = {"distance": np.asarray(post["distance"].values, float)}
    x = np.asarray(post[name].values, float)
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    for j in range(flat.shape[-1]):
        column = flat[..., j]
        # a constant embedding coordinate carries no information; one holding a NaN is
        # not constant (np.ptp is NaN there, and NaN > 0 had dropped it from the gate)
        if not np.all(column == column.flat[0]):
            out[f"{name}[{j}]"] = column
    return out


def _convergence(mon):
    """R-hat, bulk and tail ESS of each ``(chain, draw)`` array, exactly as
    ``az.summary`` computes them (the same ``azstats`` calls, default arguments), so
    the gate's numbers are the ones a curator reads in the summary table."""
    ds = xr.Dataset({k: (("chain", "draw"), np.asarray(v, float)) for k, v in mon.items()})
    dims = ["chain", "draw"]
    out = (
        ds.azstats.rhat(sample_dims=dims),
        ds.azstats.ess(sample_dims=dims, method="bulk"),
        ds.azstats.ess(sample_dims=dims, method="tail"),
    )
    return tuple({k: float(r[k]) for k in mon} for r in out)


def check_run(idata, name="release", *, max_rhat=MAX_RHAT, min_ess=MIN_ESS) -> DiagnosticsReport:
    """Compute R-hat, bulk/tail ESS and divergences; list what fails.

    Monitored: the geodesic distance to the chart origin and every embedding
    coordinate of the released variable.

    Parameters
    ----------
    idata : xarray.DataTree
        The run: a ``posterior`` group with the variables ``distance`` and ``name``
        (shape ``(chain, draw, *point_shape)``), and ``sample_stats`` if there is one.
    name : str
        The released variable.
    max_rhat : float
        Largest R-hat accepted.
    min_ess : float
        Smallest bulk and tail ESS accepted.

    Returns
    -------
    DiagnosticsReport
        The figures and the list of failed checks.
    """
    mon = _monitored(idata, name)
    if all(np.all(np.isfinite(v)) for v in mon.values()):
        rhat, bulk, tail = _convergence(mon)
    else:  # NaN/inf in arviz_stats' arithmetic warns: each is a failure listed below
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            rhat, bulk, tail = _convergence(mon)
    stats = idata["sample_stats"] if "sample_stats" in idata.children else {}
    div = int(stats["diverging"].values.sum()) if "diverging" in stats else 0
    draws = int(np.prod(mon["distance"].shape))
    failures = [
        f"{k} has {int(np.size(v) - np.isfinite(v).sum())} non-finite draws"
        for k, v in mon.items()
        if not np.all(np.isfinite(v))
    ]
    # NaN first: max and min compare NaN as neither larger nor smaller, so a NaN R-hat
    # or ESS after the first key would never be the one checked
    worst = max(rhat, key=lambda k: (np.isnan(rhat[k]), rhat[k]))
    if not rhat[worst] <= max_rhat:
        failures.append(f"R-hat of {worst} is {rhat[worst]:.4f} > {max_rhat}")
    for label, ess in (("bulk", bulk), ("tail", tail)):
        k = min(ess, key=lambda key: (not np.isnan(ess[key]), ess[key]))
        if not ess[k] >= min_ess:
            failures.append(f"{label} ESS of {k} is {ess[k]:.0f} < {min_ess}")
    if div:
        failures.append(f"{div} divergent transitions")
    return DiagnosticsReport(rhat, bulk, tail, div, draws, failures)


def summary(idata, name="release"):
    """ArviZ summary of the distance and the embedding coordinates (curator only)."""
    return azs.summary(idata, var_names=["distance", name])


def _idata_of(run):
    idata = getattr(run, "diagnostics", run)
    if idata is None:
        raise ValueError(
            "this release has no MCMC run to report (exact samplers leave none): "
            "report() needs an MCMC release or its DataTree"
        )
    if not hasattr(idata, "posterior"):
        raise TypeError("report() takes a Release or an ArviZ DataTree with a posterior group")
    return idata


def chart_draws(idata, *, footpoint=None, manifold=None, name="release"):
    r"""Chart coordinates and geodesic distance of each draw, shapes ``(chain, draw, dim)``
    and ``(chain, draw)``.

    Without a footpoint they are read off the polar model's own variables: with
    ``t`` the recorded ``distance`` and ``z`` the ``direction``, the normal coordinates
    at the chart origin are :math:`c = t\,z/|z|` (for ``dim = 1``, the sign of ``u``
    times ``t``). With ``footpoint`` and ``manifold`` they are recomputed from the
    released points: :math:`c = \log_{\text{footpoint}}(x)` in the frame
    ``manifold.tangent_basis(footpoint)``, :math:`t = \rho(\text{footpoint}, x)`.
    For Laplace the chart origin is the footpoint, so both routes agree.
    """
    post = idata.posterior
    if (footpoint is None) != (manifold is None):
        raise ValueError("give both footpoint and manifold, or neither")
    if footpoint is not None:
        foot = manifold.validate(footpoint)
        x = np.asarray(post[name].values, float)
        return manifold.log_coords(foot, x), np.asarray(manifold.dist(foot, x), float)
    dist = np.asarray(post["distance"].values, float)
    if "chart_coords" in post:
        coords = np.asarray(post["chart_coords"].values, float)
    elif "direction" in post:
        z = np.asarray(post["direction"].values, float)
        coords = dist[..., None] * z / np.linalg.norm(z, axis=-1, keepdims=True)
    elif "u" in post:
        coords = np.sign(np.asarray(post["u"].values, float)) * dist[..., None]
    else:
        raise ValueError(
            "the run has neither 'direction' nor 'u' (not a polar_model run): "
            "pass footpoint= and manifold= to compute chart coordinates"
        )
    return coords, dist


@dataclass(frozen=True)
class CuratorReport:
    """What :func:`report` returns: for the curator, never for publication.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per quantity (``distance``, ``coord[0]``, ...); columns ``mean``,
        ``sd``, ``hdi{p}_lb``, ``hdi{p}_ub``, ``ess_bulk``, ``ess_tail``, ``r_hat``.
    verdict : DiagnosticsReport
        The release gate's checks on the same run (:func:`check_run`).
    figures : dict
        ``{"trace": Figure, "rank": Figure}`` (matplotlib), and ``"tv_bound"`` for a
        release made with ``estimate_delta=True``.
    files : tuple of Path
        PNG files written (empty without ``out``).
    delta_estimate : dict or None
        ``Release.delta_estimate`` of the reported release (an estimate, see
        ``privacy.coupling``).
    runs : list of dict or None
        ``Release.sampler_info["runs"]``: the runs a release sampled in turn (its
        short run, and the full run when that one failed the gate), each with its
        length and failed checks; the table and verdict are the last run's.
    """

    table: object
    verdict: DiagnosticsReport
    figures: dict
    files: tuple = ()
    # issue 17: the release's L-lag coupling estimate of delta (an estimate, curator only)
    delta_estimate: dict | None = None
    runs: list | None = None

    def __str__(self) -> str:
        head = (
            "gate: PASSED"
            if self.verdict.passed
            else "gate: FAILED - " + "; ".join(self.verdict.failures)
        )
        if self.runs:  # which run the table is of, and why an earlier one was not used
            head += "\nruns: " + "; then ".join(_run_line(r) for r in self.runs)
        if self.delta_estimate is not None:  # issue 17
            e = self.delta_estimate
            head += (
                f"\ndelta ESTIMATE (L-lag coupling, not a proof): {e['delta_hat']:.3g} "
                f"± {e['delta_se']:.2g} at t = {e['t']} (R = {e['reps']}, L = {e['lag']})"
            )
        return f"{self.table.to_string(float_format=lambda v: f'{v:.4g}')}\n{head}"

    def close(self) -> None:
        """Release the figures' memory (pyplot keeps them alive otherwise)."""
        import matplotlib.pyplot as plt

        for fig in self.figures.values():
            plt.close(fig)


def _run_line(run) -> str:
    """One run of ``sampler_info["runs"]`` in words."""
    length = f"{run['chains']} x ({run['tune']} + {run['draws']})"
    if not run["failed_checks"]:
        return f"{length} passed"
    return f"{length} failed ({'; '.join(run['failed_checks'])})"


def _figure(plot_collection):
    return plot_collection.viz["figure"].item()


def report(run, *, footpoint=None, manifold=None, out=None, name="release", ci_prob=0.94):
    r"""Report an MCMC release's run to the curator: summary table, gate verdict, plots.

    The monitored quantities are the chart (normal) coordinates of the draws and their
    geodesic distance to the footpoint (see :func:`chart_draws`). The table joins
    ArviZ's summary statistics (mean, sd, HDI) with the diagnostics the release gate
    uses: rank-normalized split R-hat, bulk ESS and tail ESS (the smaller of the
    quantile ESS at 5% and 95%). The plots are ArviZ's (arviz-plots): trace with
    per-chain densities, and rank plots (per-chain ECDF of fractional ranks minus
    the uniform, with the multi-chain uniformity test's p-value).

    Parameters
    ----------
    run : Release or DataTree
        An MCMC release (its ``diagnostics``) or the run itself.
    footpoint, manifold : optional
        Recompute coordinates and distance at ``footpoint`` from the released
        points; by default they come from the polar model at its chart origin.
    out : str or Path, optional
        Directory (created if missing) receiving ``trace.png`` and ``rank.png``.
    name : str
        Name of the manifold-valued variable in the run.
    ci_prob : float
        Mass of the HDI column.

    Returns
    -------
    CuratorReport

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> rng = np.random.default_rng(0)
    >>> z, s = rng.normal(size=(2, 500, 2)), rng.normal(size=(2, 500))
    >>> run = xr.DataTree.from_dict({"posterior": xr.Dataset({
    ...     "direction": (("chain", "draw", "d"), z), "distance": (("chain", "draw"), np.exp(s)),
    ...     "release": (("chain", "draw", "e"), np.ones((2, 500, 3)))})})
    >>> rep = report(run)
    >>> list(rep.table.index), list(rep.table.columns)[-3:]
    (['distance', 'coord[0]', 'coord[1]'], ['ess_bulk', 'ess_tail', 'r_hat'])
    >>> rep.verdict.passed, sorted(rep.figures)
    (True, ['rank', 'trace'])
    >>> rep.close()
    """
    import pandas as pd
    import xarray as xr

    idata = _idata_of(run)
    coords, dist = chart_draws(idata, footpoint=footpoint, manifold=manifold, name=name)
    n_chain, n_draw, dim = coords.shape
    ds = xr.Dataset(
        {
            "distance": (("chain", "draw"), dist),
            "coord": (("chain", "draw", "axis"), coords),
        },
        # explicit index coordinates: arviz-plots selects panels by them
        coords={"chain": np.arange(n_chain), "draw": np.arange(n_draw), "axis": np.arange(dim)},
    )
    dt = xr.DataTree.from_dict({"posterior": ds})
    stats = azs.summary(dt, kind="stats", ci_kind="hdi", ci_prob=ci_prob, round_to="none")
    stats = pd.DataFrame(stats)
    columns = {"distance": dist, **{f"coord[{a}]": coords[..., a] for a in range(dim)}}
    rhat, bulk, tail = _convergence(columns)
    diag = pd.DataFrame({"ess_bulk": bulk, "ess_tail": tail, "r_hat": rhat})
    table = stats.loc[list(columns)].join(diag)

    # imported here: arviz_plots brings matplotlib, half a second that a release,
    # which needs only the gate's statistics, should not pay (issue 12)
    import arviz_plots as azp

    trace = _figure(azp.plot_trace_dist(dt, backend="matplotlib"))
    trace.suptitle("Trace and per-chain density: distance to the footpoint, chart coordinates")
    cols = min(dim + 1, 3)
    rows = -(-(dim + 1) // cols)
    rank = _figure(
        azp.plot_rank(
            dt,
            backend="matplotlib",
            # the multi-chain uniformity test assumes independent draws: thin by the
            # ESS first, or autocorrelated healthy runs show spurious low p-values
            thin=True,
            col_wrap=cols,
            figure_kwargs={"figsize": (4.5 * cols, 3.0 * rows + 0.5)},
        )
    )
    rank.suptitle("Rank plots (thinned): per-chain ECDF of fractional ranks minus uniform")
    figures = {"trace": trace, "rank": rank}
    estimate = getattr(run, "delta_estimate", None)
    if estimate is not None:  # issue 17: the coupling bound of an estimate_delta release
        from pymc_manidp.privacy.coupling import plot_tv_bound

        figures["tv_bound"] = plot_tv_bound(estimate).figure
    for fig in figures.values():
        fig.set_layout_engine("constrained")
    files = ()
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        files = tuple(out / f"{key}.png" for key in figures)
        for path, fig in zip(files, figures.values(), strict=True):
            fig.savefig(path, dpi=100)
    runs = (getattr(run, "sampler_info", None) or {}).get("runs")
    return CuratorReport(table, check_run(idata, name), figures, files, estimate, runs)
