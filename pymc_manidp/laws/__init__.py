"""Laws layer: the manifold Laplace and KNG laws, and the directional laws.

PyTensor log-densities on tangent charts (``laws/charts.py``), their normalizers
(:mod:`pymc_manidp.laws.normalizers`), exact samplers (``laws/exact/``), the PyMC
distributions (``laws/distributions.py``), the von Mises–Fisher law
(``laws/directional.py``) and the noise-aware model of a release
(``laws/inference.py``), all imported from here.
"""

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

__all__ = [
    "KNG",
    "ChartTransform",
    "ExactDraws",
    "ExactSamplingError",
    "ManifoldLaplace",
    "ManifoldUniform",
    "MovingPolarChart",
    "MovingTangentChart",
    "NormalizedGaussian",
    "PolarChart",
    "VonMisesFisher",
    "euclidean_laplace",
    "has_exact_sampler",
    "kng_envelope_slope",
    "kng_logp",
    "laplace_coords",
    "laplace_log_normalizer",
    "laplace_logp",
    "noise_aware_data",
    "noise_aware_model",
    "pt_median_gradient_norm",
    "sample_kng",
    "sample_kng_median",
    "sample_laplace",
    "sample_vmf",
    "vmf_log_normalizer",
]
