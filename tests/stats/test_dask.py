"""Releases over Dask arrays: same law as in memory, never gathered, bad input refused.

The law tests run on a ``distributed.LocalCluster`` with 2 workers (threads in this
process: CI has 2 cores); the rest on Dask's local scheduler.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.datasets import generators
from pymc_manidp.stats import reductions
from pymc_manidp.stats.domain import CheckedData, DomainError

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
R = np.pi / 8
KENDALL_C = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])


def _sphere_data(n, seed=0):
    return generators.sphere_cap(n, radius=R, center=NORTH, random_seed=seed)


@pytest.fixture(scope="module")
def cluster_client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _guarded_get(limit=20_000):
    """A local scheduler that fails if a pass hands the client more than ``limit`` bytes."""
    seen = []

    def get(dsk, keys, **kwargs):
        out = dask.threaded.get(dsk, keys, **kwargs)
        size = len(pickle.dumps(out))
        seen.append(size)
        assert size < limit, f"a pass returned {size} bytes to the client"
        return out

    return get, seen


# --- the Fréchet mean and the law ----------------------------------------------------------
@pytest.mark.parametrize(
    ("manifold", "data", "center", "radius"),
    [
        (S2, _sphere_data(3000), NORTH, R),
        (
            pmd.SPD(k=2),
            generators.wishart_in_ball(2000, radius=1.5, random_seed=1),
            np.eye(2),
            1.5,
        ),
        (
            pmd.KendallShape(k_landmarks=4),
            generators.uniform_radius_ball(
                pmd.KendallShape(k_landmarks=4), 2000, center=KENDALL_C, radius=0.3, random_seed=2
            ),
            KENDALL_C,
            0.3,
        ),
    ],
    ids=["sphere", "spd2", "kendall4"],
)
def test_frechet_mean_dask_equals_numpy(manifold, data, center, radius):
    dom = pmd.DataDomain(manifold, center, radius)
    lazy = da.from_array(data, chunks=(700, *data.shape[1:]))
    get, seen = _guarded_get()
    with dask.config.set(scheduler=get):
        checked = dom.check(lazy)
        assert reductions.is_dask(checked)
        m_dask = pmd.frechet_mean(manifold, checked)
        m_plain = pmd.frechet_mean(manifold, lazy)  # unchecked Dask data work too
    m_np = pmd.frechet_mean(manifold, dom.check(data))
    assert m_dask.converged and m_np.converged
    # checked data: the same start (the center) and steps, only the summation order differs
    np.testing.assert_allclose(m_dask.mean, m_np.mean, atol=1e-10, rtol=0)
    # unchecked data start elsewhere: a Kendall mean is then another pre-shape of the
    # same shape (a rotation), so compare geodesic distances
    assert float(manifold.dist(m_plain.mean, m_np.mean)) < 1e-10
    # every pass returned a few numbers per chunk, never the data (24 KB per chunk)
    assert seen and max(seen) < 20_000


def _ks_pvalues(a, b, ref):
    """KS p-values of two 1-D views of sphere draws: distance to ``ref`` and azimuth."""
    d_a, d_b = S2.dist(ref, a), S2.dist(ref, b)
    az_a, az_b = np.arctan2(a[:, 1], a[:, 0]), np.arctan2(b[:, 1], b[:, 0])
    return stats.ks_2samp(d_a, d_b).pvalue, stats.ks_2samp(az_a, az_b).pvalue


@pytest.mark.parametrize("mechanism", ["kng", "laplace"])
def test_dask_release_law_equals_in_memory_on_a_cluster(cluster_client, mechanism):
    """Two-sample KS tests (distance to the mean, azimuth), alpha = 0.01 in all
    (Bonferroni: 0.005 each), 1,500 draws per side, seeds 11 (Dask) and 12 (NumPy).
    A mechanism with the wrong rate (epsilon halved) is caught by the same test."""
    size, alpha = 1500, 0.01
    data = _sphere_data(2000, seed=3)
    lazy = da.from_array(data, chunks=(500, 3))
    cls = pmd.KNGMechanism if mechanism == "kng" else pmd.LaplaceMechanism
    mech = cls(S2, epsilon=1.0, center=NORTH, radius=R)
    assert distributed.get_client() is cluster_client  # the passes run on the cluster
    x_dask = mech.sample(lazy, size, random_seed=11)
    x_np = mech.sample(data, size, random_seed=12)
    ref = pmd.frechet_mean(S2, data).mean
    p = _ks_pvalues(x_dask, x_np, ref)
    assert min(p) > alpha / 2, p
    # the test has power: half the budget means twice the spread
    wrong = cls(S2, epsilon=0.5, center=NORTH, radius=R).sample(data, size, random_seed=12)
    assert min(_ks_pvalues(x_dask, wrong, ref)) < alpha / 2
    # one release over the cluster: pure eps-DP, the data's size recorded
    rel = mech.release(lazy, random_seed=5)
    assert rel.delta == 0.0 and rel.n == 2000
    assert S2.dist(rel.value, ref) < 0.05


# --- bad input ----------------------------------------------------------------------------
def _bad(kind):
    data = _sphere_data(2000, seed=4)
    if kind == "nan":
        data[1234, 1] = np.nan
    elif kind == "off-manifold":
        data[1234] *= 1.01
    else:
        data[1234] = [1.0, 0.0, 0.0]  # a quarter circle away: outside B_{pi/8}(north)
        data[1900] = [0.0, 1.0, 0.0]
    return data


@pytest.mark.parametrize(
    ("kind", "error", "words"),
    [
        ("nan", ValueError, "NaN"),
        ("off-manifold", ValueError, "not on the sphere"),
        ("outside", DomainError, "2 of 2000 points lie outside"),
    ],
)
def test_bad_input_over_dask_is_refused_naming_chunk_and_row(kind, error, words):
    data = _bad(kind)
    lazy = da.from_array(data, chunks=(500, 3))  # row 1234 = chunk 2, row 234
    for cls in (pmd.KNGMechanism, pmd.LaplaceMechanism):
        mech = cls(S2, epsilon=1.0, center=NORTH, radius=R)
        with pytest.raises(error) as info:
            mech.release(lazy, random_seed=0)
        msg = str(info.value)
        assert words in msg
        assert "chunk 2, row 234 of the chunk" in msg and "row 1234 overall" in msg
        with pytest.raises(error):  # refused in memory too
            mech.release(data, random_seed=0)


def test_unknown_chunk_sizes_are_refused():
    lazy = da.from_array(_sphere_data(100), chunks=(30, 3))
    lazy = lazy[lazy[:, 2] > -2.0]  # a boolean mask: n is unknown until computed
    with pytest.raises(ValueError, match="chunk sizes are unknown"):
        pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R).release(lazy)


def test_mcmc_samplers_refuse_dask_data():
    lazy = da.from_array(_sphere_data(100), chunks=(30, 3))
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R)
    with pytest.raises(ValueError, match="sampler='exact'"):
        mech.release(lazy, sampler="nuts")


def test_clip_is_lazy_and_matches_in_memory():
    data = _bad("outside")
    dom = pmd.DataDomain(S2, NORTH, R)
    lazy = da.from_array(data, chunks=(500, 3))
    out = dom.check(lazy, clip=True)
    assert reductions.is_dask(out)  # nothing computed beyond the check pass
    expected = dom.check(data, clip=True)
    np.testing.assert_allclose(out.points.compute(), expected, atol=1e-15)
    assert np.all(dom.distances(out.points.compute()) <= R)
    # a clipped release follows the in-memory one's mean
    mean_dask = pmd.frechet_mean(S2, out).mean
    np.testing.assert_allclose(mean_dask, pmd.frechet_mean(S2, expected).mean, atol=1e-10)


# --- fewer passes ---------------------------------------------------------------------------
def test_a_checked_array_is_not_checked_again_and_is_read_only():
    dom = pmd.DataDomain(S2, NORTH, R)
    data = _sphere_data(500)
    checked = dom.check(data)
    assert isinstance(checked, CheckedData) and checked.domain is dom
    assert checked.points is not data and not checked.points.flags.writeable
    assert dom.check(checked) is checked  # no second pass
    summary = reductions.checked_summary(checked, domain=dom)
    assert summary is checked.summary
    # the check pass summed the gradient at the center: compare with a direct sum
    direct = np.mean(S2.log(NORTH, checked.points), axis=0)
    np.testing.assert_allclose(summary.center_gradient, direct, atol=1e-15)
    # another domain (or a copy of the data) is checked anew
    other = pmd.DataDomain(S2, NORTH, R / 2)
    assert reductions.checked_summary(checked, domain=other) is None
    with pytest.raises(DomainError):
        other.check(checked)
    assert reductions.checked_summary(checked.points.copy(), domain=dom) is None


def test_checked_data_is_a_value_trusted_by_what_it_holds_not_by_its_id():
    """Issue 37: no registry keyed by id(). A copy of the record (or one rebuilt from its
    fields, or unpickled) is trusted as the original: no second pass, the same mean;
    the record cannot be changed after the check."""
    dom = pmd.DataDomain(S2, NORTH, R)
    checked = dom.check(_sphere_data(400))
    mean = pmd.frechet_mean(S2, checked).mean
    for twin in (
        copy.copy(checked),
        pickle.loads(pickle.dumps(checked)),
        CheckedData(checked.points, dom, checked.summary),
    ):
        before = reductions.pass_count()
        assert dom.check(twin) is twin
        assert reductions.pass_count() == before  # trusted: no pass
        res = pmd.frechet_mean(S2, twin)
        np.testing.assert_array_equal(res.mean, mean)  # started from the check's gradient
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.summary = None
    # checked data that took the slow path (clipped) are used as a plain array
    clipped = dom.check(_bad("outside"), clip=True)
    assert isinstance(clipped, CheckedData) and not clipped.trusted
    assert reductions.checked_summary(clipped, domain=dom) is None


def test_grad_norms_batch_matches_per_point_log_maps():
    data = _sphere_data(1000)
    xs = S2.exp_coords(NORTH, np.random.default_rng(1).normal(size=(7, 2)) * 0.1)
    direct = S2.norm(xs, np.mean(S2.log(xs[:, None], data[None]), axis=1))
    np.testing.assert_allclose(reductions.grad_norms(S2, xs, data), direct, rtol=1e-12)
    lazy = da.from_array(data, chunks=(300, 3))
    np.testing.assert_allclose(reductions.grad_norms(S2, xs, lazy), direct, rtol=1e-12)


# --- the distance profile fused into the Fréchet passes (issue 26 item 5) --------------------
def _upper_edge_counts(d, edges):
    """Oracle: counts in the bins (edges[k], edges[k+1]] (0 in bin 0), by search."""
    k = np.clip(np.searchsorted(edges, np.minimum(d, edges[-1]), side="left") - 1, 0, None)
    return np.bincount(k, minlength=len(edges) - 1)


def test_bin_counts_put_each_distance_under_its_bins_upper_edge():
    edges = np.linspace(0.0, 0.8, 1025)
    rng = np.random.default_rng(0)
    # random distances, every edge itself, its neighbours one ulp away, 0 and beyond the cap
    d = np.concatenate(
        [rng.uniform(0, 0.9, 20_000), edges, np.nextafter(edges, 1), np.nextafter(edges, -1)]
    )
    d = np.concatenate([np.abs(d), [0.0, 5.0]])
    counts = reductions.gradients._bin_counts(d, edges)
    np.testing.assert_array_equal(counts, _upper_edge_counts(d, edges))
    assert counts.sum() == len(d)
    # the oracle catches a histogram with left-closed bins (np.histogram's convention)
    assert not np.array_equal(np.histogram(np.minimum(d, 0.8), bins=edges)[0], counts)


def _spy_passes(monkeypatch):
    """The labels of the Dask passes run from here on, in order."""
    labels = []
    run_pass = reductions.passes._run_pass

    def spy(d, fn, label, *a):
        labels.append(label)
        return run_pass(d, fn, label, *a)

    monkeypatch.setattr(reductions.passes, "_run_pass", spy)
    return labels


def test_fused_distance_profile_equals_the_separate_pass(monkeypatch):
    """A Fréchet pass given a ``DistanceProfile`` bins the distances from its point: the
    profile at that point is then the separate pass's, to the count, without a pass."""
    data = _sphere_data(6000, seed=5)
    dom = pmd.DataDomain(S2, NORTH, R)
    checked = dom.check(da.from_array(data, chunks=(1300, 3)))
    x = S2.exp_coords(NORTH, np.array([0.01, -0.02]))
    top = 2 * R
    separate = reductions.distance_profile(S2, x, checked, top)
    labels = _spy_passes(monkeypatch)
    profile = reductions.DistanceProfile(checked, top)
    g_fused = reductions.frechet_gradient(S2, x, checked, profile=profile)
    fused = reductions.distance_profile(S2, x, checked, top, profile=profile)
    other = reductions.distance_profile(S2, NORTH, checked, top, profile=profile)  # no pass there
    assert labels == ["Fréchet gradient and distances", "distances"]
    np.testing.assert_array_equal(fused[0], separate[0])
    np.testing.assert_array_equal(fused[1], separate[1])
    # the oracle: distances by the arccos route, binned by search
    edges = np.linspace(0.0, top, 1025)
    np.testing.assert_allclose(fused[1] * len(data), _upper_edge_counts(S2.dist(x, data), edges))
    np.testing.assert_allclose(
        other[1] * len(data), _upper_edge_counts(S2.dist(NORTH, data), edges)
    )
    # the gradient is the plain pass's, bit for bit
    g_plain = reductions.frechet_gradient(S2, x, checked)
    np.testing.assert_array_equal(g_fused[0], g_plain[0])
    assert g_fused[1] == g_plain[1]


