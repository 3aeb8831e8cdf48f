"""The optional members of a manifold, one small protocol per capability.

Every manifold has the members of :class:`~pymc_manidp.geometry.base.Manifold`. The
members below are optional: a space offers a capability by defining its members
(methods, properties or attributes set in ``__post_init__``) and does not offer it by
not defining them at all, so ``isinstance(M, NoiseMap)`` answers whether ``M`` has a
noise map. :class:`~pymc_manidp.geometry.base.ManifoldBase` defines none of them;
never give one the value ``None`` to say "not offered": Python's runtime check looks
only at whether the attribute exists (a ``None`` method counts as absent, a ``None``
property or data attribute as present), so a space that offers a capability for some
instances only sets it on those (``SPD(k)``'s Laplace normalizer, ``k <= 3``).

The groups follow how the library uses the members together: the laws need all of a
noise map or none of it, the uniform law's chart needs its shape, its map and its
inverse.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = [
    "AmbientMeanStart",
    "BallExit",
    "GaussianChart",
    "GenericPoint",
    "LaplaceNormalizer",
    "NoiseMap",
    "Origin",
    "Projection",
    "UniformLaw",
]


@runtime_checkable
class UniformLaw(Protocol):
    """A uniform law (normalized volume) that can be sampled: compact spaces.

    Used by ``ManifoldUniform`` (with a finite ``log_volume``) and by the uniform
    reference draws of the inference checks.
    """

    def sample_uniform(self, rng, size=()):
        """Draw points of the uniform law.

        Parameters
        ----------
        rng : numpy.random.Generator
            The source of randomness.
        size : tuple of int, optional
            Batch shape of the draw.

        Returns
        -------
        numpy.ndarray
            Points ``(*size, *point_shape)``.
        """


@runtime_checkable
class GenericPoint(Protocol):
    """A fixed point with no symmetry (not a pole, not a regular polygon).

    Where a law without a mode starts a sampler, and a test's default center.
    """

    @property
    def generic_point(self):
        """The point, shape ``point_shape`` (NumPy)."""


@runtime_checkable
class Origin(Protocol):
    """The space's distinguished point (SPD: the identity; Euclidean: the origin).

    The center of a chart that needs one without data (a random footpoint on a
    non-compact space) and the default center of data files.
    """

    @property
    def origin(self):
        """The point, shape ``point_shape`` (NumPy)."""


@runtime_checkable
class AmbientMeanStart(Protocol):
    """A start for the Fréchet mean's descent from the embedding coordinates' mean."""

    def ambient_mean_start(self, m):
        """A point near the Fréchet mean of points whose weighted ambient mean is ``m``.

        Parameters
        ----------
        m : numpy.ndarray
            The weighted mean of the points' embedding coordinates, ``point_shape``.

        Returns
        -------
        numpy.ndarray or None
            A point of the space, or ``None`` where ``m`` gives none (the descent then
            starts at the first datum).
        """


@runtime_checkable
class BallExit(Protocol):
    """A closed form of the distance to the edge of a ball along chart directions.

    Caps the polar chart at the edge of the public ball (no wall for NUTS); KNG on the
    median needs it for MCMC.
    """

    def pt_ball_exit(self, frame, omega, ball_center, ball_radius):
        """The distance ``T(omega)`` from the chart's origin (inside the ball) to the
        edge of ``B_ball_radius(ball_center)`` along unit chart directions ``omega``.

        Parameters
        ----------
        frame : dict
            The chart, from ``chart_frame(origin)`` (arrays or tensors).
        omega : TensorVariable
            Unit chart directions ``(..., dim)``.
        ball_center : array or TensorVariable
            The ball's center, ``point_shape``.
        ball_radius : float or TensorVariable
            The ball's radius.

        Returns
        -------
        TensorVariable
            ``T(omega)``, shape ``(...)``.
        """


@runtime_checkable
class LaplaceNormalizer(Protocol):
    """The unrestricted Laplace law's normalizer as a closed form or a table.

    Where the volume density is not radial (SPD), or where a closed form beats the
    radial quadrature (SO(3), hyperbolic space); without it the normalizer is the
    radial quadrature, or unavailable.
    """

    def pt_laplace_log_normalizer(self, sigma):
        """``log Z(sigma)`` of ``e^{-rho(x, eta)/sigma}`` over the whole space.

        Parameters
        ----------
        sigma : float or TensorVariable
            The Laplace scale.

        Returns
        -------
        TensorVariable
            ``log Z(sigma)``.
        """


@runtime_checkable
class GaussianChart(Protocol):
    """A normalized-Gaussian map: the uniform law's chart on a compact space.

    A standard normal ``z`` of shape ``gaussian_shape`` maps to a uniform point by a
    map homogeneous of degree 0 (``NormalizedGaussian``, the global chart of a random
    footpoint).
    """

    #: Shape of the Gaussian vector ``z``.
    gaussian_shape: tuple[int, ...]

    def pt_from_gaussian(self, z):
        """The point of ``z`` ``(..., *gaussian_shape)``, a tensor ``(..., *point_shape)``;
        homogeneous of degree 0, and a standard normal ``z`` gives a uniform point."""

    def pt_to_gaussian(self, x):
        """A ``z`` with ``pt_from_gaussian(z) = x`` (the one of norm 1 suffices), a
        tensor ``(..., *gaussian_shape)``."""


@runtime_checkable
class NoiseMap(Protocol):
    """Tangent noise at a footpoint that is itself random: the moving chart.

    ``P_x`` is a linear map of noise ``w`` (shape ``noise_shape``) onto ``T_x``, smooth
    in ``x`` everywhere (a projection, a parallel transport from a fixed point, a
    congruence), under which a standard normal ``w`` is standard normal on
    ``(T_x, metric)`` (``MovingTangentChart``, ``MovingPolarChart``).
    """

    #: Shape of the tangent noise ``w``.
    noise_shape: tuple[int, ...]

    def pt_exp_noise(self, x, w):
        """``exp_x(P_x w)`` for footpoints ``x`` ``(..., *point_shape)`` and noise ``w``
        ``(..., *noise_shape)``, a tensor of points."""

    def pt_noise_norm(self, x, w):
        """``|P_x w|_x``, a tensor ``(...)``."""

    def pt_log_noise(self, x, y):
        """A noise ``w`` with ``P_x w = log_x(y)`` (the one of least norm),
        ``(..., *noise_shape)``: the inverse of :meth:`pt_exp_noise`."""


@runtime_checkable
class Projection(Protocol):
    """The nearest points of the space to points near it (rounded records).

    An explicit, recorded step of a release (``release(..., project=True)``,
    ``--project``).
    """

    def project(self, points):
        """The nearest points of the space to ``points`` ``(..., *point_shape)``.

        Raises
        ------
        ValueError
            Points with no nearest point (the message says which).
        """
