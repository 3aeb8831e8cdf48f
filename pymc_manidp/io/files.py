"""Users' files: data points from ``.npy``/``.csv``, releases to JSON with provenance.

The command line reads data with :func:`read_points`, names the manifold with
:func:`manifold_for` (its size follows from the data's shape), parses the public
center with :func:`parse_center` and writes what may be published with
:func:`release_json`. Every failure is a ``ValueError`` with one line saying what to
fix (a ``TypeError`` for data that are not real numbers). Only regular files are
read: a FIFO or device would block or never end, so it is refused before it is opened.

Layouts (one record per row):

=========  =====================  ========================================
manifold   ``.npy`` shape          ``.csv`` row
=========  =====================  ========================================
sphere     ``(n, D)``              ``D`` coordinates of a unit vector
spd        ``(n, k, k)``           the ``k*k`` entries, row by row
kendall    ``(n, k, 2)``           ``x1, y1, x2, y2, ...`` (``k`` landmarks)
euclidean  ``(n, d)``              ``d`` coordinates
=========  =====================  ========================================
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import re
import stat
from pathlib import Path

import numpy as np

from pymc_manidp._validation import check_real_data
from pymc_manidp.geometry import Origin, manifold_class, manifold_names
from pymc_manidp.privacy.atomic import check_output_target, write_atomic
from pymc_manidp.privacy.release import release_record
from pymc_manidp.stats import reductions

__all__ = [
    "MANIFOLD_NAMES",
    "check_output_target",
    "check_regular_file",
    "manifold_for",
    "parse_center",
    "read_points",
    "release_json",
    "write_atomic",
]

#: the names of the spaces a data file may hold (``--manifold``): every space of
#: :mod:`pymc_manidp.geometry` with a name
MANIFOLD_NAMES = manifold_names()


def check_regular_file(path) -> Path:
    """``path`` as a ``Path`` if it is a non-empty regular file (symlinks followed).

    A FIFO or a device is refused without opening it (reading one blocks or never
    ends), an empty file is refused by name (it holds no records, and NumPy would fail
    with an ``EOFError``).

    Raises
    ------
    ValueError
        Naming the path: not found, not a regular file, or empty.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"data file not found: {path}") from None
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror or err}") from None
    if not stat.S_ISREG(info.st_mode):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, socket or device"
        raise ValueError(f"{path} is {what}, not a regular file: only files are read")
    if info.st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes): it holds no records")
    return path