def test_each_profile_carries_the_counts_of_its_own_data(monkeypatch):
    """The counts travel in the caller's ``DistanceProfile``, tied to one array: two data
    sets profiled interleaved at the same point each get their own counts; a profile
    handed another array (even an equal one) or no profile at all means a separate pass."""
    top = 2 * R
    dom = pmd.DataDomain(S2, NORTH, R)
    raw = [_sphere_data(5000, seed=8), _sphere_data(5000, seed=9)]
    checked = [dom.check(da.from_array(d, chunks=(1200, 3))) for d in raw]
    x = S2.exp_coords(NORTH, np.array([0.02, 0.01]))  # the same point for both
    edges = np.linspace(0.0, top, 1025)
    oracle = [_upper_edge_counts(S2.dist(x, d), edges) / len(d) for d in raw]
    # the oracle tells the data sets apart: counts keyed by the point alone would show
    assert not np.array_equal(oracle[0], oracle[1])
    profiles = [reductions.DistanceProfile(c, top) for c in checked]
    labels = _spy_passes(monkeypatch)
    for c, p in zip(checked, profiles, strict=True):  # both passes, then the reads
        reductions.frechet_gradient(S2, x, c, profile=p)
    got = [
        reductions.distance_profile(S2, x, c, top, profile=p)
        for c, p in zip(checked, profiles, strict=True)
    ]
    assert labels == ["Fréchet gradient and distances"] * 2  # no distances pass
    for (_, w), want in zip(got, oracle, strict=True):
        np.testing.assert_allclose(w, want, rtol=0, atol=1e-15)
    assert [len(p.counts) for p in profiles] == [1, 1]
    # the wrong profile, an equal array checked anew, or no profile: a pass of its own
    labels.clear()
    crossed = reductions.distance_profile(S2, x, checked[0], top, profile=profiles[1])
    again = dom.check(da.from_array(raw[0], chunks=(1200, 3)))
    anew = reductions.distance_profile(S2, x, again, top, profile=profiles[0])
    plain = reductions.distance_profile(S2, x, checked[0], top)
    assert labels == ["distances", "data check", "distances", "distances"], labels
    for _, w in (crossed, anew, plain):
        np.testing.assert_allclose(w, oracle[0], rtol=0, atol=1e-15)


