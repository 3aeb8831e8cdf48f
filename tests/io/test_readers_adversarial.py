"""Issue 43, items 8, 12, 14 and 15 for the readers: what is counted is what is read.

Each reader (``read_points``, ``open_points`` and the command line's ``release``
reading a file) either reads exactly the array written (compared bit for bit) or
refuses with one clear ``ValueError``/``TypeError``; from the command line with
``--budget``, a refused file leaves no ledger behind (nothing was charged). Data that
change between opening (when n is counted) and reading are refused where they are read
(after any charge, which stands: the message says so).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.io import open_ledger, open_points, read_points
from pymc_manidp.io.files import manifold_for, parse_center
from pymc_manidp.stats import reductions
from tests.test_cli import release_args, run

da = pytest.importorskip("dask.array")

NORTH = np.array([0.0, 0.0, 1.0])
S2 = pmd.Sphere(dim=2)
#: the hypothesis examples share one folder per test (tmp_path is per test, not example)
_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
FIXTURE_OK = settings(suppress_health_check=_HEALTH)


@pytest.fixture
def points():
    return generators.sphere_cap(40, radius=0.3, center=NORTH, random_seed=5)


def _one_line(code, err, *expected):
    assert code == 2, err
    errors = [line for line in err.splitlines() if "pymc-manidp release: error:" in line]
    assert "Traceback" not in err and len(errors) == 1, err
    for text in expected:
        assert text in err, err


def _kng(radius=0.4):
    return pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=radius)


# --- item 8: what is counted is what is read -------------------------------------------------
@pytest.mark.parametrize("rows", [2, 30])
def test_a_shard_rewritten_after_opening_is_refused_and_the_charge_stands(rows, tmp_path, points):
    """40 rows opened, then shard 1 rewritten with 2 (or 30) rows: the old code released
    n = 40 from 22 records read (or 40 read of 50 now there)."""
    folder = tmp_path / "shards"
    folder.mkdir()
    np.save(folder / "part-0.npy", points[:20])
    np.save(folder / "part-1.npy", points[20:])
    x = open_points(folder)
    assert x.shape == (40, 3)
    np.save(folder / "part-1.npy", np.resize(points, (rows, 3)))
    budget = pmd.PrivacyBudget(5.0)
    with pytest.raises(ValueError, match=r"part-1\.npy changed after it was opened") as err:
        _kng().release(x, random_seed=0, budget=budget)
    assert "a charge already made to a privacy budget stands" in str(err.value)
    assert budget.spent.epsilon == 1.0  # charged before the data were read: it stands


def test_a_block_with_other_rows_than_its_chunk_declares_is_refused_by_every_pass(points):
    """The passes themselves check each block's rows (any Dask array, not only ours)."""
    import dask

    short = da.from_delayed(dask.delayed(lambda: points[:2])(), (20, 3), dtype=float)
    x = da.concatenate([da.from_array(points[:20]), short])
    with pytest.raises(ValueError, match=r"chunk 1 \(rows 20:40\) was declared with 20 rows but 2"):
        _kng().release(x, random_seed=0)
    for M in (S2, pmd.Euclidean(dim=3)):  # the Euclidean mean: one sum, not Karcher steps
        with pytest.raises(ValueError, match="declared with 20 rows"):
            pmd.frechet_mean(M, x)


def test_a_parquet_file_or_zarr_store_rewritten_after_opening_is_refused(tmp_path, points):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    zarr = pytest.importorskip("zarr")

    def table(v):
        return pa.table({"x": v[:, 0], "y": v[:, 1], "z": v[:, 2]})

    pq.write_table(table(points), tmp_path / "p.parquet", row_group_size=20)
    x = open_points(tmp_path / "p.parquet")
    pq.write_table(table(points[:22]), tmp_path / "p.parquet", row_group_size=20)
    with pytest.raises(ValueError, match=r"p\.parquet changed after it was opened"):
        x.compute()
    store = str(tmp_path / "z.zarr")
    zarr.create_array(store, shape=points.shape, chunks=(10, 3), dtype="f8")[:] = points
    x = open_points(store)
    zarr.create_array(store, shape=(22, 3), chunks=(10, 3), dtype="f8", overwrite=True)[:] = points[
        :22
    ]
    with pytest.raises(ValueError, match=r"z\.zarr changed after it was opened"):
        x.compute()


