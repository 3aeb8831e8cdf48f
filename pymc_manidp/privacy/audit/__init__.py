r"""Privacy audits: can a mechanism's privacy loss exceed its ε?

Four audits (one module each; :mod:`.neighbours` builds the pairs), both for a pair
of neighbouring datasets ``D, D'`` (same ``n``, exactly one record changed in place):

- **Quadrature audit** (:func:`quadrature_audit`, :mod:`.quadrature`): both densities
  normalized on a grid, the privacy loss ``sup |log f_D - log f_D'|`` read off it and
  compared with ε (manifolds of dimension 1 to 3).
- **Tangent-chart audit** (:func:`tangent_audit`, :mod:`.tangent`): the same
  quadrature for the tangent mechanisms' release ``u`` in ``T_pM`` (the K-norm's loss
  against ε; the Gaussian's privacy profile against δ and its μ-GDP profile).
- **Regression audit** (:func:`regression_audit`, :mod:`.regression`): the same on
  the domain in ``TM`` of the geodesic-regression KNG (dimension 2 or 4), with
  adversarial neighbours that put the fit on the domain's edge.
- **Black-box sample test** (:func:`sample_test`, :mod:`.histogram`): a certified
  lower bound on the privacy loss from binned draws (any manifold); it can only ever
  refute a privacy claim, never prove one.

The audits take mechanism objects by duck typing (``manifold``, ``domain``,
``epsilon``, ``logp(x, data)``, ``restricted``, ``name``; ``sample(data, size,
random_seed=...)`` for the default sampler): this layer does not import the
mechanisms. Both estimate their memory and time before they allocate, and refuse
(``ValueError``, with the estimates and the sizes that fit) what exceeds the limits
(half of this machine's memory and an hour, unless ``max_bytes``/``max_seconds``).
"""

from pymc_manidp.privacy.audit.histogram import (
    SampleTestResult,
    clopper_pearson,
    distance_statistic,
    histogram_epsilon_lb,
    sample_test,
    sample_test_cost,
    tangent_statistic,
)
from pymc_manidp.privacy.audit.neighbours import (
    NeighbourPair,
    boundary_pair,
    check_neighbours,
    neighbour_pairs,
)
from pymc_manidp.privacy.audit.quadrature import (
    MIN_RESOLUTION,
    AuditResult,
    audit_pair,
    log_privacy_loss,
    polar_grid,
    quadrature_audit,
    with_sigma_divided,
)
from pymc_manidp.privacy.audit.regression import (
    RegressionAuditResult,
    regression_audit,
    regression_pairs,
)
from pymc_manidp.privacy.audit.tangent import TangentAuditResult, tangent_audit

__all__ = [
    "MIN_RESOLUTION",
    "AuditResult",
    "NeighbourPair",
    "RegressionAuditResult",
    "SampleTestResult",
    "TangentAuditResult",
    "audit_pair",
    "boundary_pair",
    "check_neighbours",
    "clopper_pearson",
    "distance_statistic",
    "histogram_epsilon_lb",
    "log_privacy_loss",
    "neighbour_pairs",
    "polar_grid",
    "quadrature_audit",
    "regression_audit",
    "regression_pairs",
    "sample_test",
    "sample_test_cost",
    "tangent_audit",
    "tangent_statistic",
    "with_sigma_divided",
]