def test_a_frechet_mean_given_a_profile_bins_every_pass_and_is_the_same_mean(monkeypatch):
    dom = pmd.DataDomain(S2, NORTH, R)
    data = _sphere_data(4000, seed=10)
    checked = dom.check(da.from_array(data, chunks=(900, 3)))
    labels = _spy_passes(monkeypatch)
    plain = pmd.frechet_mean(S2, checked)
    plain_labels = list(labels)
    assert plain_labels and not any("distances" in lab for lab in plain_labels)
    labels.clear()
    profile = reductions.DistanceProfile(checked, 2 * R)
    fused = pmd.frechet_mean(S2, checked, profile=profile)
    assert labels == [lab + " and distances" for lab in plain_labels]
    assert len(profile.counts) == len(plain_labels)  # one entry per pass, at its point
    np.testing.assert_array_equal(fused.mean, plain.mean)
    assert (fused.iterations, fused.grad_norm) == (plain.iterations, plain.grad_norm)
    labels.clear()
    _, w = reductions.distance_profile(S2, fused.mean, checked, 2 * R, profile=profile)
    assert labels == []  # the last pass was at the mean
    edges = np.linspace(0.0, 2 * R, 1025)
    np.testing.assert_allclose(
        w * len(data), _upper_edge_counts(S2.dist(fused.mean, data), edges), atol=1e-9
    )