@pytest.mark.parametrize("other", ["b.csv", "b.npz", "b.txt", "b.json", "sub"])
def test_a_folder_with_other_data_beside_its_shards_is_refused(other, tmp_path, points, capsys):
    """a.npy and b.csv released n = 20 and dropped b's records."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    np.save(folder / "a.npy", points[:20])
    if other == "sub":
        (folder / other).mkdir()
        np.save(folder / other / "c.npy", points[20:])
    elif other == "b.npz":
        np.savez(folder / other, x=points[20:])
    else:
        np.savetxt(folder / other, points[20:], delimiter=",")
    (folder / "README.md").write_text("notes")  # not a format that holds records: ignored
    (folder / "_SUCCESS").write_text("")
    with pytest.raises(ValueError, match=f"may hold records.*{other}"):
        open_points(folder)
    code, _, err = run(release_args(folder), capsys)
    _one_line(code, err, other, "one data set per folder")
    os.rename(folder / other, tmp_path / other)
    np.testing.assert_array_equal(open_points(folder).compute(), points[:20])


def test_a_dask_masked_array_is_refused_before_anything_is_read(points):
    x = da.ma.masked_equal(da.from_array(points, chunks=10), points[3, 0])
    for call in (
        lambda: _kng().release(x, random_seed=0),
        lambda: pmd.frechet_mean(S2, x),
        lambda: pmd.DataDomain(S2, NORTH, 0.4).check(x),
    ):
        with pytest.raises(ValueError, match="Dask masked array: its mask would be ignored"):
            call()


# --- item 12: Parquet and Zarr files ---------------------------------------------------------
def test_parquet_with_a_duplicate_column_name_is_a_clear_error(tmp_path, points, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cols = [pa.array(points[:, j]) for j in range(3)]
    pq.write_table(pa.Table.from_arrays(cols, names=["x", "x", "z"]), tmp_path / "d.parquet")
    with pytest.raises(ValueError, match=r"d\.parquet: the column name\(s\) \['x'\] appear more"):
        open_points(tmp_path / "d.parquet")  # was KeyError: an internal error
    code, _, err = run(release_args(tmp_path / "d.parquet"), capsys)
    _one_line(code, err, "appear more than once")
    pq.write_table(pa.Table.from_arrays(cols, names=["x", "y", "z"]), tmp_path / "d.parquet")
    with pytest.raises(ValueError, match="each column once"):
        open_points(tmp_path / "d.parquet", columns=["x", "x"])
    with pytest.raises(TypeError, match="list of column names"):
        open_points(tmp_path / "d.parquet", columns="xyz")


def _flip_a_value(path, value):
    data = bytearray(path.read_bytes())
    at = data.find(np.float64(value).tobytes())
    assert at > 0
    data[at + 3] ^= 0xFF  # a mantissa byte: still a finite float, a different one
    path.write_bytes(bytes(data))


def test_corrupt_parquet_pages_are_refused_where_checksums_were_written(tmp_path, points):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"x": points[:, 0], "y": points[:, 1], "z": points[:, 2]})
    for checksums in (True, False):
        path = tmp_path / f"c{checksums}.parquet"
        pq.write_table(
            table,
            path,
            write_page_checksum=checksums,
            compression="none",
            use_dictionary=False,
            write_statistics=False,  # else the first copy of a value may be a page minimum
        )
        _flip_a_value(path, points[5, 1])
        x = open_points(path)
        if checksums:
            with pytest.raises(ValueError, match=r"row group 0 is corrupt.*CRC"):
                x.compute()
        else:  # what cannot be detected (docs/datasets.md): read as another value
            got = x.compute()
            assert got[5, 1] != points[5, 1] and math.isfinite(got[5, 1])


def test_a_zarr_store_zarr_wrote_reads_right_with_chunks_it_omitted(tmp_path):
    """Zarr omits chunks equal to the fill value: they were refused as 'missing'."""
    zarr = pytest.importorskip("zarr")
    x = np.random.default_rng(3).normal(size=(40, 3))
    x[10:20] = 0.0  # the default fill value: Zarr writes no chunk for these rows
    plain = tmp_path / "z.zarr"
    zarr.create_array(str(plain), shape=x.shape, chunks=(10, 3), dtype="f8")[:] = x
    assert not (plain / "c" / "1" / "0").exists()
    np.testing.assert_array_equal(open_points(plain).compute(), x)
    sharded = tmp_path / "s.zarr"
    x[20:40] = 0.0  # a whole shard equal to the fill value: no shard file either
    z = zarr.create_array(str(sharded), shape=x.shape, chunks=(5, 3), shards=(20, 3), dtype="f8")
    z[:] = x
    assert not (sharded / "c" / "1" / "0").exists()
    np.testing.assert_array_equal(open_points(sharded).compute(), x)
    rel = pmd.KNGMechanism(
        pmd.Euclidean(dim=3), epsilon=1.0, center=np.zeros(3), radius=10.0
    ).release(open_points(sharded), random_seed=0)
    assert rel.n == 40


# --- item 14: messages ---------------------------------------------------------------------
def test_csv_underscores_and_header_with_npy_are_refused(tmp_path, points, capsys):
    (tmp_path / "u.csv").write_text("0,0,1\n1_0,0,0\n")  # float() reads 1_0 as 10
    with pytest.raises(
        ValueError,
        match=r"line 2, field 1: '1_0' is not a number: every record must be plain decimals",
    ):
        read_points(tmp_path / "u.csv")
    np.save(tmp_path / "d.npy", points)
    with pytest.raises(ValueError, match="--header applies to CSV files only"):
        read_points(tmp_path / "d.npy", header=True)
    code, _, err = run(release_args(tmp_path / "d.npy", "--header"), capsys)
    _one_line(code, err, "--header applies to CSV files only")
    (tmp_path / "shards").mkdir()
    np.save(tmp_path / "shards" / "a.npy", points)
    code, _, err = run(release_args(tmp_path / "shards", "--header"), capsys)
    _one_line(code, err, "--header applies to CSV files only")
    with pytest.raises(ValueError, match="center must be comma-separated numbers"):
        parse_center("0,0,1_0", S2)  # was read as (0, 0, 10)
    np.testing.assert_array_equal(parse_center(" 0, -0.0 ,1 ", S2), [0.0, 0.0, 1.0])


def test_unknown_dask_chunk_sizes_are_named_by_every_reader(tmp_path, points):
    x = da.from_array(points, chunks=10)
    x = x[x[:, 2] > 0]  # a boolean index: chunk sizes unknown (NaN)
    with pytest.raises(
        ValueError, match=r"chunk sizes are unknown: call data\.compute_chunk_sizes"
    ):
        manifold_for("sphere", x)
    with pytest.raises(ValueError, match="chunk sizes are unknown"):  # was int(nan)
        open_ledger(tmp_path / "l.json", data=x, epsilon=1.0)
    assert not (tmp_path / "l.json").exists()


# --- item 15: adversarial files, property-based ----------------------------------------------
_TOKENS = [
    "1_0", "0x1p-3", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e309",
    "\u0661\u0662", "1/3", "", "true", "None", "1.5.2", "--1", "1e", ".", "\ufeff1",
    "0.3333333333333333", "5e-324", "1e-400", "2.2250738585072014e-308", "1e308", "-0",
    "+.5", "7.", " 3 ", "\t4",
]  # fmt: skip
_STRICT = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_fields = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from([1 / 3, 5e-324, math.nextafter(1.0, 2.0), 1e308]).map(repr),
    st.integers(min_value=-(10**400), max_value=10**400).map(str),
    st.sampled_from(_TOKENS),
)


def _expected(rows):
    """The oracle: the floats of the rows if every field is a finite decimal, else None."""
    import re

    values = []
    for row in rows:
        for f in row:
            if not re.fullmatch(_STRICT, f.strip()):
                return None
            v = float(f)
            if not math.isfinite(v):
                return None
            values.append(v)
    return np.array(values).reshape(len(rows), -1)


@FIXTURE_OK
@given(
    rows=st.lists(st.lists(_fields, min_size=3, max_size=3), min_size=1, max_size=4),
    bom=st.booleans(),
    newline=st.sampled_from(["\n", "\r\n"]),
)
def test_csv_fields_are_read_exactly_or_refused(rows, bom, newline, tmp_path):
    path = tmp_path / "d.csv"
    text = newline.join(",".join(r) for r in rows) + newline
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode())
    if not bom:  # a first field starting with U+FEFF is the file's byte order mark
        rows = [[rows[0][0].removeprefix("\ufeff"), *rows[0][1:]], *rows[1:]]
    want = _expected(rows)
    if want is None:
        with pytest.raises(ValueError, match=r"d\.csv"):
            read_points(path, header=False)
    else:
        np.testing.assert_array_equal(read_points(path, header=False), want)
        # a first record of numbers is never taken for a header
        np.testing.assert_array_equal(read_points(path), want)


@FIXTURE_OK
@given(junk=st.binary(min_size=1, max_size=8).filter(lambda b: not _utf8(b)))
def test_non_utf8_bytes_in_a_csv_are_a_clear_error(junk, tmp_path):
    (tmp_path / "d.csv").write_bytes(b"0,0,1\n" + junk + b",0,1\n")
    with pytest.raises(ValueError, match=r"d\.csv as UTF-8 text"):
        read_points(tmp_path / "d.csv")


def _utf8(b):
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_ARRAYS = st.sampled_from(
    ["f8", "f4", "f2", "i8", "u1", ">f8", "g", "c16", "?", "U3", "O", "M8[s]", "m8[s]"]
).flatmap(
    lambda dt: st.tuples(
        st.just(dt),
        st.lists(
            st.one_of(
                st.floats(width=64),
                st.sampled_from([1 / 3, 5e-324, -0.0, 1e308, math.nextafter(1 / 3, 1)]),
                st.integers(-(2**62), 2**62),
            ),
            min_size=3,
            max_size=12,
        ),
    )
)


def _as_dtype(dt, values):
    with np.errstate(all="ignore"):
        if dt == "O":
            return np.array(values, dtype=object)
        if dt.startswith(("U", "M", "m")):
            return np.array(
                [
                    str(v) if dt.startswith("U") else int(v) % 10**9 if math.isfinite(v) else 0
                    for v in values
                ]
            ).astype(dt)
        return np.array([float(v) for v in values]).astype(dt)


@FIXTURE_OK
@given(arr=_ARRAYS, cut=st.none() | st.integers(0, 200))
def test_npy_files_are_read_exactly_or_refused(arr, cut, tmp_path):
    dt, values = arr
    x = _as_dtype(dt, values[: len(values) // 3 * 3]).reshape(-1, 3)
    path = tmp_path / "d.npy"
    np.save(path, x, allow_pickle=True)  # an object array is pickled: never loaded
    whole = path.read_bytes()
    cut = None if cut is None or cut >= len(whole) else cut  # a cut past the end cuts nothing
    if cut is not None:
        path.write_bytes(whole[:cut])
    real = x.dtype.kind in "iuf"
    with np.errstate(over="ignore"):
        finite = real and np.isfinite(x.astype(float)).all()
    if cut is not None or not finite:
        with pytest.raises((ValueError, TypeError), match=r"d\.npy"):
            read_points(path)
    else:
        got = read_points(path)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, x.astype(float))


@pytest.mark.parametrize("kind", ["symlink", "dangling", "loop", "fifo", "folder", "empty"])
def test_odd_paths_are_read_through_or_refused(kind, tmp_path, points):
    real = tmp_path / "real.npy"
    np.save(real, points)
    path = tmp_path / "d.npy"
    if kind == "symlink":
        path.symlink_to(real)
        np.testing.assert_array_equal(read_points(path), points)
        return
    if kind == "dangling":
        path.symlink_to(tmp_path / "nowhere.npy")
    elif kind == "loop":
        path.symlink_to(tmp_path / "d2.npy")
        (tmp_path / "d2.npy").symlink_to(path)
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("needs FIFOs")
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"d\.npy"):
        read_points(path)


_SHARD_KINDS = ["f8", "f4", "i4", "c16", "?", "nan", "1d", "wide", "empty"]


@settings(max_examples=20, suppress_health_check=_HEALTH)
@given(
    sizes=st.lists(st.integers(0, 7), min_size=1, max_size=4),
    kinds=st.lists(st.sampled_from(_SHARD_KINDS), min_size=4, max_size=4),
    extra=st.sampled_from([None, "x.csv", "x.npz", "notes.md"]),
    chunk_rows=st.none() | st.integers(1, 5),
)
def test_open_points_reads_shards_exactly_or_refuses(sizes, kinds, extra, chunk_rows, tmp_path):
    folder = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    rng = np.random.default_rng(len(sizes))
    parts, ok = [], True
    for i, (rows, kind) in enumerate(zip(sizes, kinds, strict=False)):
        x = rng.normal(size=(rows, 3))
        if kind == "nan" and rows:
            x[0, 0] = np.nan  # read as it is: the release's check refuses it, naming the row
        if kind == "empty":
            (folder / f"p{i}.npy").write_bytes(b"")
            ok = False
            continue
        x = {"1d": x.ravel(), "wide": rng.normal(size=(rows, 4))}.get(kind, x)
        x = x.astype(kind) if kind in ("f8", "f4", "i4", "c16", "?") else x
        np.save(folder / f"p{i}.npy", x)
        ok &= x.dtype.kind in "iuf" and x.ndim == 2
        parts.append(x)
    # every shard must have the first one's row shape (the folder does not name a manifold)
    ok &= len({p.shape[1:] for p in parts}) <= 1
    if extra is not None:
        (folder / extra).write_text("1,2,3\n")
        ok &= extra == "notes.md"
    ok &= sum(len(p) for p in parts) > 0
    if not ok:
        with pytest.raises((ValueError, TypeError)):
            open_points(folder, chunk_rows=chunk_rows)
        return
    got = open_points(folder, chunk_rows=chunk_rows)
    assert got.shape[0] == reductions.n_rows(got)
    want = np.concatenate([p.astype(float) for p in parts])
    np.testing.assert_array_equal(got.compute(), want)


_CLI_FILES = {
    "good": lambda p: "\n".join(",".join(map(repr, r.tolist())) for r in p) + "\n",
    "nan": lambda p: "nan,0,1\n" + "\n".join(",".join(map(repr, r.tolist())) for r in p),
    "inf": lambda p: "\n".join(",".join(map(repr, r.tolist())) for r in p) + "\ninf,0,1\n",
    "underscore": lambda p: "0,0,1_0\n" + "\n".join(",".join(map(repr, r.tolist())) for r in p),
    "hex": lambda p: "0x1p-3,0,1\n" + "\n".join(",".join(map(repr, r.tolist())) for r in p),
    "huge": lambda p: "1e400,0,1\n" + "\n".join(",".join(map(repr, r.tolist())) for r in p),
    "ragged": lambda p: "0,1\n" + "\n".join(",".join(map(repr, r.tolist())) for r in p),
    "words": lambda p: "x,y,z\na,b,c\n",
    "bom": lambda p: "\ufeff" + "\n".join(",".join(map(repr, r.tolist())) for r in p) + "\n",
}


@settings(max_examples=15, suppress_health_check=_HEALTH)
@given(
    kind=st.sampled_from(sorted(_CLI_FILES)),
    rows=st.integers(1, 6),
    suffix=st.sampled_from([".csv", ".txt"]),
)
def test_cli_release_reads_a_file_exactly_or_refuses_and_charges_nothing(
    kind, rows, suffix, tmp_path, capsys
):
    n = len(list(tmp_path.iterdir()))
    data, ledger = tmp_path / f"d{n}{suffix}", tmp_path / f"l{n}.json"
    cap = generators.sphere_cap(rows, radius=0.3, center=NORTH, random_seed=rows)
    data.write_text(_CLI_FILES[kind](cap), encoding="utf-8")
    argv = release_args(data, "--budget", str(ledger), "--budget-epsilon", "5")
    code, out, err = run(argv, capsys)
    if kind in ("good", "bom"):
        assert code == 0, err
        assert json.loads(out)["release"]["n"] == rows
        assert open_ledger(ledger, data=read_points(data)).spent.epsilon == 1.0
    else:
        _one_line(code, err, data.name)
        assert not ledger.exists()  # refused when read: no ledger, no charge


@settings(max_examples=15, suppress_health_check=_HEALTH)
@given(
    rows=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    group=st.integers(1, 5),
    value=st.sampled_from([1 / 3, 5e-324, -0.0, 1e308, math.nextafter(1.0, 0.0), 2.0**53 + 1]),
    fmt=st.sampled_from(["parquet", "zarr", "zarr-sharded"]),
)
def test_parquet_and_zarr_round_trip_exactly(rows, group, value, fmt, tmp_path):
    """Edge values survive bit for bit, whatever the row groups or chunks."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    zarr = pytest.importorskip("zarr")
    n = len(list(tmp_path.iterdir()))
    x = np.random.default_rng(sum(rows)).normal(size=(sum(rows), 3))
    x[0, 0], x[-1, 2] = value, -value
    if fmt == "parquet":
        folder = tmp_path / f"p{n}"
        folder.mkdir()
        for i, part in enumerate(np.split(x, np.cumsum(rows)[:-1])):
            table = pa.table({"a": part[:, 0], "b": part[:, 1], "c": part[:, 2]})
            pq.write_table(table, folder / f"{i}.parquet", row_group_size=group)
        source = folder
    else:
        source = str(tmp_path / f"z{n}.zarr")
        shards = {"shards": (2 * group, 3)} if fmt == "zarr-sharded" else {}
        z = zarr.create_array(source, shape=x.shape, chunks=(group, 3), dtype="f8", **shards)
        z[:] = x
    got = open_points(source).compute()
    assert got.tobytes() == x.tobytes()  # -0.0 and subnormals included


