"""Releases saved and loaded: ``Release.to_json`` / ``Release.from_json`` (issue 38, item 7).

Oracles: a float survives the file when its bits do (``-0.0`` is not ``0.0``); a saved
array keeps its dtype and shape; a file changed in any way after it was written, or not
written by us, is refused with ``ReleaseFileError`` saying what is wrong, never another
exception.
"""

import json
import math
import os

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.io.files import release_json
from pymc_manidp.mechanisms.baselines import EuclideanLaplace
from pymc_manidp.privacy import ReleaseFileError
from pymc_manidp.privacy.budget import checksum, new_state
from pymc_manidp.privacy.release import DIAGNOSTICS_NOT_SAVED, Calibration, build_release

ADVERSARIAL = [
    1 / 3,
    0.3333333333333333,
    math.nextafter(1 / 3, 1.0),
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    -0.0,
    0.0,
    1e308,
    -1.7976931348623157e308,
    0.1,
    1.0,
]
floats = st.one_of(st.sampled_from(ADVERSARIAL), st.floats(allow_nan=False, allow_infinity=False))


def same(a, b) -> bool:
    """Equal to the bit: floats by ``repr`` (``-0.0`` is not ``0.0``), arrays by dtype,
    shape and bytes, containers item by item."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            type(a) is type(b)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        return type(a) is type(b) and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


FIELDS = (
    "value", "epsilon", "delta", "mechanism", "sigma", "sensitivity", "n", "sampler",
    "seed_policy", "opt_outs", "notes", "restricted", "center", "radius", "manifold",
)  # fmt: skip


def assert_same_release(a, b, *, public):
    for name in FIELDS:
        assert same(getattr(a, name), getattr(b, name)), name
    if public:
        assert b.sampler_info is None and b.delta_estimate is None
    else:
        assert same(a.sampler_info, b.sampler_info)
        assert same(a.delta_estimate, b.delta_estimate)
    assert b.diagnostics is None  # never in the file (DIAGNOSTICS_NOT_SAVED)


def make(value=(0.0, 1.0), **kw):
    cal = Calibration(n=kw.pop("n", 10), sensitivity=kw.pop("sensitivity", 0.05),
                      sigma=kw.pop("sigma", 0.1))  # fmt: skip
    args = dict(value=value, mechanism="KNG", epsilon=1.0, calibration=cal,
                sampler="exact", seed_policy="fixed seed", exact=True)  # fmt: skip
    args.update(kw)
    return build_release(**args)


@given(
    value=st.lists(floats, min_size=0, max_size=6),
    shape=st.sampled_from(["flat", "matrix", "scalar"]),
    epsilon=floats,
    sigma=floats,
    sensitivity=floats,
    n=st.one_of(st.integers(1, 10**6), st.just(10**400)),
    public=st.booleans(),
    exact=st.booleans(),
    info=st.dictionaries(
        st.text(max_size=5), st.one_of(floats, st.floats(), st.integers()), max_size=3
    ),
)
def test_round_trip_is_exact(tmp_path_factory, value, shape, epsilon, sigma, sensitivity,
                             n, public, exact, info):  # fmt: skip
    if shape == "scalar":
        value = value[0] if value else -0.0
    elif shape == "matrix":
        value = np.reshape(value[: len(value) // 2 * 2], (-1, 2))
    rel = make(
        value=value,
        epsilon=epsilon,
        n=n,
        sigma=sigma,
        sensitivity=sensitivity,
        exact=exact,
        sampler_info={**info, "rates": np.array([1 / 3, -0.0, 5e-324], dtype=np.float32)},
        delta_estimate={"tv_hat": 1 / 3, "curve": {"t": [1, 2]}, "pair": (1, -0.0)},
        opt_outs=("clip",),
        restricted=True,
        domain=_Domain(np.full(np.shape(value), 1 / 3), 5e-324),
    )
    path = tmp_path_factory.mktemp("rt") / "release.json"
    rel.to_json(path, public=public)
    back = pmd.Release.from_json(path)
    assert_same_release(rel, back, public=public)
    # a second save of the loaded record writes the same bytes: nothing drifts
    if public:
        again = path.with_name("again.json")
        back.to_json(again, public=True)
        assert again.read_bytes() == path.read_bytes()


class _Domain:
    """The public ball's fields that ``build_release`` reads."""

    def __init__(self, center, radius):
        self.center, self.radius, self.manifold = center, radius, "Sphere(dim=1, radius=1.0)"


def test_curator_values_keep_their_types(tmp_path):
    info = {
        "nan": float("nan"),
        "inf": float("inf"),
        "-inf": -math.inf,
        "f32": np.float32(1 / 3),
        "i64": np.int64(-(2**63)),
        "ints": np.arange(6, dtype=np.int16).reshape(2, 3),
        "bools": np.array([True, False]),
        "complex": np.array([1 + 2j]),
        "empty": np.zeros((0, 3)),
        "tuple": (1, (2.5, "x")),
        "__looks_like_a_tag__": {"__float__": "nan"},
        "none": None,
        "big": 10**400,
    }
    rel = make(sampler_info=info)
    rel.to_json(tmp_path / "r.json")
    back = pmd.Release.from_json(tmp_path / "r.json").sampler_info
    for k, v in info.items():
        if isinstance(v, float) and math.isnan(v):
            assert isinstance(back[k], float) and math.isnan(back[k])
        else:
            assert same(v, back[k]), k


