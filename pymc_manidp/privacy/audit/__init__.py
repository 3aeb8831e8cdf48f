r"""Privacy audits: can a mechanism's privacy loss exceed its ε?

Two audits (one module each; :mod:`.neighbours` builds the pairs), both for a pair
of neighbouring datasets ``D, D'`` (same ``n``, exactly one record changed in place):

**Quadrature audit** (:func:`quadrature_audit` in :mod:`.quadrature`, manifolds of
dimension 1 to 3). Both densities are normalized by quadrature on a product grid in
normal coordinates at the public centre ``m0``, and the privacy loss

.. math:: L(D, D') = \sup_x \big|\log f_D(x) - \log f_{D'}(x)\big|

is read off the grid (plus probe points at the densities' kinks: the Fréchet means
and the geodesic through them). ε-DP holds iff ``L <= ε`` for every neighbouring pair; the
audit searches candidate pairs (:func:`neighbour_pairs`: data on the boundary with
one record moved to the opposite side, clusters with an outlier, random pairs) and
reports the worst, its ratio to ε and a quadrature error estimate (the change of
``L`` when the grid is halved in every direction).

**Black-box sample test** (:func:`sample_test` in :mod:`.histogram`, any manifold), after
DP-Auditorium's
histogram tester: draws from ``M(D)`` and ``M(D')`` are mapped to a scalar
(geodesic distance to a fixed point, a tangent coordinate), binned, and each bin
gets Clopper–Pearson bounds. With all bounds holding at once (Bonferroni over bins,
both directions and statistics), for every bin ``B``

.. math:: \log \frac{P(M(D) \in B)}{P(M(D') \in B)} \ge
          \log \frac{p_{\rm lo}(B)}{q_{\rm hi}(B)},

so ``eps_lb`` (the largest right-hand side over bins and directions) is a lower bound
on the privacy loss at the stated confidence. An ε-DP mechanism gives
``eps_lb > ε`` with probability at most ``1 - confidence``; the test passes when
``eps_lb <= ε``. It can only ever *refute* a privacy claim, never prove one.

The audits take mechanism objects by duck typing (``manifold``, ``domain``,
``epsilon``, ``logp(x, data)``, ``restricted``, ``name``; ``sample(data, size,
random_seed=...)`` for the default sampler): this layer does not import the
mechanisms.
"""

from pymc_manidp.privacy.audit.histogram import (
    SampleTestResult,
    clopper_pearson,
    distance_statistic,
    histogram_epsilon_lb,
    sample_test,
    tangent_statistic,
)
from pymc_manidp.privacy.audit.neighbours import (
    NeighbourPair,
    boundary_pair,
    check_neighbours,
    neighbour_pairs,
)
from pymc_manidp.privacy.audit.quadrature import (
    AuditResult,
    audit_pair,
    log_privacy_loss,
    polar_grid,
    quadrature_audit,
    with_sigma_divided,
)

__all__ = [
    "AuditResult",
    "NeighbourPair",
    "SampleTestResult",
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
    "sample_test",
    "tangent_statistic",
    "with_sigma_divided",
]
