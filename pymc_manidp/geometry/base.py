"""The manifold interface shared by every space in the library.

A manifold object holds configuration (dimension, radius, landmarks); the maths is
in pure module-level functions of each manifold's module. :class:`Manifold` lists
what upper layers may rely on: everything that differs between manifolds is one of
its members (maps, frames, curvature, the volume density and what the exact samplers,
the Laplace normalizer, the uniform law, the charts and the MCMC budget need of it),
so no module above this folder asks which class a manifold is, and a new manifold is
one file (``tests/geometry/test_custom_manifold.py`` writes one in a test).
:class:`ManifoldBase` adds the members derived the same way for every space
(``max_radius``, chart coordinates) and the generic answers; it is the only base
class, one level deep. The optional members (a noise map, a uniform law, ...) are the
protocols of :mod:`pymc_manidp.geometry.capabilities`: a space has them or not, tested
by ``isinstance(M, NoiseMap)``.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from pymc_manidp.geometry import capabilities

__all__ = [
    "Manifold",
    "ManifoldBase",
    "check_manifold",
    "exp_chart_is_isometry",
    "max_radius_from",
]


def max_radius_from(injectivity_radius: float, kappa_max: float) -> float:
    r"""Return the radius ``r*`` of Assumption 1 (both papers).

    .. math:: r^* = \tfrac12 \min\{\mathrm{inj}\,\mathcal M,\ \pi / (2\sqrt{\kappa_{\max}})\},

    with ``pi / (2 sqrt(kappa))`` read as ``+inf`` when ``kappa_max <= 0``.

    Parameters
    ----------
    injectivity_radius : float
        Injectivity radius of the manifold (``inf`` allowed).
    kappa_max : float
        Upper bound of the sectional curvature.

    Returns
    -------
    float
        ``r*``: data balls must have a radius below it.

    Examples
    --------
    >>> import numpy as np
    >>> float(max_radius_from(np.pi, 1.0))  # the unit sphere: pi/4
    0.7853981633974483
    >>> float(max_radius_from(np.inf, 0.0))
    inf
    """
    curv = np.pi / (2.0 * np.sqrt(kappa_max)) if kappa_max > 0 else np.inf
    return 0.5 * min(injectivity_radius, curv)


def exp_chart_is_isometry(manifold) -> bool:
    """Whether ``exp`` at any point is a global isometry: flat and without cut locus.

    Then the volume density of the exp chart is 1 everywhere (Euclidean space): the
    Laplace radius is a Gamma variate and its normalizer a closed form.

    Examples
    --------
    >>> from pymc_manidp.geometry import Euclidean, Sphere
    >>> exp_chart_is_isometry(Euclidean(dim=2)), exp_chart_is_isometry(Sphere(dim=1))
    (True, False)
    """
    return tuple(manifold.curvature_bounds) == (0.0, 0.0) and not np.isfinite(
        manifold.injectivity_radius
    )


@runtime_checkable
class Manifold(Protocol):
    """What the statistics, mechanisms and samplers use of a manifold.

    Points and tangent vectors are NumPy arrays batched over leading axes:
    points ``(..., *point_shape)``, tangent vectors ``(..., *point_shape)``
    (embedding coordinates), chart coordinates ``(..., dim)``.
    """

    dim: int
    point_shape: tuple[int, ...]

    @property
    def injectivity_radius(self) -> float:
        """Injectivity radius: ``exp_x`` is a diffeomorphism on tangent balls this small."""

    @property
    def curvature_bounds(self) -> tuple[float, float]:
        """``(kappa_min, kappa_max)``: bounds of the sectional curvature."""

    @property
    def max_radius(self) -> float:
        """``r*`` of Assumption 1: data radii must stay strictly below it."""

    def validate(self, points):
        """Check points and return them standardized, shape ``(..., *point_shape)``.

        Raises ``ValueError`` naming the first bad row (non-finite, off the manifold, ...).
        """

    def exp(self, x, v):
        """Exponential map ``exp_x(v)``: points ``(..., *point_shape)``."""

    def log(self, x, y):
        """Logarithm ``log_x(y)``, the inverse of ``exp_x``: tangent vectors at ``x``."""

    def dist(self, x, y):
        """Geodesic distance ``rho(x, y)``, shape ``(...)``."""

    def inner(self, x, u, v):
        """Riemannian inner product of tangent vectors ``u, v`` at ``x``, shape ``(...)``."""

    def norm(self, x, v):
        """Riemannian norm of tangent vectors ``v`` at ``x``, shape ``(...)``."""

    def to_tangent(self, x, v):
        """Project ambient vectors ``v`` onto the tangent space at ``x``."""

    def tangent_basis(self, x):
        """Orthonormal frame at ``x``, shape ``(dim, *point_shape)``: the chart's axes."""

    def log_volume_density(self, coords):
        """Log density of the exp chart in normal coordinates ``(..., dim)``, shape ``(...)``."""

    # --- the laws' hooks: generic answers in ManifoldBase ----------------------------
    #: Whether the exact samplers (:mod:`pymc_manidp.laws.exact`) may be used: the class
    #: vouches for their premises, a homogeneous space (the law at any footpoint is the
    #: same in normal coordinates) whose ``volume_is_radial``, ``log_volume_growth`` and
    #: curvature bounds are right, and, where ``kappa_max > 0``, a radial volume density
    #: with ``J <= 1`` (KNG's envelope draws radii). Not inherited: a subclass may change
    #: the geometry, and a sampler for the wrong law is worse than none, so
    #: ``ManifoldBase`` sets it to False on a subclass that does not set it in its body.
    exact_sampling: bool

    #: Whether the isometry group acts transitively (sphere, SPD, Kendall shapes,
    #: Euclidean space): then the Laplace law's normalizer on the whole space does not
    #: depend on its footpoint, and the unrestricted Laplace mechanism may use
    #: ``sigma = Delta/eps`` (2021 Thm 1) instead of ``2 Delta/eps``. A privacy claim:
    #: not inherited (a subclass may change the geometry), so ``ManifoldBase`` sets it
    #: to False on a subclass that does not set it in its body.
    homogeneous: bool

    #: Whether the volume density of the exp chart depends on ``|c|`` only (spheres,
    #: Kendall shapes, Euclidean space): then the Laplace radius has a law of its own
    #: (density ``e^{-t/sigma} t^{d-1} J(t)`` on ``[0, injectivity_radius]``), drawn
    #: exactly and integrated by quadrature for the normalizer.
    volume_is_radial: bool

    @property
    def log_volume_growth(self) -> float:
        """``G >= 0`` with ``log J(c) <= G |c|`` for the exp chart's volume density ``J``.

        ``0`` where ``J <= 1`` (nonnegative curvature). The exact Laplace sampler tilts
        its Euclidean envelope by ``G`` when the density is not radial (SPD).
        """

    @property
    def laplace_max_sigma(self) -> float:
        """The normalizability edge: the unrestricted Laplace ``e^{-rho/sigma}`` has a
        finite mass iff ``sigma`` is below it (``inf``: every ``sigma``)."""

    @property
    def laplace_sigma_limit(self) -> tuple[float, str]:
        """``(top, why)``: the normalized, unrestricted Laplace is available for
        ``sigma < top`` (the edge, or a smaller range where its normalizer is known);
        ``why`` says which, for error messages."""

    def check_laplace_normalizable(self, sigma: float) -> None:
        """Raise ``ValueError`` unless ``sigma < laplace_max_sigma``."""

    def rounding_error(self, center, radius: float, *, proposals: bool = True) -> float:
        """Bound on the absolute rounding error of distances and gradient norms
        computed between points of the ball ``B_radius(center)`` (``0``: a few ulps,
        already in the samplers' slack), including (``proposals=True``) points a
        sampler reaches by ``exp`` from a point of the ball by up to ``2 radius``. The
        exact samplers widen their bounds by it; mechanisms refuse a ball where it is
        not small beside their sensitivity."""

    @property
    def log_volume(self) -> float:
        """Log Riemannian volume of the whole manifold; ``inf`` if it is not compact."""

    #: Whether the weighted mean of the points' embedding coordinates *is* the Fréchet
    #: mean (Euclidean space): the mean is then a closed form.
    ambient_mean_is_frechet: bool

    @property
    def mcmc_seconds_per_point(self) -> float:
        """A lower bound on the seconds one gradient evaluation of the mechanisms'
        log-densities costs per data point (NUMBA backend): the MCMC budget's unit."""