def test_public_file_leaves_out_the_curators_fields(tmp_path):
    rel = make(sampler_info={"footpoint_error": 0.123456789}, delta_estimate={"tv_hat": 0.5})
    rel.to_json(tmp_path / "public.json", public=True)
    rel.to_json(tmp_path / "full.json")
    public_text = (tmp_path / "public.json").read_text()
    assert "footpoint_error" not in public_text and "tv_hat" not in public_text
    assert "curator" not in json.loads(public_text)
    full = json.loads((tmp_path / "full.json").read_text())
    assert full["curator"]["sampler_info"] == {"footpoint_error": 0.123456789}
    assert full["format"] == "pymc-manidp release" and full["version"] == 1


def _tiny_sphere_data():
    rng = np.random.default_rng(0)
    x = np.array([0.0, 0.0, 1.0]) + 0.05 * rng.normal(size=(12, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize(
    "make_mechanism",
    [
        lambda M: pmd.KNGMechanism(M, epsilon=1.0, center=[0, 0, 1.0], radius=0.5),
        lambda M: pmd.LaplaceMechanism(M, epsilon=1.0, center=[0, 0, 1.0], radius=0.5),
        lambda M: pmd.LaplaceMechanism(
            M, epsilon=1.0, center=[0, 0, 1.0], radius=0.5, restrict=True
        ),
        lambda M: EuclideanLaplace(M, epsilon=1.0, center=[0, 0, 1.0], radius=0.5),
    ],
    ids=["kng", "laplace", "laplace-restricted", "euclidean-laplace"],
)
@pytest.mark.parametrize("public", [False, True])
def test_each_mechanisms_release_round_trips(tmp_path, make_mechanism, public):
    rel = make_mechanism(pmd.Sphere(dim=2)).release(_tiny_sphere_data(), random_seed=3)
    rel.to_json(tmp_path / "r.json", public=public)
    assert_same_release(rel, pmd.Release.from_json(tmp_path / "r.json"), public=public)


def test_the_cli_record_is_the_same_format(tmp_path):
    """``release_json`` (``pymc-manidp release --out``) writes a file ``from_json`` reads."""
    M = pmd.Sphere(dim=2)
    rel = pmd.KNGMechanism(M, epsilon=1.0, center=[0, 0, 1.0], radius=0.5).release(
        _tiny_sphere_data(), random_seed=3
    )
    doc = release_json(rel, manifold_name="sphere", manifold=M, center=[0, 0, 1.0],
                       radius=0.5, options={"clip": False}, source="x.csv")  # fmt: skip
    (tmp_path / "cli.json").write_text(json.dumps(doc, indent=2))
    assert_same_release(rel, pmd.Release.from_json(tmp_path / "cli.json"), public=True)
    doc["provenance"]["source"] = "y.csv"  # the extra keys are sealed too
    (tmp_path / "cli.json").write_text(json.dumps(doc, indent=2))
    with pytest.raises(ReleaseFileError, match="checksum does not match"):
        pmd.Release.from_json(tmp_path / "cli.json")


def _saved(tmp_path, **kw):
    path = tmp_path / "r.json"
    make(sampler_info={"a": 1}, **kw).to_json(path)
    return path


def _reseal(path, edit):
    doc = json.loads(path.read_text())
    edit(doc)
    doc["checksum"] = checksum(doc)
    path.write_text(json.dumps(doc))


def test_one_changed_byte_is_refused(tmp_path):
    """Every byte of a saved record, flipped in its lowest bit one at a time (a digit
    becomes another digit, a space a '!', a key another key): each file is refused."""
    path = _saved(tmp_path, value=[0.25, 0.5])
    raw = path.read_bytes()
    messages = set()
    for i in range(len(raw)):
        changed = bytearray(raw)
        changed[i] ^= 1
        path.write_bytes(bytes(changed))
        with pytest.raises(ReleaseFileError) as err:
            pmd.Release.from_json(path)
        messages.add(str(err.value).split(": ", 1)[1][:30])
    assert len(raw) > 500
    assert any("checksum does not match" in m for m in messages), messages


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["release"].update(n="10"), "field 'n' must be an integer"),
        (lambda d: d["release"].update(n=True), "field 'n' must be an integer"),
        (lambda d: d["release"].update(epsilon=None), "field 'epsilon' must be a number"),
        (lambda d: d["release"].update(opt_outs=["everything"]), "field 'opt_outs'"),
        (lambda d: d["release"].update(value=[0.0, "1"]), "'value' must be nested lists"),
        (lambda d: d["release"].update(value=[0.0, True]), "'value' must be nested lists"),
        (
            lambda d: d["release"].update(value=[0.0, 10**400]),
            "not an array of floats|past the largest",
        ),
        (lambda d: d["release"].update(value=[[0.0], [1.0, 2.0]]), "not an array of floats"),
        (lambda d: d.update(value_shape=[3]), "has shape \\(2,\\), the record says \\(3,\\)"),
        (lambda d: d["release"].pop("sigma"), "no field 'sigma'"),
        (lambda d: d.update(release=[]), "'release' must be an object"),
        (lambda d: d.update(curator=[1]), "'curator' must be an object"),
        (lambda d: d["curator"].update(sampler_info=[1]), "sampler_info must be an object"),
        (
            lambda d: d["curator"].update(sampler_info={"x": {"__ndarray__": {"dtype": "O"}}}),
            "not a saved array",
        ),
        (lambda d: d["release"].update(public_ball={"center": [1.0]}), "'public_ball'"),
        (lambda d: d.update(version=2), "version 2: this version of pymc-manidp reads version 1"),
    ],
)
def test_a_resealed_file_with_a_wrong_field_is_refused(tmp_path, edit, message):
    path = _saved(tmp_path)
    _reseal(path, edit)
    with pytest.raises(ReleaseFileError, match=message):
        pmd.Release.from_json(path)