@settings(max_examples=15, suppress_health_check=_HEALTH)
@given(before=st.integers(1, 6), after=st.integers(0, 9), chunk_rows=st.none() | st.integers(1, 4))
def test_a_shard_rewritten_after_opening_reads_only_if_its_shape_is_unchanged(
    before, after, chunk_rows, tmp_path
):
    folder = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    x = np.random.default_rng(before).normal(size=(before + 3, 3))
    np.save(folder / "a.npy", x[:3])
    np.save(folder / "b.npy", x[3:])
    opened = open_points(folder, chunk_rows=chunk_rows)
    new = np.full((after, 3), 0.5)
    if after:
        np.save(folder / "b.npy", new)
    else:
        (folder / "b.npy").write_bytes(b"")
    if after == before:  # the same count: the new values are read, n is still right
        np.testing.assert_array_equal(opened.compute(), np.concatenate([x[:3], new]))
    else:
        with pytest.raises(ValueError, match=r"b\.npy changed after it was opened"):
            opened.compute()


def _write_source(kind, path, cap):
    """Write ``cap`` (or something odd) at ``path``; return the path to release and n."""
    if kind == "npy":
        np.save(path, cap)
    elif kind == "npy-f4":
        np.save(path, cap.astype("f4"))  # float32 records: read exactly as float64
    elif kind == "npy-complex":
        np.save(path, cap + 0j)
    elif kind == "npy-object":
        np.save(path, cap.astype(object), allow_pickle=True)
    elif kind == "npy-strings":
        np.save(path, cap.astype(str))
    elif kind == "npy-truncated":
        np.save(path, cap)
        path.write_bytes(path.read_bytes()[:-5])
    elif kind == "npy-nan":
        cap = cap.copy()
        cap[-1, 0] = np.nan
        np.save(path, cap)
    elif kind == "npz":
        with open(path, "wb") as f:
            np.savez(f, x=cap)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("folder", "shards", "mixed"):
        path.mkdir()
        np.save(path / "a.npy", cap)
        if kind == "mixed":
            np.savetxt(path / "b.csv", cap, delimiter=",")
        if kind == "folder":
            (path / "a.npy").unlink()
    elif kind in ("symlink", "dangling"):
        np.save(path.with_suffix(".real.npy"), cap)
        path.symlink_to(path.with_suffix(".real.npy" if kind == "symlink" else ".gone.npy"))
    return len(cap)