def read_points(path, *, header=None) -> np.ndarray:
    """Read a numeric array from ``.npy`` or ``.csv`` (``#`` comments, one header row allowed).

    A ``.csv`` file's first record is taken as a header only when it has as many
    fields as the other records and none of them is a number (or with
    ``header=True``; ``header=False`` never skips one). Any other record that does
    not parse, or has a different number of fields than the rest, is an error naming
    its line: a record is never dropped silently (``0.1;0.2;0.97`` above
    comma-separated records is a malformed record, not a header).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy`` file, or a ``.csv`` (or ``.txt``) file of comma-separated numbers,
        one record per line. Only a non-empty regular file is read.
    header : bool, optional
        Whether the ``.csv`` file's first record is a header: ``None`` (the default)
        decides as above, ``True`` always skips the first record, ``False`` never
        does. A ``.npy`` file has no header: ``True`` is refused for one.

    Returns
    -------
    ndarray, shape ``(n, ...)``
        The records as floats: a ``.csv`` file gives ``(n, fields)``, a ``.npy`` file
        its own shape (:func:`manifold_for` reshapes the rows to points).

    Raises
    ------
    ValueError
        An unsupported suffix, a missing, empty or non-regular file, an unreadable
        ``.npy`` file, a malformed ``.csv`` record (named by line and field), or a NaN,
        infinite or float-overflowing value (named by row: no release accepts one, so
        it is refused before any privacy budget is charged).
    TypeError
        Values that are not real numbers (bools, complex numbers, dates, strings).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp(), "d.csv")
    >>> _ = f.write_text("x,y,z\\n0,0,1\\n0,1,0\\n")
    >>> read_points(f).shape
    (2, 3)
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".csv", ".txt"):
        raise ValueError(f"unsupported data file {path}: use .npy or .csv")
    if header is not None and not isinstance(header, bool):
        raise TypeError(f"header must be True, False or None, got {header!r}")
    if header and suffix == ".npy":  # silently ignoring it would hide a mistaken file
        raise ValueError(f"--header applies to CSV files only: {path} is a .npy file")
    check_regular_file(path)
    if suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:  # EOFError: an empty file
            raise ValueError(
                f"cannot read {path} as a NumPy array: {err or 'empty file'}"
            ) from None
        if not isinstance(arr, np.ndarray):  # np.load opens a zip (.npz) whatever its name
            arr.close()
            raise ValueError(
                f"{path} is a .npz archive, not a .npy array: save one array with np.save"
            )
    else:
        arr = _read_csv(path, header)
    check_real_data(arr, str(path))
    with np.errstate(over="ignore"):  # a float128 or huge integer past 1.8e308: inf
        arr = np.asarray(arr, dtype=float)
    _check_finite(arr, path)
    return arr


def _check_finite(arr: np.ndarray, path: Path) -> None:
    """Refuse NaN and infinite values by row, as every release would, but before any
    privacy budget is charged (the file is read before the charge)."""
    finite = np.isfinite(arr)
    if finite.all():
        return
    rows = finite.reshape(len(arr), -1).all(axis=1) if arr.ndim else finite.reshape(1)
    row = int(np.argmin(rows))
    raise ValueError(
        f"{path}: record {row + 1} (row {row}) holds a NaN or infinite value (or one past "
        f"the largest float64, 1.8e308), and {int((~rows).sum())} record(s) in all: no "
        "release accepts them; drop or fix those records"
    )


#: a decimal number as written by any CSV writer; Python's ``float`` would also take
#: ``1_0`` (as 10), other scripts' digits (``١٢``) and ``nan``/``inf``/``infinity``
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _is_number(field: str) -> bool:
    return _NUMBER.fullmatch(field) is not None


def _looks_numeric(field: str) -> bool:
    """Whether Python reads ``field`` as a number: such a field is never a header's (a
    first line ``nan,1_0,inf`` is a record, refused by name, not a header dropped)."""
    try:
        float(field)
    except ValueError:
        return field.lower().startswith(("0x", "-0x", "+0x"))  # hex floats
    return True


def _read_csv(path: Path, header=None) -> np.ndarray:
    try:  # utf-8-sig: a byte order mark (spreadsheets write one) is not part of a field
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"cannot read {path} as UTF-8 text: {err}") from None
    # only \n, \r\n and \r end a line (str.splitlines also splits at \x0c, \x1e, ...)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    records = []  # (line number, fields) of the non-blank, non-comment lines
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if text:
            records.append((number, [f.strip() for f in text.split(",")]))
    if header is None and records:
        # a header has the records' width and no field that is a number; anything
        # else on the first line is a record (a wrong separator is then named below)
        rest = [len(fields) for _, fields in records[1:]]
        width = max(set(rest), key=rest.count) if rest else len(records[0][1])
        first = records[0][1]
        header = len(first) == width and not any(_looks_numeric(f) for f in first)
    if header:
        records = records[1:]
    if not records:
        raise ValueError(f"{path} holds no records")
    widths = [len(fields) for _, fields in records]
    usual = max(set(widths), key=widths.count)
    rows = []
    for (number, fields), width in zip(records, widths, strict=True):
        if width != usual:
            raise ValueError(
                f"{path}, line {number}: {width} fields, but the other records have {usual}"
            )
        for j, field in enumerate(fields, start=1):
            if not _is_number(field):
                raise ValueError(
                    f"{path}, line {number}, field {j}: {field!r} is not a number: every "
                    "record must be plain decimals such as -1.5e-3 (no digit separators, "
                    "hex, nan or inf; only a first line with as many fields as the records "
                    "is a header)"
                )
        rows.append([float(f) for f in fields])
    return np.array(rows, dtype=float)


def manifold_for(name: str, data: np.ndarray, *, layout=None, scalar_first: bool = False):
    """The manifold called ``name`` whose points have the shape of ``data``'s rows.

    The manifold's size follows from the data: each space reads the shape of one
    record (:meth:`~pymc_manidp.geometry.ManifoldBase.from_record_shape`; the layouts
    are each class's ``record_layout``): ``D`` coordinates make ``Sphere(dim=D - 1)``,
    ``k*k`` entries ``SPD(k=k)``, ``2k`` coordinates ``KendallShape(k_landmarks=k)``,
    ``d`` coordinates ``Euclidean(dim=d)``.

    Parameters
    ----------
    name : str
        One of :data:`MANIFOLD_NAMES` (the spaces of :mod:`pymc_manidp.geometry` that have a
        name).
    data : array_like or dask.array.Array, shape ``(n, ...)``
        One record per row: ``(n, D)`` (sphere), ``(n, k, k)`` or ``(n, k*k)``
        (spd), ``(n, k, 2)`` or ``(n, 2k)`` (kendall, ``k >= 3``), ``(n, d)``
        (euclidean). A Dask array stays lazy.
    layout : str, optional
        Another layout of the records, one of the space's ``layouts``:
        ``"quaternion"`` (rotations, ``(n, 4)``), ``"poincare"`` (hyperbolic,
        ``(n, d)`` Poincaré-ball points read as ``H^d``); converted to points (data in
        memory only).
    scalar_first : bool
        With ``layout="quaternion"``: ``(w, x, y, z)`` instead of SciPy's ``(x, y, z, w)``.

    Returns
    -------
    manifold : Manifold
        The manifold of that name and size.
    points : ndarray or dask.array.Array, shape ``(n, *manifold.point_shape)``
        ``data`` reshaped to points (floats; not checked to lie on the manifold).

    Raises
    ------
    ValueError
        An unknown ``name``, no records, or a shape that does not fit the manifold
        (the message gives the shapes accepted).

    Examples
    --------
    >>> M, x = manifold_for("kendall", np.zeros((5, 8)))
    >>> M.k_landmarks, x.shape
    (4, (5, 4, 2))
    """
    cls = manifold_class(name)
    if scalar_first and layout != "quaternion":
        raise ValueError("--scalar-first is for --layout quaternion: add it, or drop the option")
    if layout is not None:
        if reductions.is_dask(data):
            raise ValueError(
                f"--layout {layout} reads a .npy/.csv file in memory: convert sharded data "
                "to the space's own layout first"
            )
        if layout not in cls.layouts:
            known = ", ".join(cls.layouts) or "none besides its own"
            raise ValueError(
                f"{name} data have no layout {layout!r} (other layouts: {known}); records "
                f"are laid out as {cls.record_layout}"
            )
        data = np.asarray(data, dtype=float)
        if data.ndim < 2 or data.shape[0] == 0:
            raise ValueError(f"data must hold one record per row, got shape {data.shape}")
        return cls.from_layout(layout, data, scalar_first=scalar_first)
    if not reductions.is_dask(data):  # a Dask array (pymc_manidp.io) stays lazy
        data = np.asarray(data, dtype=float)
    elif data.ndim >= 1:
        reductions.n_rows(data)  # unknown chunk sizes: a message saying what to do
    if data.ndim < 2 or data.shape[0] == 0:
        raise ValueError(f"data must hold one record per row, got shape {data.shape}")
    manifold = cls.from_record_shape(tuple(data.shape[1:]))
    return manifold, data.reshape(data.shape[0], *manifold.point_shape)


def parse_center(text: str, manifold) -> np.ndarray:
    """The public center from ``"x1,x2,..."``, ``"identity"`` (SPD) or a ``.npy``/``.csv`` file.

    Parameters
    ----------
    text : str
        Comma- (or semicolon-) separated coordinates of the point, entries of a matrix
        row by row; ``"identity"`` (also ``"i"``, ``"eye"``) for the manifold's
        origin (the identity matrix on SPD, ``0`` on Euclidean); or the path of a
        ``.npy``/``.csv``/``.txt`` file holding the numbers (read by
        :func:`read_points`).
    manifold : Manifold
        The manifold the center lies on: it fixes how many numbers are expected.

    Returns
    -------
    ndarray, shape ``manifold.point_shape``
        The center as floats (not checked to lie on the manifold: the mechanism
        checks it).

    Raises
    ------
    ValueError
        Text that is not numbers, ``"identity"`` on a manifold without an origin, or
        a number of values other than the size of a point.

    Examples
    --------
    >>> from pymc_manidp.geometry import SPD, Sphere
    >>> parse_center("0, 0, 1", Sphere(dim=2)).tolist()
    [0.0, 0.0, 1.0]
    >>> parse_center("identity", SPD(k=2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    shape = manifold.point_shape
    text = str(text).strip()
    if text.lower() in ("identity", "i", "eye"):
        if not isinstance(manifold, Origin):  # the space's own origin (SPD: the identity matrix)
            raise ValueError(
                f"center 'identity' needs a manifold with an origin (spd and rotations: I, "
                f"euclidean: 0, hyperbolic: (1, 0, ..., 0)); {manifold} has none: give "
                "the coordinates"
            )
        return np.array(manifold.origin, dtype=float)
    if text.lower().endswith((".npy", ".csv", ".txt")):
        values = read_points(text)
    else:
        fields = [v.strip() for v in text.replace(";", ",").split(",")]
        if all(_is_number(v) for v in fields):  # float() would read "1_0" as 10
            values = np.array([float(v) for v in fields])
        else:
            raise ValueError(
                "center must be comma-separated numbers, 'identity' (the space's origin) or "
                f"a .npy/.csv file, got {text!r}"
            )
    if values.size != math.prod(shape):
        raise ValueError(
            f"center must have {math.prod(shape)} numbers for {manifold} (a point of shape "
            f"{shape}), got {values.size}"
        )
    return values.reshape(shape)


def release_json(release, *, manifold_name, manifold, center, radius, options, source) -> dict:
    """What may be published about a release: its public record plus provenance.

    The random seed is never written (with the seed and the public parameters, anyone
    could test guesses about the data); nor are the MCMC run or the rejection
    statistics, which depend on the data.

    Parameters
    ----------
    release : Release
        The release (:class:`~pymc_manidp.privacy.Release`); only its
        :meth:`~pymc_manidp.privacy.Release.public` record is written.
    manifold_name : str
        The manifold's name on the command line (one of :data:`MANIFOLD_NAMES`).
    manifold : Manifold
        The manifold released on (its ``repr`` and ``dim`` are written).
    center : array_like, shape ``manifold.point_shape``
        The public ball's center.
    radius : float
        The public ball's radius.
    options : dict
        The mechanism's options worth publishing (JSON-serializable, e.g.
        ``{"restrict": False, "clip": False}``).
    source : str
        What the data were read from (a file name, not its contents).

    Returns
    -------
    dict
        JSON-serializable: the sealed public record of
        :meth:`~pymc_manidp.privacy.Release.to_json` (``"format"``, ``"version"``,
        ``"release"``, ``"value_shape"``, ``"checksum"``, so
        :meth:`~pymc_manidp.privacy.Release.from_json` reads the file back), with keys
        ``"release"`` (the public record),
        ``"manifold"`` (``name``, ``spec``, ``dim``), ``"public_ball"``
        (``center`` as nested lists, ``radius``), ``"options"`` and
        ``"provenance"`` (UTC creation time, ``source``, the versions of the
        software, Python's version).
    """
    from importlib import metadata

    versions = {}
    for pkg in ("pymc-manidp", "numpy", "scipy", "pymc", "pytensor"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:  # pragma: no cover - editable oddities
            versions[pkg] = None
    # one format for the CLI's file and Release.to_json: these keys are sealed with it
    return release_record(
        release,
        public=True,
        extra={
            "manifold": {"name": manifold_name, "spec": repr(manifold), "dim": manifold.dim},
            "public_ball": {
                "center": np.asarray(center, float).tolist(),
                "radius": float(radius),
            },
            "options": options,
            "provenance": {
                "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "source": source,
                "software": versions,
                "python": platform.python_version(),
            },
        },
    )
