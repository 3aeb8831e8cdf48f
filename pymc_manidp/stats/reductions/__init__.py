r"""Passes over the data: each one function, for a NumPy array or a Dask array.

Every statistic a release needs is a sum (or a maximum) over the records: the
domain check (finite, on the manifold, inside the public ball), the Fréchet
gradient and energy

.. math:: g(x) = \sum_i w_i \log_x(x_i), \qquad F(x) = \tfrac12 \sum_i w_i \rho^2(x, x_i),

and KNG's gradient norms at a batch of proposals. One call here is one *pass*:

- a NumPy array is walked in cache-sized blocks of rows (``BLOCK_ELEMENTS``
  floats), so the temporaries of the log maps stay in cache;
- a ``dask.array.Array`` of shape ``(n, *point_shape)`` chunked along ``n`` is
  reduced chunk by chunk: each chunk yields a few numbers (a ``d``-vector per
  proposal, counts, a maximum), added up on the client in chunk order. The data
  are read once per pass and never gathered. Without a ``distributed`` client
  Dask's local scheduler runs the pass; with one (``distributed.Client(...)``
  made current) the cluster does.

A check pass returns its result as a value, a :class:`CheckedData` (the records, the
domain and what the pass learnt), which every pass here, ``frechet_mean`` and
``frechet_median`` accept and trust: later steps of the same release (the sampler's
own check, the Fréchet mean's validation) do not repeat the pass, and the Fréchet
mean starts from the public center with the gradient the check already summed.

The passes, by what they compute (one file each): running a pass (``passes.py``), the
check record and its pass (``checked.py``), the Fréchet mean's and KNG's sums
(``gradients.py``), the Fréchet median's (``median_sums.py``), geodesic regression's
(``regression_sums.py``). This package re-exports their public names; a test that
wraps a private one (``_run_pass``) wraps it in the module that reads it.

Examples
--------
>>> import numpy as np
>>> import pymc_manidp as pmd
>>> S = pmd.Sphere(dim=2)
>>> data = np.array([[0.0, 0.0, 1.0], [0.0, 0.6, 0.8]])
>>> g, energy = frechet_gradient(S, np.array([0.0, 0.0, 1.0]), data)
>>> bool(np.allclose(g, 0.5 * S.log([0.0, 0.0, 1.0], data[1])))
True
"""

from pymc_manidp.stats.reductions.checked import (
    CheckedData,
    CheckSummary,
    checked_summary,
    is_dask,
    scan_domain,
)

# importable from here as before; its public name is pymc_manidp.stats.DomainError
from pymc_manidp.stats.reductions.checked import DomainError as DomainError
from pymc_manidp.stats.reductions.gradients import (
    DistanceProfile,
    distance_profile,
    frechet_gradient,
    frechet_gradient_hessian,
    grad_norms,
    weighted_sum,
)
from pymc_manidp.stats.reductions.median_sums import (
    median_cell_bounds,
    median_grad_norms,
    median_terms,
    turn_rate,
    zero_distance,
)
from pymc_manidp.stats.reductions.passes import (
    BLOCK_ELEMENTS,
    lazy_validate,
    n_rows,
    pass_count,
    progress,
    rows_per_block,
)
from pymc_manidp.stats.reductions.regression_sums import regression_sums

__all__ = [
    "BLOCK_ELEMENTS",
    "CheckSummary",
    "CheckedData",
    "DistanceProfile",
    "checked_summary",
    "distance_profile",
    "frechet_gradient",
    "frechet_gradient_hessian",
    "grad_norms",
    "is_dask",
    "lazy_validate",
    "median_cell_bounds",
    "median_grad_norms",
    "median_terms",
    "n_rows",
    "pass_count",
    "progress",
    "regression_sums",
    "rows_per_block",
    "scan_domain",
    "turn_rate",
    "weighted_sum",
    "zero_distance",
]