def test_a_clipped_kng_mean_bins_its_gradient_pass_and_releases_the_separate_pass_draws(
    monkeypatch,
):
    """A mean computed outside the ball is clipped; the gradient pass at the clipped
    mean then bins the distances, and the draws are those of the separate pass."""
    from pymc_manidp.laws import exact
    from pymc_manidp.laws.exact import kng_mean

    dom = pmd.DataDomain(S2, NORTH, R)
    edge = S2.exp(NORTH, np.array([0.95 * R, 0.0, 0.0]))
    data = generators.sphere_cap(3000, radius=0.01, center=edge, random_seed=11)
    checked = dom.check(da.from_array(data, chunks=(1000, 3)))
    real = kng_mean.frechet_mean

    def outside(M, d, **kw):  # push the computed mean just beyond the ball
        res = real(M, d, **kw)
        v = S2.log(NORTH, res.mean)
        return dataclasses.replace(res, mean=S2.exp(NORTH, v / S2.norm(NORTH, v) * 1.001 * R))

    monkeypatch.setattr(kng_mean, "frechet_mean", outside)
    labels = _spy_passes(monkeypatch)
    fused = exact.sample_kng(S2, checked, 0.05, 5, rng=1, domain=dom)
    assert labels[1] == "gradients at 1 points and distances" and "distances" not in labels
    # the same release with the profile's counts never read: the separate pass
    labels.clear()
    monkeypatch.setattr(reductions.DistanceProfile, "_counts_at", lambda *a: None)
    separate = exact.sample_kng(S2, checked, 0.05, 5, rng=1, domain=dom)
    assert labels[2] == "distances"
    np.testing.assert_array_equal(fused.points, separate.points)
    assert fused.info == separate.info


