r"""The public data domain: a closed geodesic ball ``B_r(m0)`` with ``r < r*``.

Both papers' guarantees assume every record lies in a ball whose center and radius
are public (chosen without looking at the data). :class:`DataDomain` makes that
premise explicit: it refuses radii at or above ``r*``, refuses data outside the ball
(or clips it, record by record, when the caller opts in), and turns the numerical
error of an approximate Fréchet mean into extra sensitivity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_manidp._validation import check_bool, check_positive_real, check_real_data
from pymc_manidp.stats import reductions
from pymc_manidp.stats import sensitivity as sens

# Defined beside the passes that raise it for Dask data: reductions imports nothing
# from this module, so the two have no import cycle. Still importable from here.
from pymc_manidp.stats.reductions import CheckedData, DomainError

__all__ = ["DataDomain", "DomainError"]


@dataclass(frozen=True, eq=False)
class DataDomain:
    r"""Closed geodesic ball ``B_r(m0)`` on a manifold, public by assumption.

    Parameters
    ----------
    manifold : Manifold
        The manifold of the data.
    center : array, shape ``point_shape``
        The public center ``m0``; it must not be computed from the data.
    radius : float
        The public radius ``r``, ``0 < r < r*`` (``manifold.max_radius``).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_manidp as pmd
    >>> dom = DataDomain(pmd.Sphere(dim=2), center=[0.0, 0.0, 1.0], radius=np.pi / 8)
    >>> round(dom.curvature_factor, 6)
    0.785398
    """

    manifold: object
    center: np.ndarray
    radius: float

    def __post_init__(self):
        M = self.manifold
        center = M.validate(self.center)
        if center.shape != tuple(M.point_shape):
            raise ValueError(
                f"center must be one point of shape {tuple(M.point_shape)}, got {center.shape}"
            )
        r = check_positive_real(self.radius, "radius")
        if r >= M.max_radius:
            raise ValueError(
                f"radius {r:.6g} is not below r* = {M.max_radius:.6g}, the largest radius "
                "for which the Fréchet mean is unique and the sensitivity bounds hold "
                "(Assumption 1). Choose a smaller public radius."
            )
        margin = float(M.log_cut_margin)
        if margin > 0 and 2.0 * r > M.injectivity_radius - 2.0 * margin:
            largest = 0.5 * M.injectivity_radius - margin
            raise ValueError(
                f"radius {r!r} is above {largest!r}, the largest radius supported on {M}: "
                f"two records in the ball may be 2r apart, and its log map is undefined "
                f"within {margin:g} of the injectivity radius {M.injectivity_radius:.6g} "
                "(the cut locus). Choose a radius of at most that."
            )
        object.__setattr__(self, "center", center)
        object.__setattr__(self, "radius", r)

    @property
    def curvature_factor(self) -> float:
        """``H = h_max(2r, kappa_max)`` for this ball."""
        return sens.curvature_factor(self.radius, self.manifold.curvature_bounds[1])

    @property
    def curvature_factor_min(self) -> float:
        """``H_min = h_min(2r, kappa_min)`` for this ball."""
        return sens.curvature_factor_min(self.radius, self.manifold.curvature_bounds[0])

    def distances(self, data) -> np.ndarray:
        """Geodesic distances from the center, shape ``(n,)``."""
        return self.manifold.dist(self.center, data)

    def public_n(self, data) -> int:
        """``n``, from the data's type and shape only: what a release may check before
        its privacy budget is charged.

        The number of records and the shape of a record are public in this library's
        privacy unit (the sensitivity is a function of ``n``); no value is read (a
        Dask array's shape comes from its chunks, never from a pass). What this
        refuses, :meth:`check` would refuse too, but only after a charge.

        Parameters
        ----------
        data : array_like or dask.array.Array, shape ``(n, *point_shape)``

        Returns
        -------
        int
            ``n >= 1``.

        Raises
        ------
        TypeError
            A dtype other than integer or floating point (strings, bools, objects).
        ValueError
            A wrong shape, no records, a ragged sequence, a masked array with masked
            entries, or a Dask array whose chunk sizes are unknown.
        """
        shape = tuple(self.manifold.point_shape)
        want = f"(n, {', '.join(map(str, shape))})"
        data = self.manifold.coerce(data)  # e.g. a SciPy Rotation: its matrices
        if data is None:
            raise TypeError(f"data must be an array of shape {want}, got None")
        if isinstance(data, (str, bytes)):
            raise TypeError(f"data must be an array of shape {want}, got {type(data).__name__}")
        if reductions.is_dask(data):
            got = tuple(data.shape)
            if any(isinstance(s, float) and s != s for s in got):
                raise ValueError(
                    f"the Dask array's chunk sizes are unknown (shape {got}; unknown chunk "
                    "sizes): call "
                    "data.compute_chunk_sizes() first (or load it with pymc_manidp.io), so "
                    "that n, and so the sensitivity, is known before the budget is charged"
                )
        else:
            try:
                got = np.shape(data)
            except ValueError:  # NumPy refuses ragged nested sequences
                raise ValueError(
                    f"data must be an array of shape {want}: got a ragged sequence (records "
                    "of different lengths)"
                ) from None
        check_real_data(data, "data")
        if len(got) != len(shape) + 1 or tuple(got[1:]) != shape:
            raise ValueError(
                f"data must have shape {want}: points of trailing shape {shape}, one per "
                f"row; got shape {got}"
            )
        if got[0] == 0:
            raise ValueError(f"data is empty (shape {got}): nothing to release")
        return int(got[0])

    def check(self, data, *, clip: bool = False) -> CheckedData:
        """Validate data against the manifold and the ball; return the data to use.

        One pass over the data (:func:`~pymc_manidp.stats.reductions.scan_domain`),
        which also sums the Fréchet gradient at the center for the mean's first step.
        The result is a value, :class:`~pymc_manidp.stats.reductions.CheckedData`
        (the records, this domain and what the pass learnt), which stands in for its
        records as an array and which the passes, ``frechet_mean`` and
        ``frechet_median`` trust: checking it again against an equal domain returns
        it unchanged, without a pass.

        Parameters
        ----------
        data : array or dask.array.Array, shape ``(n, *point_shape)``
            A Dask array (chunked along ``n``) is checked chunk by chunk, never
            gathered; its errors name the chunk and the row, and the result is a
            lazy Dask array (clipped lazily with ``clip=True``).
        clip : bool
            If False (default) any point outside the closed ball raises
            :class:`DomainError`, naming how many and the worst distance. If True,
            each outside point moves along its geodesic from the center onto the
            boundary: a per-record map, so the privacy guarantee still holds.

        Returns
        -------
        CheckedData
            The validated points (its ``points``): accepted NumPy data as a new
            read-only array (what was checked cannot change afterwards), Dask data as a
            lazy array that validates (or clips) chunk by chunk in each later pass.

        Raises
        ------
        ValueError
            Empty data, wrong shape, points off the manifold, NaN/inf.
        DomainError
            Points outside the ball (without ``clip``), or a point at the cut locus
            of the center, where no geodesic to clip along is unique.
        """
        M = self.manifold
        clip = check_bool(clip, "clip")  # "no" is truthy: never coerce
        if reductions.checked_summary(data, domain=self) is not None:
            return data
        if isinstance(data, CheckedData):  # another domain's, or not trusted: check anew
            data = data.points
        data = M.coerce(data)  # e.g. a SciPy Rotation: its matrices
        check_real_data(data, "data")  # before any path: a mask or a dtype never slips by
        if reductions.is_dask(data):
            return reductions.scan_domain(self, data, clip=clip)
        if (
            isinstance(data, np.ndarray)
            and data.dtype.kind == "f"
            and data.ndim == len(M.point_shape) + 1
            and data.shape[1:] == tuple(M.point_shape)
            and len(data)
        ):
            checked = reductions.scan_domain(self, data)
            if checked is not None:
                return checked
            # data that fail take the path below, which names what failed
        x = M.validate(data)
        if x.ndim != len(M.point_shape) + 1:
            raise ValueError(
                f"data must have shape (n, {', '.join(map(str, M.point_shape))}), got {x.shape}"
            )
        if x.shape[0] == 0:
            raise ValueError("data is empty: nothing to summarize")
        d = self.distances(x)
        if not np.all(np.isfinite(d)):
            bad = ~np.isfinite(d)
            raise DomainError(
                f"the distance to the center could not be computed for {int(bad.sum())} "
                f"points (first at row {int(np.argmax(bad))}): they are too ill-conditioned "
                "to place in or out of the ball"
            )
        outside = self.outside(d)
        if not np.any(outside):
            return CheckedData(x, self)
        if not clip:
            excess = float(d.max()) - self.radius
            rounding = excess <= 64 * np.finfo(float).eps * max(self.radius, 1.0)
            raise DomainError(
                f"{int(outside.sum())} of {len(d)} points lie outside the public ball of "
                f"radius {self.radius!r}: the farthest exceeds it by {excess!r} (distance "
                f"{float(d.max())!r}), first at row {int(np.argmax(outside))}."
                + (
                    " That is rounding (points placed on the boundary by another tool): "
                    "clip=True moves them inside by as much and keeps the guarantee."
                    if rounding
                    else " Pass clip=True to move them onto the boundary (a per-record map "
                    "that keeps the guarantee), or choose a larger public radius (below r*) "
                    "without looking at the data."
                )
            )
        return CheckedData(self._clip(x, d, outside), self)

    def outside(self, d):
        """Mask of records not provably inside the ball (NaN-safe), from their distances ``d``."""
        return ~(d <= self.radius)

    def _clip(self, x, d, outside):
        M = self.manifold
        try:
            v = M.to_tangent(self.center, M.log(self.center, x[outside]))
        except ValueError as err:
            raise DomainError(f"cannot clip: {err}") from None
        norms = M.norm(self.center, v).reshape((-1,) + (1,) * len(M.point_shape))
        out = x.copy()
        rows = np.flatnonzero(outside)  # rows of x still to place
        pos = np.arange(len(rows))  # their positions in v
        # Scale by the norm of the vector actually used, a hair inside the boundary. When
        # rounding of exp/dist still leaves a point outside (e.g. a tiny ball far from the
        # origin, where one ulp of the coordinates is a sizeable part of r), step further
        # in; the last step is the center itself, which is always inside. Each record's
        # image depends on that record only: a per-record map, so the guarantee holds.
        for shrink in (1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 0.5):
            moved = M.validate(
                M.exp(self.center, v[pos] * (self.radius * (1.0 - shrink) / norms[pos]))
            )
            out[rows] = moved
            still = ~(self.distances(moved) <= self.radius)
            rows, pos = rows[still], pos[still]
            if not len(rows):
                return out
        out[rows] = self.center
        return out

    @property
    def rounding_error(self) -> float:
        """Bound on the rounding of distances and gradient norms in the ball
        (``manifold.rounding_error``; ``0`` on every space but the hyperboloid)."""
        return float(self.manifold.rounding_error(self.center, self.radius))

    @property
    def gradient_rounding_error(self) -> float:
        """The rounding of gradient norms at points of the ball only (no sampler's
        proposal): ``manifold.rounding_error(..., proposals=False)``."""
        return float(self.manifold.rounding_error(self.center, self.radius, proposals=False))

    def largest_radius(self, limit: float, *, proposals: bool = True) -> float:
        """The largest radius at this center whose ``manifold.rounding_error`` stays at
        most ``limit`` (bisection to 1e-9 relative; ``0.0`` if none does): what the
        refusals of a too-large public radius name.

        Examples
        --------
        >>> import pymc_manidp as pmd
        >>> H = pmd.Hyperbolic(dim=2)
        >>> round(DataDomain(H, H.origin, 1.0).largest_radius(1e-2), 3)
        6.473
        """
        M = self.manifold
        top = float(M.max_radius)
        if not M.rounding_error(self.center, 1e-300, proposals=proposals) <= limit:
            return 0.0
        lo, hi = 0.0, top if np.isfinite(top) else 1.0
        while (
            not np.isfinite(top) and M.rounding_error(self.center, hi, proposals=proposals) <= limit
        ):
            lo, hi = hi, 2.0 * hi
            if hi > 1e6:
                return lo
        while hi - lo > 1e-9 * hi:
            mid = 0.5 * (lo + hi)
            if M.rounding_error(self.center, mid, proposals=proposals) <= limit:
                lo = mid
            else:
                hi = mid
        return lo

    def check_precision(
        self, sensitivity: float, sigma: float, what: str, floor=None, gradient_floor=None
    ) -> None:
        """Refuse a ball where rounding is not small beside the sensitivity and σ.

        The computed densities ``e^{-rho/sigma}`` and ``e^{-|grad F|/sigma}`` differ
        from the proved ones by a factor up to ``e^{eta/sigma}``, ``eta`` the
        :attr:`rounding_error`; with ``sigma = 2 Delta/eps`` that spends
        ``eps eta/(2 Delta)`` more than charged, and the exact samplers' bounds, widened
        by ``eta``, accept a fraction ``~e^{-4 eta/sigma}`` less. Refused when
        ``eta > min(Delta/100, sigma/4, floor)`` (1% of ε at most, a factor ``e`` of
        acceptance at most, and a mechanism's own tolerance), or when the rounding of
        gradients at points of the ball (:attr:`gradient_rounding_error`) exceeds
        ``gradient_floor`` (the Laplace's ``grad_tol``): public facts (the manifold,
        center, radius, ``n`` and ε), so before any charge or read.

        Raises
        ------
        ValueError
            Naming the rounding, the limit it exceeds and the fix.
        """
        eta = self.rounding_error
        limits = {
            "1/100 of the sensitivity": 0.01 * sensitivity,
            "sigma/4": 0.25 * sigma,
        }
        if floor is not None:
            limits[floor[0]] = floor[1]
        name, top = min(limits.items(), key=lambda kv: kv[1])
        on_gradients = False  # which rounding decides: the proposals' or the ball's
        if gradient_floor is not None:  # a tolerance on gradients at points of the ball
            grad_eta = self.gradient_rounding_error
            if grad_eta > gradient_floor[1] and not eta > top:
                eta, name, top = grad_eta, gradient_floor[0], gradient_floor[1]
                on_gradients = True
        if eta <= top:
            return
        largest = self.largest_radius(top, proposals=not on_gradients)
        raise ValueError(
            f"{what}: the public ball reaches where {self.manifold}'s coordinates round "
            f"distances by up to {eta:.3g} (manifold.rounding_error), more than {name} "
            f"({top:.3g}): the computed density would not be the proved one at working "
            f"precision. Use a smaller radius (the largest supported at this center for "
            f"this n and epsilon is about {largest:.6g}) or a center nearer the origin "
            "(the rounding grows like eps cosh(R) cosh(R + 2r) on the hyperboloid and "
            "eps e^R e^(R + 2r) on SPD, R = rho(origin, center) + radius: "
            "docs/geometry.md), or a smaller epsilon"
        )

    def footpoint_error(self, grad_norm: float) -> float:
        """Bound on ``rho(x, x_bar)`` from ``|grad F(x)|``: 2022 Lemma 1, ``H rho <= |grad F|``."""
        return float(grad_norm) / self.curvature_factor

    def laplace_sensitivity(self, n: int, grad_tol: float = 0.0) -> float:
        """Fréchet-mean sensitivity widened by the footpoint's numerical error.

        If every released footpoint has ``|grad F| <= grad_tol`` (a public
        tolerance, checked at release time), each is within ``grad_tol / H`` of the
        exact mean, so ``Delta + 2 grad_tol / H`` bounds the distance between the
        footpoints of neighbouring datasets.
        """
        base = sens.laplace_sensitivity(self.manifold, n, self.radius)
        if grad_tol < 0 or not np.isfinite(grad_tol):
            raise ValueError(f"grad_tol must be a finite number >= 0, got {grad_tol}")
        return base + 2.0 * self.footpoint_error(grad_tol)

    def kng_sensitivity(self, n: int) -> float:
        """KNG gradient sensitivity ``2r(2 - H)/n`` (no footpoint enters KNG's density)."""
        return sens.kng_sensitivity(self.manifold, n, self.radius)

    def median_sensitivity(self, n: int) -> float:
        """The Fréchet median's gradient sensitivity ``2/n`` (KNG on the median)."""
        return sens.median_gradient_sensitivity(self.manifold, n, self.radius)
