"""The Release record: a private value and how it was made.

Privacy claims are data (as OpenDP's measurements carry their privacy map): a Release
states the mechanism, ``epsilon``, ``delta`` and what ``delta`` means for its sampler.
The MCMC run (``diagnostics``) depends on the data: it is for the curator, never for
publication; :meth:`Release.public` returns only what may be published.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field

import numpy as np

from pymc_manidp.privacy.atomic import check_output_target, read_regular_bytes, write_atomic
from pymc_manidp.privacy.budget import checksum

__all__ = [
    "DIAGNOSTICS_NOT_SAVED",
    "EXACT_NOTE",
    "FLOATING_POINT_NOTE",
    "MCMC_DELTA_ESTIMATED_NOTE",
    "MCMC_DELTA_NOTE",
    "OPT_OUTS",
    "RELEASE_FORMAT",
    "RELEASE_VERSION",
    "Calibration",
    "FailedRelease",
    "Release",
    "ReleaseFileError",
    "Releases",
    "build_release",
    "release_record",
]

#: the ``"format"`` and ``"version"`` of a release file (``Release.to_json``, the CLI's
#: ``release --out``): a file without them is refused by ``Release.from_json``
RELEASE_FORMAT = "pymc-manidp release"
RELEASE_VERSION = 1
#: what a curator's file says of the MCMC run: the chains are not written into JSON
DIAGNOSTICS_NOT_SAVED = (
    "not saved in this file: write the run with release.diagnostics.to_zarr(path) and "
    "read it with xarray.open_datatree(path, engine='zarr')"
)

MCMC_DELTA_NOTE = (
    "approximate DP: if the sampled law is within total variation gamma of the "
    "mechanism's law, the release is (epsilon, (1 + e^epsilon) * gamma)-DP; gamma is "
    "not bounded by any computation here, only supported by the convergence diagnostics"
)
MCMC_DELTA_ESTIMATED_NOTE = (
    "approximate DP: if the sampled law is within total variation gamma of the "
    "mechanism's law, the release is (epsilon, (1 + e^epsilon) * gamma)-DP; the value is "
    "a chain's state after a fixed number of steps of a fixed kernel, for which gamma was "
    "estimated by L-lag couplings (an estimate of an upper bound, with its standard "
    "error, measured on these data and kept by the curator): evidence, not a proof, so "
    "delta is not stated"
)
EXACT_NOTE = (
    "pure epsilon-DP (delta = 0): drawn exactly from the mechanism's law (closed-form "
    "noise or rejection sampling), without MCMC"
)
FLOATING_POINT_NOTE = (
    "sampled in floating point: not hardened against least-significant-bit attacks"
)
#: The names ``Release.opt_outs`` may hold: the per-record maps and skipped checks a
#: caller chose (``"median_floor_measured"``: ``KNGMechanism(median_floor="measured")``,
#: the median's measured, not proved, acceptance floor).
OPT_OUTS = ("clip", "project", "skip_diagnostics", "median_floor_measured")
_EXACT_NOTES = (FLOATING_POINT_NOTE, EXACT_NOTE)
_MCMC_NOTES = (MCMC_DELTA_NOTE, FLOATING_POINT_NOTE)
_ESTIMATED_NOTES = (MCMC_DELTA_ESTIMATED_NOTE, FLOATING_POINT_NOTE)


@dataclass(frozen=True)
class Calibration:
    """The privacy map of one release: ``n``, the sensitivity Δ and the scale σ.

    A mechanism computes it once per release (``Mechanism.calibrate(n)``), draws
    with its ``sigma`` and records it in the :class:`Release`. All three are public:
    they depend on ``n``, the public ball and ε, never on the records.

    Attributes
    ----------
    n : int
        Number of records.
    sensitivity : float
        Δ: how far one record can move the mechanism's statistic.
    sigma : float
        σ, the scale of the mechanism's density (``2Δ/ε`` or ``Δ/ε``).

    Examples
    --------
    >>> Calibration(n=10, sensitivity=0.05, sigma=0.1)
    Calibration(n=10, sensitivity=0.05, sigma=0.1)
    """

    n: int
    sensitivity: float
    sigma: float


@dataclass(frozen=True)
class Release:
    """A differentially private value with its provenance.

    Attributes
    ----------
    value : ndarray
        The released point (shape ``point_shape``), a read-only copy.
    epsilon : float
    delta : float or None
        0 for exact samplers; ``None`` for MCMC, where it is not known (see
        ``delta_note``).
    mechanism : str
        The mechanism's name.
    sigma : float
        σ, the scale of the mechanism's density.
    sensitivity : float
        Δ, the sensitivity σ was calibrated to.
    n : int
        Number of records.
    sampler : str
    seed_policy : str
        ``"fixed seed"`` (reproducible, for tests) or ``"OS entropy"``.
    diagnostics : DataTree or None
        The MCMC run, for the curator only.
    opt_outs : tuple of str
        Names of the checks the caller chose to skip or the per-record maps it chose
        (``"clip"``, ``"project"``, ``"skip_diagnostics"``, ``"median_floor_measured"``;
        ``OPT_OUTS``), recorded for the audit
        trail. Only the names: what the skipped check found, or how far records moved,
        depends on the data (it is in ``sampler_info``).
    notes : tuple of str
    sampler_info : dict or None
        Exact samplers' rejection statistics (proposals, acceptance rates), or the
        MCMC checks that failed under ``skip_diagnostics``; with ``project=True``,
        ``"projection"``: how many records moved and the largest distance moved. They
        depend on the data: for the curator only, like ``diagnostics``.
    delta_estimate : dict or None
        MCMC releases made with ``estimate_delta=True``: the L-lag coupling
        **estimate** δ̂ (``privacy.coupling.coupled_release``), with its standard
        error. An estimate, not a proof, and computed from the data: for the curator
        only; ``delta`` stays ``None`` and :meth:`public` leaves it out.
    restricted : bool or None
        Whether the mechanism's law lives on the public ball only (KNG, the Laplace
        with ``restrict=True``); ``None`` when the record's maker did not say. Public:
        the likelihood of the value depends on it (issue 28).
    center : ndarray or None
        The public ball's center ``m0`` (shape ``point_shape``), a read-only copy.
    radius : float or None
        The public ball's radius ``r``.
    manifold : str or None
        The manifold released on, as its ``repr`` (e.g. ``"Sphere(dim=2, radius=1.0)"``).
    tangent : dict or None
        Tangent mechanisms (issue 39; ``pymc_manidp.mechanisms.tangent``): the public
        ``"point"`` p (shape ``point_shape``), the released ``"coords"`` u (shape
        ``(dim,)``) in the frame ``manifold.tangent_basis(p)``, the ``"noise"``
        (``"gaussian"`` or ``"k-norm"``) and ``"mu"`` (μ-GDP of a Gaussian release,
        ``Delta/sigma``; None for K-norm). ``value`` is ``Exp_p(u)``; the likelihood of
        a release is that of u (``Exp_p`` wraps on curved spaces). Public.
    """

    value: np.ndarray
    epsilon: float
    delta: float | None
    mechanism: str
    sigma: float
    sensitivity: float
    n: int
    sampler: str
    seed_policy: str
    diagnostics: object = None
    opt_outs: tuple = ()
    notes: tuple = field(default_factory=tuple)
    sampler_info: dict | None = None
    # issue 17: curator-side estimate of delta; never published (public() lists its keys)
    delta_estimate: dict | None = None
    # issue 28: what a reader needs to write the value's likelihood (all public)
    restricted: bool | None = None
    center: np.ndarray | None = None
    radius: float | None = None
    manifold: str | None = None
    # issue 39: a tangent mechanism's public coordinates (u, p, the noise, mu)
    tangent: dict | None = None

    def __post_init__(self):
        # the record is immutable: a read-only copy, so neither the caller's array nor
        # ``rel.value[0] = ...`` can change what public() reports after the release
        value = np.array(self.value, dtype=float, copy=True)
        value.flags.writeable = False
        object.__setattr__(self, "value", value)
        if self.center is not None:
            center = np.array(self.center, dtype=float, copy=True)
            center.flags.writeable = False
            object.__setattr__(self, "center", center)
        if self.tangent is not None:  # read-only copies, as the value
            tangent = dict(self.tangent)
            for key in ("point", "coords"):
                arr = np.array(tangent[key], dtype=float, copy=True)
                arr.flags.writeable = False
                tangent[key] = arr
            object.__setattr__(self, "tangent", tangent)

    @property
    def calibration(self) -> Calibration:
        """``n``, Δ and σ as the :class:`Calibration` the release was drawn with."""
        return Calibration(n=self.n, sensitivity=self.sensitivity, sigma=self.sigma)

    def public(self) -> dict:
        """What may be published: the value and its provenance, no data-dependent run.

        Besides the value, ε, δ, Δ, σ, ``n`` and how it was drawn, the record says
        what the likelihood of the value needs (:func:`~pymc_manidp.laws.noise_aware_model`):
        ``"manifold"`` (its ``repr``), ``"restricted"`` (whether the law lives on the
        public ball only) and ``"public_ball"`` (``center`` as nested lists,
        ``radius``; both public by the privacy rules). Each is ``None`` when unknown.
        JSON-serializable.
        """
        ball = None
        if self.center is not None and self.radius is not None:
            ball = {"center": np.asarray(self.center).tolist(), "radius": float(self.radius)}
        out = {
            "value": np.asarray(self.value).tolist(),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mechanism": self.mechanism,
            "sigma": self.sigma,
            "sensitivity": self.sensitivity,
            "n": self.n,
            "sampler": self.sampler,
            "seed_policy": self.seed_policy,
            "opt_outs": list(self.opt_outs),
            "notes": list(self.notes),
            "manifold": self.manifold,
            "restricted": self.restricted,
            "public_ball": ball,
        }
        if self.tangent is not None:  # only tangent releases carry the key
            t = self.tangent
            out["tangent"] = {
                "point": np.asarray(t["point"]).tolist(),
                "coords": np.asarray(t["coords"]).tolist(),
                "noise": t["noise"],
                "mu": None if t["mu"] is None else float(t["mu"]),
            }
        return out

    def to_json(self, path, *, public: bool = False) -> None:
        """Save the release to ``path`` as a sealed JSON record (the curator's by default).

        The file is the command line's release format (``pymc-manidp release --out``):
        ``"format"``, ``"version"``, the :meth:`public` record, the value's shape and
        a SHA-256 ``"checksum"`` over the rest (as the privacy ledger's seal: it
        catches edits and damage, not a forger). Floats are written by ``repr``, so
        :meth:`from_json` gives back exactly the same numbers (``-0.0`` and
        subnormals included).

        With ``public=False`` (the curator's record) a ``"curator"`` section adds
        ``sampler_info`` and ``delta_estimate``, which depend on the data: never
        publish that file. The MCMC run (``diagnostics``) is **not** written: save it
        beside the file with ``release.diagnostics.to_zarr(path)``; the record says
        so (``DIAGNOSTICS_NOT_SAVED``) and a reloaded release has
        ``diagnostics=None``.

        The file is written whole or not at all (a temporary file in the same folder,
        renamed over ``path``).

        Parameters
        ----------
        path : str or os.PathLike
            A new path or an existing regular file (replaced).
        public : bool
            ``True``: only what may be published (:meth:`public`).

        Raises
        ------
        ValueError
            ``path`` is a symbolic link, a folder, a FIFO or a device, or the release
            holds a value JSON cannot state exactly (NaN, infinity, an object).

        Examples
        --------
        >>> import os, tempfile
        >>> cal = Calibration(n=10, sensitivity=0.05, sigma=0.1)
        >>> rel = build_release(value=[0.0, 1 / 3], mechanism="KNG", epsilon=1.0,
        ...                     calibration=cal, sampler="exact", seed_policy="OS entropy",
        ...                     exact=True, sampler_info={"proposals": 3})
        >>> path = os.path.join(tempfile.mkdtemp(), "release.json")
        >>> rel.to_json(path)
        >>> back = Release.from_json(path)
        >>> back.value[1] == 1 / 3, back.sampler_info
        (np.True_, {'proposals': 3})
        >>> rel.to_json(path, public=True)
        >>> Release.from_json(path).sampler_info is None
        True
        """
        if not isinstance(public, bool):
            raise TypeError(f"public must be True or False, got {public!r}")
        check_output_target(path)
        text = json.dumps(release_record(self, public=public), indent=1, allow_nan=False)
        write_atomic(path, text + "\n")

    @classmethod
    def from_json(cls, path) -> Release:
        """The release saved in ``path`` (by :meth:`to_json` or ``pymc-manidp release``).

        Parameters
        ----------
        path : str or os.PathLike
            A regular file holding a release record.

        Returns
        -------
        Release
            With the saved fields; ``diagnostics`` is None (never saved in the file),
            ``sampler_info`` and ``delta_estimate`` too when the file is a public record.

        Raises
        ------
        ReleaseFileError
            (a ``ValueError``) naming the path and what is wrong: not a regular file,
            not UTF-8 JSON, another format or version, a checksum that does not match
            (edited or damaged), or a field of the wrong type.
        """
        try:
            text = read_regular_bytes(path).decode("utf-8")
        except UnicodeDecodeError as err:
            raise ReleaseFileError(
                f"{path} is not UTF-8 text ({err.reason} at byte {err.start}): not a release record"
            ) from None
        except ValueError as err:
            raise ReleaseFileError(str(err)) from None
        try:
            doc = json.loads(
                text, parse_constant=_refuse_constant, object_pairs_hook=_no_duplicates
            )
        except RecursionError:
            raise ReleaseFileError(f"{path}: nested too deeply to be a release record") from None
        except ValueError as err:  # JSONDecodeError, NaN, duplicate keys, huge integers
            raise ReleaseFileError(
                f"{path} is not a release record (not plain JSON: {err})"
            ) from None
        try:
            return _from_record(doc)
        except ReleaseFileError as err:
            raise ReleaseFileError(f"{path}: {err}") from None

    def to_xarray(self, *, public: bool = True):
        """The release as an xarray ``DataTree``, for ArviZ's plots and xarray's writers.

        The root holds the value (``value``, dims ``point_0, point_1, ...``) with the
        public record as attributes (numbers and strings as they are, the rest as
        JSON). With ``public=False`` the MCMC run's groups (``posterior``,
        ``sample_stats``, ...) are children of the root when the release has
        ``diagnostics``, so ``arviz_plots.plot_trace_dist(tree)`` works on it: they
        depend on the data, for the curator only.

        Parameters
        ----------
        public : bool
            ``True`` (default): only what may be published.

        Returns
        -------
        xarray.DataTree

        Examples
        --------
        >>> cal = Calibration(n=10, sensitivity=0.05, sigma=0.1)
        >>> rel = build_release(value=[0.0, 1.0], mechanism="KNG", epsilon=1.0,
        ...                     calibration=cal, sampler="exact", seed_policy="OS entropy",
        ...                     exact=True)
        >>> tree = rel.to_xarray()
        >>> tree["value"].values.tolist(), tree.attrs["epsilon"]
        ([0.0, 1.0], 1.0)
        """
        import xarray as xr

        if not isinstance(public, bool):
            raise TypeError(f"public must be True or False, got {public!r}")
        attrs = {}
        for key, val in self.public().items():
            if key == "value":
                continue
            if isinstance(val, (str, int, float)) and not isinstance(val, bool):
                attrs[key] = val
            else:  # None, bools, lists and the ball: netCDF attributes cannot hold them
                attrs[key] = json.dumps(val)
        dims = [f"point_{i}" for i in range(self.value.ndim)]
        root = xr.Dataset({"value": (dims, np.array(self.value))}, attrs=attrs)
        if public or self.diagnostics is None:
            return xr.DataTree(root)
        # every group of the run, nested ones too, under the release's root
        groups = {node.path: node.to_dataset(inherit=False) for node in self.diagnostics.subtree}
        return xr.DataTree.from_dict({**groups, "/": root})


def build_release(
    *,
    value,
    mechanism: str,
    epsilon: float,
    calibration: Calibration,
    sampler: str,
    seed_policy: str,
    exact: bool,
    diagnostics=None,
    opt_outs: tuple = (),
    sampler_info: dict | None = None,
    delta_estimate: dict | None = None,
    extra_notes: tuple = (),
    restricted: bool | None = None,
    domain=None,
    tangent: dict | None = None,
    proved_delta: float | None = None,
    privacy_note: str | None = None,
) -> Release:
    """The one place a :class:`Release` is made: ``delta`` and the notes follow
    from whether the sampler is exact (``delta = 0``) or MCMC (``delta = None``),
    except for an exact draw whose law is (ε, δ)-DP with a proved ``proved_delta``
    (the tangent Gaussian), which says so in ``privacy_note`` in place of the pure-ε
    note; ``tangent`` is a tangent mechanism's published chart (point, coordinates);
    ``extra_notes`` come first (e.g. a baseline's own caveats). ``n``, Δ and σ come
    from the release's ``calibration``; the manifold and the public ball from
    ``domain`` (a ``DataDomain``), and ``restricted`` says whether the law lives on
    that ball only.

    Examples
    --------
    >>> cal = Calibration(n=10, sensitivity=0.05, sigma=0.1)
    >>> r = build_release(value=[0.0, 1.0], mechanism="KNG", epsilon=1.0, calibration=cal,
    ...                   sampler="exact", seed_policy="OS entropy", exact=True)
    >>> r.delta, r.public()["opt_outs"], r.calibration == cal
    (0.0, [], True)
    """
    if not isinstance(calibration, Calibration):
        raise TypeError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    for name in opt_outs:
        if name not in OPT_OUTS:  # names only: never data-dependent text
            raise ValueError(f"unknown opt-out {name!r}")
    notes = (*extra_notes, *_notes(exact, delta_estimate))
    if privacy_note is not None:
        notes = tuple(privacy_note if note == EXACT_NOTE else note for note in notes)
    delta = (0.0 if proved_delta is None else float(proved_delta)) if exact else None
    return Release(
        value=np.asarray(value),
        epsilon=float(epsilon),
        delta=delta,
        mechanism=mechanism,
        sigma=float(calibration.sigma),
        sensitivity=float(calibration.sensitivity),
        n=int(calibration.n),
        sampler=sampler,
        seed_policy=seed_policy,
        diagnostics=diagnostics,
        opt_outs=tuple(opt_outs),
        notes=notes,
        sampler_info=sampler_info,
        delta_estimate=delta_estimate,
        restricted=None if restricted is None else bool(restricted),
        center=None if domain is None else domain.center,
        radius=None if domain is None else float(domain.radius),
        manifold=None if domain is None else repr(domain.manifold),
        tangent=tangent,
    )


class ReleaseFileError(ValueError):
    """A file that is not a release record this version reads, or was changed since."""


def _plain(x):
    """NumPy scalars as Python numbers (``public()`` passes fields through as given)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _encode(x):
    """Curator values as JSON, exactly: arrays by dtype, shape and bytes; tagged objects."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        if arr.dtype.kind not in "biufc":
            raise ValueError(f"an array of dtype {arr.dtype} cannot be saved")
        data = base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode("ascii")
        tag = "__ndarray__" if isinstance(x, np.ndarray) else "__numpy__"
        return {tag: {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": data}}
    if isinstance(x, (list, tuple)):
        items = [_encode(v) for v in x]
        return items if isinstance(x, list) else {"__tuple__": items}
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise ValueError("a dict with keys that are not strings cannot be saved")
        body = {k: _encode(v) for k, v in x.items()}
        return {"__dict__": body} if any(k.startswith("__") for k in x) else body
    raise ValueError(f"a {type(x).__name__} cannot be saved in a release record")


def _decode(x, where="curator"):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [_decode(v, where) for v in x]
    if not isinstance(x, dict):
        raise ReleaseFileError(f"{where}: unexpected {type(x).__name__}")
    if len(x) == 1:
        ((tag, body),) = x.items()
        if tag == "__float__":
            if body not in ("nan", "inf", "-inf"):
                raise ReleaseFileError(f"{where}: {body!r} is not nan, inf or -inf")
            return float(body)
        if tag == "__tuple__" and isinstance(body, list):
            return tuple(_decode(v, where) for v in body)
        if tag == "__dict__" and isinstance(body, dict):
            return {k: _decode(v, where) for k, v in body.items()}
        if tag in ("__ndarray__", "__numpy__"):
            return _decode_array(body, tag, where)
    return {k: _decode(v, where) for k, v in x.items()}


def _decode_array(body, tag, where):
    try:
        dtype = np.dtype(body["dtype"])
        shape = tuple(body["shape"])
        if dtype.kind not in "biufc" or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
        ):
            raise ValueError(f"dtype {dtype} or shape {shape}")
        raw = base64.b64decode(body["data"].encode("ascii"), validate=True)
        if len(raw) != dtype.itemsize * math.prod(shape):
            raise ValueError("the data do not fill the shape")
        arr = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ReleaseFileError(f"{where}: not a saved array ({err})") from None
    return arr if tag == "__ndarray__" else arr[()]


def release_record(release, *, public: bool = True, extra: dict | None = None) -> dict:
    """The sealed JSON document of ``release`` (what :meth:`Release.to_json` writes).

    ``extra`` adds keys beside the record (the command line's manifold, options and
    provenance); the checksum covers them too.
    """
    doc = {
        "format": RELEASE_FORMAT,
        "version": RELEASE_VERSION,
        "release": _plain(release.public()),
        "value_shape": list(np.shape(release.value)),
    }
    try:
        if not public:
            doc["curator"] = {
                "note": "depends on the data: for the curator only, never publish this file",
                "sampler_info": _encode(release.sampler_info),
                "delta_estimate": _encode(release.delta_estimate),
                "diagnostics": None if release.diagnostics is None else DIAGNOSTICS_NOT_SAVED,
            }
        for key, val in (extra or {}).items():
            if key in doc or key == "checksum":
                raise ValueError(f"extra key {key!r} is one of the record's own")
            doc[key] = val
        doc["checksum"] = checksum(doc)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"this release cannot be saved as a JSON record ({err}): its fields must be "
            "finite numbers, strings, lists and dicts"
        ) from None
    return doc


def _refuse_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):  # two values for one field: which one was meant?
        raise ValueError(f"a key appears twice in one object: {sorted(keys)}")
    return dict(pairs)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_FIELDS = {  # field: (check, what it must be)
    "epsilon": (_is_number, "a number"),
    "delta": (lambda x: x is None or _is_number(x), "a number or null"),
    "mechanism": (lambda x: isinstance(x, str), "a string"),
    "sigma": (_is_number, "a number"),
    "sensitivity": (_is_number, "a number"),
    "n": (lambda x: isinstance(x, int) and not isinstance(x, bool), "an integer"),
    "sampler": (lambda x: isinstance(x, str), "a string"),
    "seed_policy": (lambda x: isinstance(x, str), "a string"),
    "opt_outs": (
        lambda x: isinstance(x, list) and all(v in OPT_OUTS for v in x),
        "a list of " + ", ".join(map(repr, OPT_OUTS)),
    ),
    "notes": (
        lambda x: isinstance(x, list) and all(isinstance(v, str) for v in x),
        "a list of strings",
    ),
    "manifold": (lambda x: x is None or isinstance(x, str), "a string or null"),
    "restricted": (lambda x: x is None or isinstance(x, bool), "true, false or null"),
}


def _array(x, shape, what):
    """Nested lists of numbers (no bools, no strings) as float64 of ``shape``."""

    def numbers(v):
        if isinstance(v, list):
            return all(numbers(u) for u in v)
        return _is_number(v)

    if not numbers(x):
        raise ReleaseFileError(f"'{what}' must be nested lists of numbers")
    try:
        arr = np.array(x, dtype=float)
    except (ValueError, OverflowError) as err:  # ragged lists, an integer past 1.8e308
        raise ReleaseFileError(f"'{what}' is not an array of floats ({err})") from None
    if shape is not None and arr.size == 0 == math.prod(shape):
        arr = arr.reshape(shape)  # [] is every empty shape: the record says which
    if shape is not None and arr.shape != shape:
        raise ReleaseFileError(f"'{what}' has shape {arr.shape}, the record says {shape}")
    if not np.isfinite(arr).all():
        raise ReleaseFileError(f"'{what}' holds a number past the largest float")
    return arr


def _from_record(doc) -> Release:
    if not isinstance(doc, dict) or doc.get("format") != RELEASE_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ReleaseFileError(
            f"not a {RELEASE_FORMAT} record (its 'format' is {got!r}, not {RELEASE_FORMAT!r})"
        )
    if doc.get("version") != RELEASE_VERSION:
        raise ReleaseFileError(
            f"release record version {doc.get('version')!r}: this version of pymc-manidp "
            f"reads version {RELEASE_VERSION}"
        )
    try:
        expected = checksum(doc)
    except (TypeError, ValueError) as err:
        raise ReleaseFileError(f"not plain JSON: {err}") from None
    if doc.get("checksum") != expected:
        raise ReleaseFileError(
            "the checksum does not match the content: the file was edited or damaged "
            "after it was written; use the original"
        )
    rec = doc.get("release")
    if not isinstance(rec, dict):
        raise ReleaseFileError("'release' must be an object holding the record")
    fields = {}
    for name, (ok, what) in _FIELDS.items():
        if name not in rec:
            raise ReleaseFileError(f"the record has no field {name!r}")
        if not ok(rec[name]):
            raise ReleaseFileError(f"field {name!r} must be {what}, got {rec[name]!r:.80}")
        fields[name] = rec[name]
    shape = doc.get("value_shape")
    if not (isinstance(shape, list) and all(_FIELDS["n"][0](s) and s >= 0 for s in shape)):
        raise ReleaseFileError("'value_shape' must be a list of non-negative integers")
    if "value" not in rec:
        raise ReleaseFileError("the record has no field 'value'")
    value = _array(rec["value"], tuple(shape), "value")
    ball = rec.get("public_ball")
    center = radius = None
    if ball is not None:
        if not isinstance(ball, dict) or set(ball) != {"center", "radius"}:
            raise ReleaseFileError("'public_ball' must be null or {'center': ..., 'radius': ...}")
        if not _is_number(ball["radius"]):
            raise ReleaseFileError(
                f"the ball's radius must be a number, got {ball['radius']!r:.80}"
            )
        center, radius = _array(ball["center"], None, "public_ball.center"), ball["radius"]
        if center.size == 0 == value.size:
            center = center.reshape(value.shape)
    curator = doc.get("curator")
    extra = {}
    if rec.get("tangent") is not None:
        extra["tangent"] = _tangent_field(rec["tangent"])
    if curator is not None:
        if not isinstance(curator, dict):
            raise ReleaseFileError("'curator' must be an object")
        for name in ("sampler_info", "delta_estimate"):
            val = _decode(curator.get(name), f"curator.{name}")
            if val is not None and not isinstance(val, dict):
                raise ReleaseFileError(f"curator.{name} must be an object or null")
            extra[name] = val
    return Release(
        value=value,
        opt_outs=tuple(fields.pop("opt_outs")),
        notes=tuple(fields.pop("notes")),
        center=center,
        radius=radius,
        diagnostics=None,
        **fields,
        **extra,
    )


def _tangent_field(t) -> dict:
    """A tangent release's saved ``"tangent"`` object, checked field by field."""
    if not isinstance(t, dict) or set(t) != {"point", "coords", "noise", "mu"}:
        raise ReleaseFileError(
            "'tangent' must be null or {'point': ..., 'coords': ..., 'noise': ..., 'mu': ...}"
        )
    if t["noise"] not in ("gaussian", "k-norm"):
        raise ReleaseFileError(
            f"tangent.noise must be 'gaussian' or 'k-norm', got {t['noise']!r:.80}"
        )
    if not (t["mu"] is None or (_is_number(t["mu"]) and t["mu"] > 0)):
        raise ReleaseFileError(f"tangent.mu must be a number > 0 or null, got {t['mu']!r:.80}")
    coords = _array(t["coords"], None, "tangent.coords")
    if coords.ndim != 1:
        raise ReleaseFileError(f"tangent.coords must be a flat list, got shape {coords.shape}")
    return {
        "point": _array(t["point"], None, "tangent.point"),
        "coords": coords,
        "noise": t["noise"],
        "mu": t["mu"],
    }


def _notes(exact, delta_estimate):
    """The sampler's notes: exact; MCMC with gamma estimated (``estimate_delta=True``:
    say what was estimated, not a number, which depends on the data); MCMC alone."""
    if exact:
        return _EXACT_NOTES
    return _MCMC_NOTES if delta_estimate is None else _ESTIMATED_NOTES


@dataclass(frozen=True)
class FailedRelease:
    """The record of one data set of a ``release_many`` call whose release failed.

    A data set that fails after the data were read (outside the public ball without
    ``clip``, a sampler that gave up, ...) gets this record in place of a
    :class:`Release`; the other data sets of the call are released as usual. Its
    charge to a privacy budget, if any, stands (marked failed in the ledger): whether
    a release fails can depend on the data.

    Parameters
    ----------
    index : int
        The data set's position in the call.
    n : int
        Its number of records (public).
    error : str
        The exception's type name, e.g. ``"DomainError"`` (what the ledger keeps).
    reason : str
        The exception's message, for the curator: it may quote the data (a row
        number), so it is not part of :meth:`public`.

    Examples
    --------
    >>> f = FailedRelease(index=2, n=10, error="DomainError", reason="row 3 is outside")
    >>> f.public()
    {'index': 2, 'n': 10, 'status': 'failed', 'error': 'DomainError'}
    """

    index: int
    n: int
    error: str
    reason: str
    status: str = field(default="failed", init=False)

    @classmethod
    def of(cls, index: int, n: int, err: BaseException) -> FailedRelease:
        """The record of data set ``index`` whose release raised ``err``."""
        return cls(index=int(index), n=int(n), error=type(err).__name__, reason=str(err))

    def public(self) -> dict:
        """What the ledger keeps of the failure: no message (it may quote the data).

        Whether a data set failed can itself depend on the data: publishing this
        record is the curator's decision, as it is for a failed :meth:`Release`.
        """
        return {"index": self.index, "n": self.n, "status": "failed", "error": self.error}


class Releases(tuple):
    """The records of one ``Mechanism.release_many`` call, one per data set.

    A tuple, in the order the data sets were given, of a :class:`Release` per data set
    released and a :class:`FailedRelease` per data set whose release failed, with a
    table view (``values``, ``public()``, ``summary()``). Each release is a release of
    its own (its own ε, Δ, σ, n and sampler statistics); nothing is shared between
    them but the call.

    Parameters
    ----------
    iterable : iterable of Release or FailedRelease
        The records, in order.

    Examples
    --------
    >>> cal = Calibration(n=10, sensitivity=0.05, sigma=0.1)
    >>> rel = [build_release(value=[0.0, float(i)], mechanism="KNG", epsilon=1.0,
    ...                      calibration=cal, sampler="exact", seed_policy="fixed seed",
    ...                      exact=True) for i in range(3)]
    >>> table = Releases(rel)
    >>> table.values.shape, len(table), table[2].value.tolist()
    ((3, 2), 3, [0.0, 2.0])
    >>> table.summary()
    '3 data sets: 3 released, 0 failed'
    >>> part = Releases([rel[0], FailedRelease(1, 10, "DomainError", "row 3 is outside")])
    >>> part.summary()
    '2 data sets: 1 released, 1 failed (data set 1: DomainError)'
    >>> part.released.values.shape
    (1, 2)
    """

    __slots__ = ()

    @property
    def failed(self) -> tuple[FailedRelease, ...]:
        """The records of the data sets whose release failed, in order."""
        return tuple(r for r in self if isinstance(r, FailedRelease))

    @property
    def released(self) -> Releases:
        """The releases made, in order, without the failed data sets."""
        return Releases(r for r in self if not isinstance(r, FailedRelease))

    def summary(self) -> str:
        """One line: how many data sets were released and how many failed, and why."""
        failed = self.failed
        line = f"{len(self)} data sets: {len(self) - len(failed)} released, {len(failed)} failed"
        if failed:
            shown = ", ".join(f"data set {f.index}: {f.error}" for f in failed[:5])
            more = f", and {len(failed) - 5} more" if len(failed) > 5 else ""
            line += f" ({shown}{more})"
        return line

    @property
    def values(self) -> np.ndarray:
        """The released values stacked, shape ``(R, *point_shape)``.

        Raises
        ------
        ValueError
            Some data set failed (no value to stack in its row): the message gives
            :meth:`summary`; ``.released.values`` stacks the others.
        """
        if self.failed:
            raise ValueError(
                f"{self.summary()}: no value for the failed ones; .released.values stacks "
                "the released values, .failed gives each failure and its reason"
            )
        return np.stack([r.value for r in self])

    def public(self) -> list[dict]:
        """Each record's ``public()``, in order (a failed one: :meth:`FailedRelease.public`)."""
        return [r.public() for r in self]