def test_a_dask_kng_release_reads_the_data_without_a_distance_pass(monkeypatch):
    data = _sphere_data(3000, seed=6)
    lazy = da.from_array(data, chunks=(1000, 3))
    mech = pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R)
    labels = _spy_passes(monkeypatch)
    rel = mech.release(lazy, random_seed=3)
    assert rel.delta == 0.0 and rel.n == 3000
    assert labels[0] == "data check" and "distances" not in labels
    fre = [lab for lab in labels[1:] if not lab.startswith("gradients at")]
    # every Fréchet pass (a gradient, or a Newton step's gradient and Hessian) binned
    # its distances: the mean's profile cost no pass
    assert fre and all(
        lab in ("Fréchet gradient and distances", "Fréchet gradient and Hessian and distances")
        for lab in fre
    ), fre
    # then the proposals: the first pass evaluates one (the local envelope accepts
    # nearly all), later ones as many as the acceptance rate seen asks for
    assert labels[len(fre) + 1] == "gradients at 1 points"


def test_frechet_gradient_distances_generic_and_sphere_routes_agree():
    data = _sphere_data(500, seed=7)
    x = S2.exp_coords(NORTH, np.array([0.05, 0.02]))
    w = np.full(len(data), 1 / len(data))
    g, e, rho = S2.frechet_gradient_distances(x, data, w)
    g0, e0 = S2.frechet_gradient(x, data, w)
    np.testing.assert_array_equal(g, g0)
    assert e == e0
    np.testing.assert_allclose(rho, S2.dist(x, data), rtol=0, atol=1e-13)
    # the base class's generic route (log maps and their norms) gives the same numbers
    gb, eb, rb = pmd.geometry.base.ManifoldBase.frechet_gradient_distances(S2, x, data, w)
    np.testing.assert_allclose(gb, g, atol=1e-15)
    np.testing.assert_allclose(rb, rho, atol=1e-13)
    assert abs(eb - e) < 1e-15
