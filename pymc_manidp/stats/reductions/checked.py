"""The check record and the pass that makes it: ``scan_domain`` validates the records and
places them in the public ball in one pass, and returns a :class:`CheckedData` (the
records, the domain and the :class:`CheckSummary` of what the pass learnt), which the
other passes, ``frechet_mean`` and ``frechet_median`` accept and trust.

``is_dask`` is here because it sees through the record (checked Dask records are Dask).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from pymc_manidp.stats.reductions import passes
from pymc_manidp.stats.reductions.passes import _PASSES, _point_chunks, _rows_per_block, n_rows


class DomainError(ValueError):
    """Data violate the public domain: nothing may be released from them as they are.

    Raised by ``DataDomain.check`` and by its passes over Dask data. Public as
    ``pymc_manidp.DomainError`` (and ``pymc_manidp.stats.DomainError``).
    """


def is_dask(x) -> bool:
    """Whether ``x`` is a ``dask.array.Array`` (never imports Dask).

    Parameters
    ----------
    x : object
        Anything.

    Returns
    -------
    bool
        True for a Dask array (only possible once Dask is imported).

    Examples
    --------
    >>> import numpy as np
    >>> is_dask(np.zeros((2, 3)))
    False
    """
    if isinstance(x, CheckedData):  # checked records: Dask if their points are
        x = x.points
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(x, da.Array)


@dataclass(frozen=True)
class CheckSummary:
    """What one check pass learnt about data it accepted.

    Attributes
    ----------
    n : int
        Number of records.
    max_distance : float
        Largest distance of a record from the public center.
    center : ndarray
        The public center ``m0``.
    center_gradient : ndarray or None
        ``(1/n) sum_i log_{m0}(x_i)``: the first step of the Fréchet mean from ``m0``
        (None when the data were clipped).
    center_energy : float or None
        ``F(m0)``.
    mean_ambient : ndarray
        ``(1/n) sum_i x_i`` in the embedding (the Euclidean mean, a start point).
    """

    n: int
    max_distance: float
    center: np.ndarray
    center_gradient: np.ndarray | None
    center_energy: float | None
    mean_ambient: np.ndarray


@dataclass
class _ChunkScan:
    rows: int = 0
    problem: str | None = None  # "invalid", "distance", or None
    problem_row: int = -1
    problem_message: str = ""
    outside: int = 0
    first_outside: int = -1
    max_distance: float = 0.0
    g: np.ndarray | None = None
    e: float = 0.0
    ambient: np.ndarray | None = None


def _first_invalid(M, b):
    """Row (in ``b``) and message of the first record ``M.validate`` refuses."""
    trailing = tuple(range(1, b.ndim))
    finite = np.isfinite(b).all(axis=trailing)
    if not finite.all():
        i = int(np.argmin(finite))
        return i, "it holds NaN or infinite values"
    for i in range(len(b)):
        try:
            M.validate(b[i])
        except (ValueError, TypeError) as err:
            return i, str(err)
    return 0, "the block failed validation"  # pragma: no cover - validate is per row


def _scan_rows(domain, data, out, offset=0):
    """Scan ``data`` block by block; write validated points into ``out`` (if given)."""
    M = domain.manifold
    rows = _rows_per_block(M.point_shape)
    scan = _ChunkScan(rows=len(data), max_distance=-np.inf)
    g = np.zeros(M.point_shape)
    ambient = np.zeros(M.point_shape)
    fused = True
    for s in range(0, len(data), rows):
        raw = np.asarray(data[s : s + rows])
        try:
            b = M.validate(raw)
        except (ValueError, TypeError):
            i, msg = _first_invalid(M, raw)
            scan.problem, scan.problem_row, scan.problem_message = "invalid", s + i, msg
            return scan
        d = domain.distances(b)
        finite = np.isfinite(d)
        if not finite.all():
            scan.problem, scan.problem_row = "distance", s + int(np.argmin(finite))
            return scan
        outside = domain.outside(d)
        if outside.any():
            if scan.outside == 0:
                scan.first_outside = s + int(np.argmax(outside))
            scan.outside += int(outside.sum())
            fused = False
        scan.max_distance = max(scan.max_distance, float(d.max()))
        ambient += b.sum(axis=0)
        if fused:
            # fused with the first Fréchet iteration: the gradient at the public center
            try:
                gb, eb = M.frechet_gradient(domain.center, b, np.ones(len(b)))
            except ValueError:  # e.g. a cut locus: the Fréchet mean starts elsewhere
                fused = False
            else:
                g += gb
                scan.e += eb
        if out is not None:
            out[s : s + rows] = b
    scan.g = g if fused else None
    scan.ambient = ambient
    return scan


def _scan_chunk(block, index, offset, domain):
    return _scan_rows(domain, np.asarray(block), None)


def _validate_chunk(block, domain):
    return domain.manifold.validate(block)


def _clip_chunk(block, domain):
    return domain.check(np.asarray(block), clip=True).points


def scan_domain(domain, data, *, clip: bool = False):
    """One pass: validate the records and place them in ``domain``'s ball.

    Parameters
    ----------
    domain : DataDomain
        The public ball ``B_r(m0)``.
    data : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records.
    clip : bool
        Dask only: return the data with outside records moved onto the boundary
        (lazily, chunk by chunk) instead of raising.

    Returns
    -------
    CheckedData or None
        The validated data (NumPy: a new read-only array; Dask: a lazy array) with
        the :class:`CheckSummary`, or None for NumPy data that fail (the caller's own
        check then raises its usual error).

    Raises
    ------
    ValueError, DomainError
        Dask data that fail: the message names the chunk and the row.
    """
    M = domain.manifold
    n = n_rows(data)
    if n == 0:
        raise ValueError("data is empty: nothing to summarize")
    _PASSES[0] += 1
    if not is_dask(data):
        out = np.empty(data.shape)
        scan = _scan_rows(domain, data, out)
        if scan.problem or scan.outside:
            return None
        out.flags.writeable = False  # what was checked cannot change behind our back
        return CheckedData(out, domain, _summary(domain, n, [scan]))

    data = _point_chunks(data, M.point_shape)
    scans = passes._run_pass(data, _scan_chunk, "data check", domain)
    offsets = np.concatenate([[0], np.cumsum(data.chunks[0])[:-1]]).astype(int)
    for i, sc in enumerate(scans):
        if sc.problem is None:
            continue
        where = (
            f"chunk {i}, row {sc.problem_row} of the chunk (row {offsets[i] + sc.problem_row} "
            "overall)"
        )
        if sc.problem == "invalid":
            raise ValueError(f"invalid record at {where}: {sc.problem_message}")
        raise DomainError(
            f"the distance to the center could not be computed at {where}: the point is "
            "too ill-conditioned to place in or out of the ball"
        )
    outside = sum(sc.outside for sc in scans)
    if outside and not clip:
        i = next(i for i, sc in enumerate(scans) if sc.outside)
        r = scans[i].first_outside
        far = max(sc.max_distance for sc in scans)
        raise DomainError(
            f"{outside} of {n} points lie outside the public ball of radius "
            f"{domain.radius:.6g} (farthest at distance {far:.6g}, first at chunk {i}, row "
            f"{r} of the chunk, row {offsets[i] + r} overall). Pass clip=True to move them "
            "onto the boundary (a per-record map that keeps the guarantee), or choose a "
            "larger public radius (below r*) without looking at the data."
        )
    if outside:
        points = data.map_blocks(_clip_chunk, domain, dtype=float)
        return CheckedData(points, domain, _summary(domain, n, scans, clipped=True))
    points = data.map_blocks(_validate_chunk, domain, dtype=float)
    return CheckedData(points, domain, _summary(domain, n, scans), raw=data)


def _summary(domain, n, scans, clipped=False):
    fused = not clipped and all(sc.g is not None for sc in scans)
    return CheckSummary(
        n=n,
        max_distance=min(max(sc.max_distance for sc in scans), domain.radius)
        if clipped
        else max(sc.max_distance for sc in scans),
        center=domain.center,
        center_gradient=np.sum([sc.g for sc in scans], axis=0) / n if fused else None,
        center_energy=float(sum(sc.e for sc in scans)) / n if fused else None,
        mean_ambient=np.sum([sc.ambient for sc in scans], axis=0) / n,
    )


@dataclass(frozen=True, eq=False)
class CheckedData:
    """Records a :class:`~pymc_manidp.stats.DataDomain` accepted: what its ``check`` returns.

    A value, not a note kept elsewhere: the passes of this module,
    :func:`~pymc_manidp.stats.frechet_mean` and :func:`~pymc_manidp.stats.frechet_median`
    trust it (no second validation; the Fréchet mean starts from the public center
    with the gradient the check summed), and ``DataDomain.check`` returns it unchanged
    when asked again with an equal domain, as ``scipy.spatial.transform.Rotation``
    validates its quaternions once and trusts them after. It stands in for its points
    where an array is expected (``len``, ``shape``, indexing, ``np.asarray``).

    Parameters
    ----------
    points : ndarray or dask.array.Array, shape ``(n, *point_shape)``
        The records to use: a read-only NumPy array, or a lazy Dask array that
        validates (or clips) chunk by chunk when read.
    domain : DataDomain
        The domain they were checked against.
    summary : CheckSummary or None
        What the check pass learnt; None when the data took the slow path (some record
        failed the fast scan and was clipped): such data are then used as the plain
        array ``points`` (validated again where used), as before the check.
    raw : dask.array.Array or None
        Dask only: the records ``points`` validates lazily; the passes read them and
        validate block by block.
    """

    points: object
    domain: object
    summary: CheckSummary | None = None
    raw: object = None

    @property
    def trusted(self) -> bool:
        """Whether the passes may skip validating ``points`` (a check pass summarized them)."""
        return self.summary is not None

    @property
    def shape(self) -> tuple:
        """Shape of ``points``."""
        return self.points.shape

    @property
    def ndim(self) -> int:
        """Number of axes of ``points``."""
        return self.points.ndim

    @property
    def dtype(self):
        """Data type of ``points``."""
        return self.points.dtype

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, key):
        return self.points[key]

    def __iter__(self):
        return iter(self.points)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.points, dtype=dtype)

    def __repr__(self) -> str:
        kind = "Dask" if is_dask(self.points) else "NumPy"
        return f"CheckedData({kind} records of shape {self.shape}, {self.domain!r})"


def _points(data):
    """The records of ``data``: its points if it is :class:`CheckedData`, else itself."""
    return data.points if isinstance(data, CheckedData) else data


def _unwrap(data):
    """``(records, raw)``: ``raw`` the Dask records a trusted check validates lazily
    (the pass then reads them and validates block by block), else None."""
    if isinstance(data, CheckedData):
        return data.points, (data.raw if data.trusted else None)
    return data, None


def _same_domain(a, b) -> bool:
    return a is b or (
        a.manifold == b.manifold
        and a.radius == b.radius
        and np.array_equal(a.center, b.center)
        and type(a) is type(b)
    )


def checked_summary(data, domain=None, manifold=None):
    """The :class:`CheckSummary` of ``data`` if it is trusted :class:`CheckedData`.

    With ``domain``: only if it was checked against an equal domain; with
    ``manifold``: only if it was validated on an equal manifold. None otherwise
    (a plain array, or checked data that took the slow path).

    Parameters
    ----------
    data : CheckedData, ndarray or dask.array.Array, shape ``(n, *point_shape)``
        What ``DataDomain.check`` may have returned.
    domain : DataDomain, optional
        The domain it must have been checked against.
    manifold : Manifold, optional
        The manifold it must have been validated on.

    Returns
    -------
    CheckSummary or None
        Its summary, or None.
    """
    if not isinstance(data, CheckedData) or not data.trusted:
        return None
    if domain is not None and not _same_domain(data.domain, domain):
        return None
    if manifold is not None and data.domain.manifold != manifold:
        return None
    return data.summary
