"""Reproduction of every figure of both papers, one module per figure or check.

Each experiment is a function
``f(*, quick, replicates, out, seed, progress, workers, scheduler)`` that is pure in
its inputs (a seed gives the same numbers, whatever the number of workers or the
scheduler), returns a table (a pandas DataFrame of every plotted number) and, when
``out`` is given, writes PNG figures, CSV tables and a JSON summary (settings and the
paper's statements next to ours) into ``out/<name>/``.

- ``laplace2021_sensitivity``: 2021 supplement Fig. 1 (the empirical sphere spread
  between 2r and 2r(2 − H) over the radius) and Example 1 (S¹: the Fréchet mean's
  sensitivity tends to π);
- ``laplace2021_fig1``: 2021 Fig. 1, sensitivity vs n with Thm 2's bound, utility of
  the manifold vs Euclidean Laplace, non-PD share over ε (SPD(2), S²);
- ``kng2022_fig1``: 2022 Fig. 1, utility of KNG, manifold Laplace, Euclidean and
  projected Euclidean on S²; KNG, Laplace, Euclidean on SPD(2);
- ``kng2022_shapes``: 2022 Figs. 2 and 3 on the cell shapes (samples, Fréchet mean,
  private means from KNG and the landmark-wise Laplace with and without alignment,
  and their smoothed versions);
- ``theorems``: 2021 Thm 3 / 2022 Thm 3 (E ρ² against n, d and ε) and 2021 Thm 4 (the
  D/d inflation of an ambient mechanism);
- ``median_robustness``: beyond the papers (issue 24), the private Fréchet median (KNG)
  against the private means under contamination on S², SPD(2) and Kendall shapes;
- ``geodesic_regression``: beyond the papers (issue 41), the private geodesic
  regression, joint and sequential, on the S² design of Kulkarni & Soto (2025), SPD(2)
  and Kendall's triangle shapes: errors against n and ε and the paper's
  data-dependent sensitivity against our public one.
- ``tangent_mechanisms``: beyond the papers (issue 39), the tangent Laplace and Gaussian
  against the manifold Laplace and KNG: pure ε over n, k releases under one budget,
  the two-stage release, the ICLR 2026 setting.

Command line: ``pymc-manidp reproduce <name|all> [--quick] [--replicates N] [--out DIR]
[--seed S] [--scheduler ADDRESS]``.

Replicates run as Dask tasks: on the current ``distributed`` client if there is one
(or the one ``scheduler=`` names), else on Dask's local scheduler.
"""

from __future__ import annotations

from pathlib import Path

from pymc_manidp._progress import _progress_enabled

# The submodules keep their names as attributes of this package (each holds a function
# of the same name: ``EXPERIMENTS[name]``), so ``experiments.theorems.SETTINGS`` works.
from pymc_manidp.experiments import (
    geodesic_regression,
    kng2022_fig1,
    kng2022_shapes,
    laplace2021_fig1,
    laplace2021_sensitivity,
    median_robustness,
    tangent_mechanisms,
    theorems,
)
from pymc_manidp.experiments._common import cluster
from pymc_manidp.experiments.kng2022_shapes import local_linear_smooth, self_intersects

__all__ = ["EXPERIMENTS", "local_linear_smooth", "run", "self_intersects"]

#: Every experiment by name (``all`` runs them in this order).
EXPERIMENTS = {
    "laplace2021_sensitivity": laplace2021_sensitivity.laplace2021_sensitivity,
    "laplace2021_fig1": laplace2021_fig1.laplace2021_fig1,
    "kng2022_fig1": kng2022_fig1.kng2022_fig1,
    "kng2022_shapes": kng2022_shapes.kng2022_shapes,
    "theorems": theorems.theorems,
    "median_robustness": median_robustness.median_robustness,
    "geodesic_regression": geodesic_regression.geodesic_regression,
    "tangent_mechanisms": tangent_mechanisms.tangent_mechanisms,
}


def run(
    name,
    *,
    quick=False,
    replicates=None,
    out="reproduction",
    seed=20211206,
    progress=None,
    workers=None,
    scheduler=None,
):
    """Run one experiment by name, or ``"all"``; returns ``{name: table}``.

    Parameters
    ----------
    name : str
        A key of :data:`EXPERIMENTS` or ``"all"``.
    quick : bool
        Scaled-down settings (every figure and table, in minutes).
    replicates : int, optional
        Override the replicate count of every experiment that has one.
    out : path or None
        Output folder (``out/<name>/``); None writes nothing.
    seed : int
        Root seed of the experiments (each derives its own child seeds from it).
    progress : bool or None
        Rich progress bars on stderr; ``None`` (default): only when stderr is a
        terminal and ``$CI`` is unset (``pymc_manidp._progress``). The results do not
        depend on it.
    workers : int, optional
        Workers of Dask's local scheduler for the replicates (default 2; 1 runs them in
        this process).
    scheduler : None, str or distributed.Client, optional
        Where the replicates run: None, the current ``distributed`` client if there is
        one, else Dask's local scheduler; a ``distributed.Client``; a scheduler address
        (``"tcp://10.0.0.5:8786"``: a client connected for the run and closed after it);
        or ``"threads"`` / ``"processes"`` / ``"sync"``. Results do not depend on it.

    Returns
    -------
    dict of str to pandas.DataFrame
        Each experiment's table, by name (also written as CSV under ``out``).

    Raises
    ------
    ValueError
        Unknown name or a replicate count below 2.
    """
    if name != "all" and name not in EXPERIMENTS:
        raise ValueError(
            f"unknown experiment {name!r}; choose one of: all, {', '.join(EXPERIMENTS)}"
        )
    if replicates is not None:
        if isinstance(replicates, bool) or int(replicates) != replicates or replicates < 2:
            raise ValueError(f"replicates must be an integer >= 2, got {replicates!r}")
        replicates = int(replicates)
    names = list(EXPERIMENTS) if name == "all" else [name]
    if out is not None:  # fail before hours of work, not after
        if Path(out).exists() and not Path(out).is_dir():
            raise ValueError(f"--out {out} is a file; give a folder for the figures and tables")
        Path(out).mkdir(parents=True, exist_ok=True)
        for n in names:
            if (Path(out) / n).exists() and not (Path(out) / n).is_dir():
                raise ValueError(f"{Path(out) / n} exists and is not a folder")
    progress = _progress_enabled(progress)
    # one client for the whole run: an address is connected to once, not per experiment
    with cluster(scheduler) as client:
        where = client if client is not None else scheduler
        return {
            n: EXPERIMENTS[n](
                quick=quick,
                replicates=replicates,
                out=out,
                seed=seed,
                progress=progress,
                workers=workers,
                scheduler=where,
            )
            for n in names
        }
