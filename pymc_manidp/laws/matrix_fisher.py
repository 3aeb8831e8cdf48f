r"""The matrix Fisher law on the rotation group SO(3), through the Bingham law on ``S³``.

For a rotation ``R(q)`` of a unit quaternion ``q`` (scalar first),

.. math:: \operatorname{tr}(F^\top R(q)) = q^\top M(F)\, q,

``M(F)`` a symmetric 4×4 matrix linear in ``F`` (trace 0; for ``F = diag(s)``,
``M = diag(s1+s2+s3, s1-s2-s3, -s1+s2-s3, -s1-s2+s3)``). The map ``q -> R(q)`` is two to
one and carries the uniform law of ``S³`` to the Haar law of SO(3), so the matrix Fisher
law of ``F`` is the image of the Bingham law of ``M(F)``: its normalizer is the Bingham
normalizer on ``S³`` (a one-dimensional integral, Wood 1993) and its draws are Bingham
draws (Kent, Ganeiber & Mardia 2018) mapped to rotations.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Continuous, _support_point
from pymc.distributions.transforms import _default_transform
from pymc.logprob.abstract import _logprob
from pymc.pytensorf import normalize_rng_param
from pytensor.tensor.random.op import RandomVariable

from pymc_manidp.geometry.rotations import Rotations, rotation_matrices_of
from pymc_manidp.laws.bingham import (
    _scaled_log_normalizer,
    _sorted_eigenvalues,
    check_symmetric_matrix,
    sample_bingham,
)
from pymc_manidp.laws.charts import NormalizedGaussian
from pymc_manidp.laws.directional import _is_constant

__all__ = [
    "MatrixFisher",
    "MatrixFisherRV",
    "matrix_fisher_log_normalizer",
    "quaternion_form",
    "sample_matrix_fisher",
]

#: the largest singular value of a constant ``F`` accepted: ``M(F)``'s eigenvalues then
#: spread at most ``4e11``, inside the Bingham quadrature's range (``bingham.MAX_SPREAD``)
MAX_SINGULAR_VALUE = 1e11

#: log of (Riemannian volume of SO(3)) / (area of S³) = 8π² / 2π²
_LOG_4 = float(np.log(4.0))
_LOG_S3_AREA = float(np.log(2 * np.pi**2))


def _quaternion_coefficients():
    """``C (3, 3, 4, 4)`` with ``R(q)_ij = qᵀ C_ij q`` for unit ``q`` (scalar first)."""

    def quad(q):  # R(q)|q|², a quadratic form in q
        q = np.asarray(q, float)
        return rotation_matrices_of(q) * np.dot(q, q)

    eye = np.eye(4)
    c = np.empty((3, 3, 4, 4))
    for k in range(4):
        for m in range(4):
            if k == m:
                c[:, :, k, k] = quad(eye[k])
            else:
                c[:, :, k, m] = (quad(eye[k] + eye[m]) - quad(eye[k]) - quad(eye[m])) / 2
    return c


_C = _quaternion_coefficients()


def quaternion_form(F):
    r"""``M(F)`` ``(..., 4, 4)``: :math:`\operatorname{tr}(F^\top R(q)) = q^\top M(F) q`.

    Parameters
    ----------
    F : array, shape ``(..., 3, 3)``
        The matrix Fisher parameters.

    Returns
    -------
    ndarray, shape ``(..., 4, 4)``
        Symmetric, trace 0, linear in ``F``: the Bingham parameter on ``S³`` (unit
        quaternions, scalar first) of the matrix Fisher law of ``F``.

    Examples
    --------
    >>> quaternion_form(np.diag([3.0, 2.0, 1.0])).diagonal().tolist()
    [6.0, 0.0, -2.0, -4.0]
    """
    return np.einsum("...ij,ijkl->...kl", np.asarray(F, float), _C)


def _pt_quaternion_form(F):
    return pt.tensordot(pt.as_tensor_variable(F), _C, axes=[[-2, -1], [0, 1]])


def matrix_fisher_log_normalizer(F):
    r"""``log c(F)``, the matrix Fisher normalizer w.r.t. the normalized Haar measure.

    .. math:: c(F) = \int_{SO(3)} e^{\operatorname{tr}(F^\top R)}\, dR
              = \int_0^1 e^{s_1(2t-1)}\, I_0\big(t(s_2+s_3)\big)\,
                I_0\big((1-t)(s_2-s_3)\big)\, dt,

    ``dR`` Haar with total mass 1 (``c(0) = 1``) and ``s_1 >= s_2 >= |s_3|`` the proper
    singular values of ``F`` (``s_3 < 0`` when ``det F < 0``): Wood (1993), Mardia &
    Jupp (2000, section 13.2). Computed as the Bingham normalizer on ``S³`` of
    ``M(F)`` (:func:`quaternion_form`; its eigenvalues are ``s1+s2+s3``,
    ``s1-s2-s3``, ``-s1+s2-s3``, ``-s1-s2+s3``, so no SVD is needed), from
    exponentially scaled Bessel functions by a graded Gauss–Legendre rule: exact to about
    ``1e-13`` (relative, checked against mpmath) for singular values up to ``1e11``,
    with a gradient in ``F`` (also at repeated singular values, ``F = κ R₀``).

    Parameters
    ----------
    F : array or tensor, shape ``(..., 3, 3)``
        The parameter matrices.

    Returns
    -------
    TensorVariable
        ``log c(F)``, shape ``(...)``.

    Examples
    --------
    >>> import numpy as np
    >>> abs(float(matrix_fisher_log_normalizer(np.zeros((3, 3))).eval())) < 1e-15  # c(0) = 1
    True
    """
    eig = _sorted_eigenvalues(_pt_quaternion_form(F))
    return _scaled_log_normalizer(eig, 4) + eig[..., -1] - _LOG_S3_AREA


def sample_matrix_fisher(F, size=None, rng=None):
    r"""Exact draws of the matrix Fisher law :math:`\propto e^{\operatorname{tr}(F^\top R)}`.

    The rotations ``R(q)`` of Bingham draws ``q`` on ``S³`` with parameter ``M(F)``
    (:func:`quaternion_form`, :func:`~pymc_manidp.laws.bingham.sample_bingham`: the
    angular-central-Gaussian envelope of Kent, Ganeiber & Mardia 2018). Vectorized over
    a batch of ``F``.

    Parameters
    ----------
    F : array, shape ``(..., 3, 3)``
        The parameter matrices.
    size : tuple of int, optional
        The batch shape of the draws (default: ``F``'s batch shape).
    rng : numpy.random.Generator, optional
        The source of randomness (``None``: fresh OS entropy).

    Returns
    -------
    ndarray, shape ``(*size, 3, 3)``
        Rotation matrices.

    Examples
    --------
    >>> import numpy as np
    >>> r = sample_matrix_fisher(50 * np.eye(3), (100,), np.random.default_rng(0))
    >>> r.shape, bool(np.mean(np.trace(r, axis1=-2, axis2=-1)) > 2.9)
    ((100, 3, 3), True)
    """
    return rotation_matrices_of(sample_bingham(quaternion_form(F), size, rng))


# --- the PyMC distribution --------------------------------------------------------------
def _check_f(F):
    if not _is_constant(F):
        F = pt.as_tensor_variable(F)
        if F.ndim < 2 or F.type.shape[-2:] not in ((3, 3), (None, 3), (3, None), (None, None)):
            raise ValueError(f"F must have shape (..., 3, 3), got {F.type.shape}")
        return F
    arr = check_symmetric_matrix(F, "F", "a 3×3 matrix")
    if arr.shape[-2:] != (3, 3):
        raise ValueError(f"F must have shape (..., 3, 3) (a rotation's parameter), got {arr.shape}")
    largest = float(np.max(np.linalg.svd(arr, compute_uv=False)))
    if largest > MAX_SINGULAR_VALUE:
        raise ValueError(
            f"F's singular values may be at most {MAX_SINGULAR_VALUE:g}, got {largest:g}: the "
            f"law is then a point mass to rounding; scale F down"
        )
    return pt.as_tensor_variable(arr)


class MatrixFisherRV(RandomVariable):
    """``F -> R`` on SO(3); draws: :func:`sample_matrix_fisher`."""

    name = "MatrixFisher"
    signature = "(m,n)->(m,n)"
    dtype = "floatX"
    _print_name = ("MatrixFisher", r"\operatorname{MatrixFisher}")
    #: NumPy draws in PyTensor's NUMBA backend (object mode, silenced in distributions.py)
    python_draws = True

    def rng_fn(self, rng, F, size):
        return sample_matrix_fisher(F, size, rng)


matrixfisher = MatrixFisherRV()


class MatrixFisher(Continuous):
    r"""The matrix Fisher (von Mises–Fisher matrix) law on the rotation group SO(3).

    .. math:: f(R) = \frac{e^{\operatorname{tr}(F^\top R)}}{8\pi^2\, c(F)}

    with respect to the Riemannian volume of :class:`~pymc_manidp.geometry.Rotations`
    (total ``8π²``), that is :math:`e^{\operatorname{tr}(F^\top R)}/c(F)` with respect
    to the normalized Haar measure: ``pm.logp`` is comparable with the other laws on
    ``Rotations()`` (``F = 0`` gives ``-log 8π²``, as ``ManifoldUniform``). ``c(F)`` is
    :func:`matrix_fisher_log_normalizer` (a one-dimensional integral, exact to about
    ``1e-13``); the mode is the rotation nearest ``F`` (``U diag(1, 1, det UV) Vᵀ``) and
    ``F = κ R₀`` is the isotropic law around ``R₀``. Draws are exact
    (:func:`sample_matrix_fisher`: the law is the image of a Bingham law on unit
    quaternions).

    ``F`` may be a constant (checked now: shape ``(..., 3, 3)``, finite, singular values
    at most ``1e11``), ``pm.Data`` or a random variable (finiteness checked in the
    graph), e.g. ``kappa * R0`` with ``R0`` a random rotation. A latent ``MatrixFisher``
    is sampled in the :class:`~pymc_manidp.laws.charts.NormalizedGaussian` chart of
    SO(3) (quaternions); observed values (rotation matrices ``(n, 3, 3)``) are used as
    given.

    Parameters
    ----------
    name : str
        The variable's name in the model (not an argument of ``.dist``).
    F : array or tensor, shape ``(..., 3, 3)``
        The parameter matrix.
    **kwargs
        ``size``, ``shape``, ``dims``, ``observed`` ... as for any PyMC distribution.

    References
    ----------
    Downs, T. D. (1972), Orientation statistics, *Biometrika* 59(3), 665–676.
    Wood, A. T. A. (1993), Estimation of the concentration parameters of the Fisher
    matrix distribution on SO(3) and the Bingham distribution on S_q, q ≥ 2,
    *Australian Journal of Statistics* 35(1), 69–79. Mardia, K. V. & Jupp, P. E. (2000),
    *Directional Statistics*, section 13.2. Kent, J. T., Ganeiber, A. M. & Mardia, K. V.
    (2018), *Journal of Computational and Graphical Statistics* 27(2), 291–301.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> pm.draw(MatrixFisher.dist(10.0 * np.eye(3), size=4), random_seed=1).shape
    (4, 3, 3)
    >>> lp = pm.logp(MatrixFisher.dist(np.zeros((3, 3))), np.eye(3)).eval()
    >>> bool(np.isclose(lp, -np.log(8 * np.pi**2)))
    True
    """

    rv_type = MatrixFisherRV

    @classmethod
    def rv_op(cls, F, *, size=None, rng=None):
        rng = normalize_rng_param(rng)
        _, rv = matrixfisher(F, size=size, rng=rng, return_next_rng=True)
        return rv

    def __new__(cls, name, F, **kwargs):
        # the signature the docstring documents (as the package's other laws do)
        return super().__new__(cls, name, F, **kwargs)

    @classmethod
    def dist(cls, F, **kwargs):
        return super().dist([_check_f(F)], **kwargs)


def matrix_fisher_logp(value, F):
    """``tr(FᵀR) - log c(F) - log 8π²``, the largest eigenvalue of ``M(F)`` taken out of
    ``log c`` before the two are added."""
    eig = _sorted_eigenvalues(_pt_quaternion_form(F))
    trace = pt.sum(F * value, axis=(-2, -1))
    # log 8π² + log c = log 4 + log Z_{S³}(M)
    return trace - eig[..., -1] - _scaled_log_normalizer(eig, 4) - _LOG_4


@_logprob.register(MatrixFisherRV)
def _matrix_fisher_logprob(op, values, rng, size, F, **kwargs):
    (value,) = values
    return check_parameters(
        matrix_fisher_logp(value, F), pt.all(pt.isfinite(F), axis=(-2, -1)), msg="F finite"
    )


@_support_point.register(MatrixFisherRV)
def _matrix_fisher_support_point(op, rv, rng, size, F):
    # the mode: the rotation of the top eigenvector of M(F)
    _, vecs = pt.linalg.eigh(_pt_quaternion_form(F))
    return pt.broadcast_to(Rotations().pt_from_gaussian(vecs[..., :, -1]), rv.shape)


@_default_transform.register(MatrixFisherRV)
def _matrix_fisher_transform(op, rv):
    return NormalizedGaussian(Rotations())