_SOURCES = ["npy", "npy-f4", "npy-complex", "npy-object", "npy-strings", "npy-truncated"]
_SOURCES += ["npy-nan", "npz", "fifo", "folder", "shards", "mixed", "symlink", "dangling"]


@pytest.mark.parametrize("kind", _SOURCES)  # every kind, each once: a sample could skip one
def test_cli_release_reads_npy_files_and_odd_paths_or_refuses_charging_nothing(
    kind, tmp_path, capsys
):
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("needs FIFOs")
    rows = 1 + _SOURCES.index(kind) % 5
    n = len(list(tmp_path.iterdir()))
    data, ledger = tmp_path / f"d{n}.npy", tmp_path / f"l{n}.json"
    if kind in ("folder", "shards", "mixed"):
        data = tmp_path / f"d{n}"
    cap = generators.sphere_cap(rows, radius=0.3, center=NORTH, random_seed=rows)
    _write_source(kind, data, cap)
    argv = release_args(data, "--budget", str(ledger), "--budget-epsilon", "5")
    code, out, err = run(argv, capsys)
    if kind in ("npy", "npy-f4", "symlink", "shards"):
        assert code == 0, err
        assert json.loads(out)["release"]["n"] == rows
        assert json.loads(ledger.read_text())["budget"]["epsilon"] == 5.0
    else:
        _one_line(code, err, data.name)
        assert not ledger.exists()  # refused when read: no ledger, no charge


@pytest.mark.parametrize(
    "chunk_rows, error",
    [(0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError), ("2", TypeError)],
)
def test_open_points_refuses_a_chunk_size_that_is_not_a_positive_count(
    chunk_rows, error, tmp_path, points
):
    """0 raised range()'s error, -1 said 'no records', True gave one-row chunks."""
    np.save(tmp_path / "a.npy", points)
    with pytest.raises(error, match="chunk_rows must be"):
        open_points(tmp_path, chunk_rows=chunk_rows)
    assert open_points(tmp_path, chunk_rows=np.int64(7)).chunks[0] == (7,) * 5 + (5,)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_shard_named_twice_is_refused_not_counted_twice(link, tmp_path, points, capsys):
    folder = tmp_path / "shards"
    folder.mkdir()
    np.save(folder / "a.npy", points)
    if link == "symlink":
        (folder / "b.npy").symlink_to(folder / "a.npy")
    else:
        os.link(folder / "a.npy", folder / "b.npy")
    with pytest.raises(ValueError, match=r"b\.npy and .*a\.npy are the same file"):
        open_points(folder)  # was n = 80: each record counted twice
    code, _, err = run(release_args(folder), capsys)
    _one_line(code, err, "are the same file")