def _fifo(tmp_path):
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"a": 1}', "not a pymc-manidp release record \\(its 'format' is None"),
        (b"[1, 2]", "its 'format' is 'list'"),
        (json.dumps(new_state(1.0)).encode(), "'pymc-manidp privacy ledger'"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"", "not plain JSON"),
        (b'{"format": NaN}', "NaN is not a JSON number"),
        (b'{"format": 1, "format": 2}', "a key appears twice"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply|not plain JSON"),
        (b"1" * 5000, "not plain JSON"),
        (lambda tmp: _fifo(tmp), "is a FIFO, not a regular file"),
        (lambda tmp: tmp, "is a folder, not a file"),
        (lambda tmp: tmp / "missing.json", "no such file"),
    ],
    ids=[
        "foreign-json",
        "list",
        "ledger",
        "non-utf8",
        "empty",
        "nan",
        "duplicate-keys",
        "huge-nesting",
        "huge-int",
        "fifo",
        "folder",
        "missing",
    ],
)
def test_a_foreign_file_is_refused_by_name(tmp_path, content, message):
    if callable(content):
        path = content(tmp_path)
    else:
        path = tmp_path / "r.json"
        path.write_bytes(content)
    with pytest.raises(ReleaseFileError, match=message) as err:
        pmd.Release.from_json(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_to_json_refuses_a_target_that_is_not_a_regular_file(tmp_path, kind):
    target = tmp_path / "target"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        (tmp_path / "real.json").write_text("keep")
        target.symlink_to(tmp_path / "real.json")
    else:
        target.mkdir()
    with pytest.raises(ValueError, match={"fifo": "is a FIFO, not a regular file",
                                          "symlink": "is a symbolic link",
                                          "folder": "is a folder"}[kind]):  # fmt: skip
        make().to_json(target)
    if kind == "symlink":
        assert (tmp_path / "real.json").read_text() == "keep" and target.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["target"] + (["real.json"] if kind == "symlink" else [])
    )


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    make(value=[1.0, 0.0]).to_json(path)
    before = path.read_bytes()

    def full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="No space"):
        make(value=[0.0, 1.0]).to_json(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_value_json_cannot_state_is_refused_on_save(tmp_path):
    with pytest.raises(ValueError, match="cannot be saved as a JSON record"):
        make(value=[math.nan, 0.0]).to_json(tmp_path / "r.json")
    with pytest.raises(ValueError, match="a set cannot be saved"):
        make(sampler_info={"s": {1}}).to_json(tmp_path / "r.json")
    with pytest.raises(TypeError, match="public must be True or False"):
        make().to_json(tmp_path / "r.json", public="yes")
    assert not (tmp_path / "r.json").exists()


def test_to_xarray_public_and_full():
    posterior = xr.Dataset({"theta": (("chain", "draw"), np.arange(8.0).reshape(2, 4))})
    diagnostics = xr.DataTree.from_dict(
        {"/posterior": posterior, "/sample_stats/nested": xr.Dataset({"x": ("a", [1.0])})}
    )
    rel = make(value=[[1.0, 0.0], [0.0, 1.0]], diagnostics=diagnostics, exact=False)
    public = rel.to_xarray()
    assert list(public.children) == [] and public["value"].dims == ("point_0", "point_1")
    assert public.attrs["delta"] == "null" and public.attrs["sigma"] == 0.1
    full = rel.to_xarray(public=False)
    assert list(full.children) == ["posterior", "sample_stats"]
    assert full["sample_stats/nested"]["x"].values.tolist() == [1.0]
    assert full["posterior"]["theta"].shape == (2, 4)
    np.testing.assert_array_equal(full["value"].values, rel.value)
    # the curator's file says where the run is, and a reloaded release has none
    doc = json.loads(json.dumps(rel.public()))
    assert "posterior" not in json.dumps(doc)
    assert DIAGNOSTICS_NOT_SAVED.startswith("not saved")
