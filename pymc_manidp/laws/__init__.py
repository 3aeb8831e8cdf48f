"""Laws layer: the manifold Laplace and KNG laws, and the directional laws.

PyTensor log-densities on tangent charts (``laws/charts.py``), their normalizers
(:mod:`pymc_manidp.laws.normalizers`), exact samplers (``laws/exact/``), the PyMC
distributions (``laws/distributions.py``), the directional laws
(``laws/directional.py``: von Mises–Fisher; ``laws/bingham.py``;
``laws/matrix_fisher.py``) and the noise-aware model of a release
(``laws/inference.py``), all imported from here.
"""

from pymc_manidp.laws.bingham import Bingham, bingham_log_normalizer, sample_bingham
from pymc_manidp.laws.charts import (
    ChartTransform,
    MovingPolarChart,
    MovingTangentChart,
    NormalizedGaussian,
    PolarChart,
)
from pymc_manidp.laws.directional import (
    VonMisesFisher,
    sample_vmf,
    vmf_log_normalizer,
)
from pymc_manidp.laws.distributions import (
    KNG,
    ManifoldLaplace,
    ManifoldUniform,
    kng_logp,
    laplace_log_normalizer,
    laplace_logp,
    pt_median_gradient_norm,
)
from pymc_manidp.laws.exact import (
    ExactDraws,
    ExactSamplingError,
    euclidean_laplace,
    has_exact_sampler,
    kng_envelope_slope,
    laplace_coords,
    sample_kng,
    sample_kng_median,
    sample_laplace,
)
from pymc_manidp.laws.inference import noise_aware_data, noise_aware_model
from pymc_manidp.laws.matrix_fisher import (
    MatrixFisher,
    matrix_fisher_log_normalizer,
    quaternion_form,
    sample_matrix_fisher,
)
from pymc_manidp.laws.regression_inference import noise_aware_regression_model

__all__ = [
    "KNG",
    "Bingham",
    "ChartTransform",
    "ExactDraws",
    "ExactSamplingError",
    "ManifoldLaplace",
    "ManifoldUniform",
    "MatrixFisher",
    "MovingPolarChart",
    "MovingTangentChart",
    "NormalizedGaussian",
    "PolarChart",
    "VonMisesFisher",
    "bingham_log_normalizer",
    "euclidean_laplace",
    "has_exact_sampler",
    "kng_envelope_slope",
    "kng_logp",
    "laplace_coords",
    "laplace_log_normalizer",
    "laplace_logp",
    "matrix_fisher_log_normalizer",
    "noise_aware_data",
    "noise_aware_model",
    "noise_aware_regression_model",
    "pt_median_gradient_norm",
    "quaternion_form",
    "sample_bingham",
    "sample_kng",
    "sample_kng_median",
    "sample_laplace",
    "sample_matrix_fisher",
    "sample_vmf",
    "vmf_log_normalizer",
]