class PyTensorTwins(Protocol):
    """The PyTensor versions of the maps, for log-density graphs (same shapes as NumPy).

    Each takes arrays or tensors and returns a tensor; gradients are defined everywhere
    the mechanisms evaluate them (series branches near 0).
    """

    def pt_exp_coords(self, origin, coords):
        """``exp_origin`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""

    def pt_log(self, x, y):
        """``log_x(y)`` as a tensor."""

    def pt_dist(self, x, y):
        """Geodesic distance ``rho(x, y)`` as a tensor, shape ``(...)``."""

    def pt_inner(self, x, u, v):
        """Riemannian inner product at ``x`` as a tensor, shape ``(...)``."""

    def pt_norm(self, x, v):
        """Riemannian norm at ``x`` as a tensor, shape ``(...)``."""

    def pt_log_volume_density(self, coords):
        """Log volume density of the exp chart at coordinates ``(..., dim)``, a tensor."""

    def pt_frechet_gradient_norm(self, x, data):
        """``||sum_i log_x(x_i)||_x`` for points ``x`` ``(..., *point_shape)`` and
        ``data`` ``(n, *point_shape)``, a tensor of shape ``(...)`` (KNG's norm)."""

    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin`` (a dict): the chart's
        ``pm.Data`` in a compiled model, so it can follow a new origin."""

    def pt_exp_frame(self, frame, coords):
        """``exp_origin`` of chart coordinates ``(..., dim)``, the chart given by
        :meth:`chart_frame` (arrays or tensors, e.g. ``pm.Data``)."""

    def pt_log_frame(self, frame, x):
        """Chart coordinates ``(..., dim)`` of points ``x`` in the chart given by
        :meth:`chart_frame`: the inverse of :meth:`pt_exp_frame` (tensor)."""

    def pt_point_checks(self, x):
        """Cheap in-graph checks that ``x`` is a point: a list of boolean tensors
        (the distributions' parameter checks when a point is itself a tensor)."""

    def pt_log_volume_density_noise(self, x, w):
        """Log volume density of ``exp_x`` at the tangent vector ``P_x w``, a tensor
        ``(...)`` (the one of ``pt_log_volume_density`` in an orthonormal frame)."""


def _member_docs() -> dict[str, str]:
    docs = {}
    optional = [getattr(capabilities, name) for name in capabilities.__all__]
    for proto in (Manifold, PyTensorTwins, *optional):
        for name, member in vars(proto).items():
            if not name.startswith("_") and getattr(member, "__doc__", None):
                docs[name] = member.__doc__
    return docs


class ManifoldBase:
    """Members derived identically for every manifold, and the hooks' generic answers.

    Subclasses define ``dim``, ``point_shape``, ``injectivity_radius``,
    ``curvature_bounds``, ``validate``, ``exp``, ``log``, ``dist``, ``inner``,
    ``to_tangent``, ``tangent_basis``, ``log_volume_density`` and the PyTensor twins
    (``pt_exp_frame``, ``pt_log``, ``pt_dist``, ``pt_inner``, ``pt_norm``,
    ``pt_log_volume_density``); every other member has a generic answer here, which
    a space overrides where it knows better (a closed form, a cheaper route).
    """

    dim: int
    point_shape: tuple[int, ...]

    # claims a space must make itself (Manifold's docs); the optional members are
    # not defined here at all (geometry.capabilities: a space offers one by defining it)
    exact_sampling = False
    homogeneous = False
    volume_is_radial = False
    ambient_mean_is_frechet = False

    #: The space's name in data files and on the command line (``--manifold``), found
    #: there through :func:`pymc_manidp.geometry.manifold_class`; ``None``: not offered.
    #: Not inherited: a subclass is another space.
    name: ClassVar[str | None] = None
    #: How one data record of this space is laid out in a file (for help texts).
    record_layout: ClassVar[str] = ""
    #: Other layouts a data file of this space may hold (``--layout``), each with how
    #: one record is laid out; read by ``from_layout``.
    layouts: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_layout(cls, layout: str, records, *, scalar_first: bool = False):
        """``(manifold, points)`` of ``records`` ``(n, ...)`` held in another ``layout``
        (one of ``layouts``), converted to the space's points.

        Raises
        ------
        ValueError
            A layout this space does not read (the message names those it does), or
            records that do not fit it.
        """
        known = ", ".join(cls.layouts) or "none"
        raise ValueError(
            f"{cls.name or cls.__name__} data have no layout {layout!r} (other layouts: "
            f"{known}); records are laid out as {cls.record_layout or 'its points'}"
        )

    def coerce(self, points):
        """``points`` as an array if they come as another library's objects (a SciPy
        ``Rotation`` on SO(3)); anything else unchanged, for the checks to judge.

        The one conversion at the boundary: ``validate``, ``DataDomain`` and the
        mechanisms call it before they look at the points.
        """
        return points

    @classmethod
    def from_record_shape(cls, shape: tuple[int, ...]):
        """The space whose data records have ``shape`` (one row of the data, without n).

        The readers of :mod:`pymc_manidp.io` then reshape the data to
        ``(n, *manifold.point_shape)``. A space with a ``name`` overrides this.

        Raises
        ------
        ValueError
            The shape fits no space of this class (the message names the layouts).
        """
        raise ValueError(f"{cls.__name__} is not read from data files")

    @classmethod
    def audit_space(cls):
        """``(manifold, public center, radius, quadrature nodes per axis)`` or ``None``.

        The small instance that ``pymc-manidp audit --manifold <name>`` audits by
        default; ``None``: the command line does not audit this space.
        """
        return None

    @classmethod
    def examples(cls) -> tuple:
        """A few small instances of this space, for its tests: the contract suite
        (``tests/geometry/contract.py``) checks every member on each. ``()``: none
        given; every shipped space gives some (docs/architecture.md, "How to add a
        manifold")."""
        return ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # a subclass may change the geometry: the exact samplers' premises hold only
        # where the class itself vouches for them (Manifold.exact_sampling); likewise
        # the halved sigma of a homogeneous space (Manifold.homogeneous) and the radial
        # laws of a radial volume density (Manifold.volume_is_radial)
        for claim in ("exact_sampling", "homogeneous", "volume_is_radial"):
            if claim not in vars(cls):
                setattr(cls, claim, False)
        if "name" not in vars(cls):  # a subclass is another space, with no file name yet
            cls.name = None
        # One description per member: a space's exp, log, pt_dist... that has no docstring
        # of its own gets the protocol's (help(), the API reference).
        docs = _member_docs()
        for name, member in vars(cls).items():
            if name in docs and not getattr(member, "__doc__", None):
                if isinstance(member, property):
                    setattr(cls, name, property(member.fget, member.fset, member.fdel, docs[name]))
                elif callable(member):
                    member.__doc__ = docs[name]

    #: How close to the injectivity radius ``log`` refuses to go (0: it never does). A
    #: public ball of radius r holds records 2r apart, so ``DataDomain`` refuses radii
    #: with ``2r > injectivity_radius - 2 log_cut_margin`` (a margin of another
    #: ``log_cut_margin`` for rounding); only SO(3), whose r* = inj/2, comes near.
    log_cut_margin: float = 0.0

    @property
    def max_radius(self) -> float:
        """``r*`` of Assumption 1: data radii must stay strictly below it."""
        return max_radius_from(self.injectivity_radius, self.curvature_bounds[1])

    # --- the laws' hooks: generic answers ---------------------------------------------
    @property
    def log_volume_growth(self) -> float:
        r"""``G >= 0`` with ``log J(c) <= G |c|``, from the lower curvature bound.

        Bishop's comparison: with sectional curvature ``>= kappa`` the volume density
        is at most that of the model space, ``1`` for ``kappa >= 0`` and
        :math:`(\sinh(\sqrt{-\kappa}\,t)/(\sqrt{-\kappa}\,t))^{d-1} \le
        e^{(d-1)\sqrt{-\kappa}\,t}` below. A space that knows a smaller ``G`` overrides it.
        """
        kappa = self.curvature_bounds[0]
        return 0.0 if kappa >= 0 else (self.dim - 1) * float(np.sqrt(-kappa))

    @property
    def laplace_max_sigma(self) -> float:
        """The normalizability edge; generically ``1/G`` (``G = log_volume_growth``),
        below which the Laplace's mass is finite (``inf`` for ``G = 0``): a space that
        knows its exact edge overrides it."""
        growth = self.log_volume_growth
        return np.inf if growth == 0 else 1.0 / growth

    @property
    def laplace_sigma_limit(self) -> tuple[float, str]:
        """``(laplace_max_sigma, "the normalizability edge")``: where the normalized,
        unrestricted Laplace is available, and why."""
        return self.laplace_max_sigma, "the normalizability edge"

    def rounding_error(self, center, radius: float, *, proposals: bool = True) -> float:
        """``0``: distances and logs round by a few ulps of the ball's radius, which
        the samplers' own slack (``1e-12 r``) covers. A space whose coordinates lose
        digits away from an origin (the hyperboloid) overrides it."""
        return 0.0

    def check_laplace_normalizable(self, sigma: float) -> None:
        """Raise ``ValueError`` unless ``sigma < laplace_max_sigma``."""
        top = self.laplace_max_sigma
        if not sigma < top:
            raise ValueError(
                f"the unrestricted Laplace on {self} is not normalizable for sigma = "
                f"{sigma:.6g} >= {top:.6g}: restrict it to the public ball "
                "(restrict=True), or use more data or a larger epsilon"
            )

    @property
    def log_volume(self) -> float:
        """``inf``: a space of finite volume (a compact one) says how much."""
        return np.inf

    @property
    def mcmc_seconds_per_point(self) -> float:
        """``1e-7 s`` per half dimension: a cautious default for a space not measured."""
        return 1e-7 * max(1.0, self.dim / 2)

    def norm(self, x, v):
        """Riemannian norm of tangent vectors ``v`` at ``x``, shape ``(...)``."""
        return np.sqrt(np.maximum(self.inner(x, v, v), 0.0))

    def from_coords(self, x, coords):
        """Tangent vector at ``x`` with chart coordinates ``coords`` ``(..., dim)``."""
        basis = self.tangent_basis(x)
        coords = np.asarray(coords, dtype=float)
        n = len(self.point_shape)
        c = coords.reshape(coords.shape + (1,) * n)
        return np.sum(c * basis, axis=-(n + 1))

    def to_coords(self, x, v):
        """Chart coordinates ``(..., dim)`` of the tangent vector ``v`` at ``x``."""
        basis = self.tangent_basis(x)
        n = len(self.point_shape)
        xb = np.expand_dims(x, -(n + 1))
        vb = np.expand_dims(v, -(n + 1))
        return self.inner(xb, basis, vb)

    def exp_coords(self, x, coords):
        """``exp_x`` of the tangent vector with chart coordinates ``coords``."""
        return self.exp(x, self.from_coords(x, coords))

    def frechet_gradient(self, x, data, weights):
        r"""Weighted mean log vector and Fréchet energy at ``x``.

        Returns ``(g, energy)`` with ``g = sum_i w_i log_x(x_i)`` (minus the
        gradient of ``F``) and ``energy = F(x) = 1/2 sum_i w_i rho(x, x_i)^2``;
        ``data`` is ``(n, *point_shape)``, ``weights`` ``(n,)``. Manifolds may
        override this with a cheaper route (SPD does).
        """
        logs = self.log(x, data)
        g = np.tensordot(weights, logs, axes=(0, 0))
        energy = 0.5 * float(np.sum(weights * self.norm(x, logs) ** 2))
        return g, energy

    #: Whether :meth:`frechet_gradient_hessian` and :meth:`newton_direction` are written:
    #: the Fréchet mean then takes Newton steps (``pymc_manidp.stats.frechet``).
    frechet_newton: ClassVar[bool] = False

    #: The module of ``geometry/_numba/fused/`` with this space's kernels in chart
    #: coordinates (its log volume density and KNG's norm, each with its exact
    #: gradient): NUTS releases then compile one fused log-density
    #: (``pymc_manidp.laws.fused``) instead of PyTensor's graph. None: the graph.
    fused_kernels: ClassVar[str | None] = None

    def frechet_gradient_hessian(self, x, data, weights):
        """:meth:`frechet_gradient` plus ``h``, a weighted sum over the data (so the
        blocks of a pass add up) from which :meth:`newton_direction` builds the Hessian
        of the Fréchet energy at ``x``. Returns ``(g, energy, h)``; written by the
        manifolds with ``frechet_newton = True``."""
        raise NotImplementedError(f"{type(self).__name__} has no Fréchet Newton step")

    def newton_direction(self, x, g, h):
        """The tangent vector ``H^{-1} g`` at ``x``, ``H`` the Hessian built from the
        ``h`` of :meth:`frechet_gradient_hessian` (weights summing to one)."""
        raise NotImplementedError(f"{type(self).__name__} has no Fréchet Newton step")

    def frechet_gradient_distances(self, x, data, weights):
        r""":meth:`frechet_gradient` and the distances it passed through, in one sweep.

        Returns ``(g, energy, rho)``: ``g`` and ``energy`` as :meth:`frechet_gradient`,
        and ``rho`` ``(n,)`` with ``rho_i = rho(x, x_i)``, the norms of the log maps
        the sum is made of. One pass over out-of-core data then gives both the
        Fréchet step and the distance profile at ``x`` (the KNG envelope's slopes,
        ``pymc_manidp.stats.reductions.distance_profile``). Manifolds may override it
        with a cheaper route (Sphere does).
        """
        logs = self.log(x, data)
        rho = self.norm(x, logs)
        g = np.tensordot(weights, logs, axes=(0, 0))
        return g, 0.5 * float(np.sum(weights * rho**2)), rho

    def stack_frechet_gradient(self, x, data):
        r"""Mean log vectors and Fréchet energies of many data sets at once.

        Returns ``(g, energy)``: ``g[j] = (1/n) sum_i log_{x_j}(x_{ji})`` (minus the
        gradient of ``F_j``) with shape ``(m, *point_shape)`` and ``energy[j] = F_j(x_j)
        = 1/(2n) sum_i rho(x_j, x_{ji})^2`` with shape ``(m,)``, for points ``x``
        ``(m, *point_shape)`` and data sets ``data`` ``(m, n, *point_shape)``: what
        :meth:`frechet_gradient` gives for one (equal weights), for a stack of them
        in one array pass (``pymc_manidp.stats.frechet.frechet_means``, the
        exact samplers of many releases). Manifolds may override it with a cheaper
        route (Sphere and SPD do).
        """
        xb = np.expand_dims(np.asarray(x, float), 1)
        logs = self.log(xb, np.asarray(data, float))
        return np.mean(logs, axis=1), 0.5 * np.mean(self.norm(xb, logs) ** 2, axis=1)

    def log_coords(self, x, y):
        """Chart coordinates at ``x`` of ``log_x(y)``: the inverse of :meth:`exp_coords`."""
        return self.to_coords(x, self.log(x, y))

    def chart_frame(self, origin):
        """The arrays fixing the exp chart at ``origin``: the origin and its frame."""
        origin = np.asarray(origin, float)
        if origin.shape != tuple(self.point_shape):
            raise ValueError(f"the chart origin must be one point of shape {self.point_shape}")
        return {"origin": origin, "basis": self.tangent_basis(origin)}

    def pt_exp_coords(self, origin, coords):
        """``exp_origin`` of chart coordinates ``coords`` ``(..., dim)`` (tensor)."""
        return self.pt_exp_frame(self.chart_frame(origin), coords)

    def pt_log_frame(self, frame, x):
        """Chart coordinates of points ``x``: ``pt_log`` at the frame's ``origin``,
        read in its orthonormal ``basis`` with ``pt_inner`` (the frame of
        :meth:`chart_frame`)."""
        import pytensor.tensor as pt

        origin = pt.as_tensor_variable(frame["origin"])
        basis = pt.as_tensor_variable(frame["basis"])
        v = self.pt_log(origin, x)
        n = len(self.point_shape)
        # read in the metric, not the ambient dot product: they differ by a factor on
        # SO(3) (1/2 tr) and everywhere but I on SPD
        return self.pt_inner(origin, pt.shape_padaxis(v, -n - 1), basis)

    def pt_log_volume_density_noise(self, x, w):
        """Log volume density of ``exp_x`` at ``P_x w``: where it is radial (a function
        of the length only), ``pt_log_volume_density`` of the one coordinate
        ``|P_x w|_x``; a space whose density is not radial (SPD) overrides it."""
        import pytensor.tensor as pt

        if not self.volume_is_radial:
            raise NotImplementedError(f"{self} has no radial volume density: override this")
        return self.pt_log_volume_density(pt.shape_padright(self.pt_noise_norm(x, w)))

    def pt_point_checks(self, x):
        """``[isfinite(x)]``: a space with a cheap test of its own overrides it."""
        import pytensor.tensor as pt

        return [pt.isfinite(x)]

    def pt_frechet_gradient_norm(self, x, data):
        """``||sum_i log_x(x_i)||_x`` for points ``x`` ``(..., *point_shape)`` and
        ``data`` ``(n, *point_shape)``, a tensor of shape ``(...)`` (KNG's norm).

        This generic route evaluates ``n`` logarithms at ``x``; manifolds override it
        with a cheaper one where the sum has structure (SPD, Kendall, the sphere).
        """
        import pytensor.tensor as pt  # NumPy users of the manifolds need no PyTensor

        x = pt.as_tensor_variable(x)
        nd = len(self.point_shape)
        n = pt.as_tensor_variable(data).shape[0]
        # broadcast explicitly: batched matrix functions infer their output's static
        # shape from the first operand, so a length-1 axis there would drop data rows
        xb = pt.expand_dims(x, -nd - 1)
        xb = pt.broadcast_to(xb, (*[x.shape[i] for i in range(x.ndim - nd)], n, *self.point_shape))
        return self.pt_norm(x, pt.sum(self.pt_log(xb, data), axis=-nd - 1))


def check_manifold(manifold, name: str = "manifold"):
    """Return ``manifold`` if it is a manifold *instance* (not a class, string or None)."""
    if isinstance(manifold, type) or not isinstance(manifold, Manifold):
        what = manifold.__name__ + " (the class)" if isinstance(manifold, type) else repr(manifold)
        raise TypeError(
            f"{name} must be a manifold instance such as pmd.Sphere(dim=2) or pmd.SPD(k=2), "
            f"got {what}"
        )
    return manifold
