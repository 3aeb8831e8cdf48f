"""Generators' laws (2021 supplement §1.2.1, §1.3.1) and the packaged real datasets."""

from __future__ import annotations

import importlib.util
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import pymc_manidp as pmd
from pymc_manidp.datasets import (
    load_cells,
    load_cities,
    resample_closed,
    sphere_cap,
    uniform_radius_ball,
    unit_to_latlon,
    wishart_in_ball,
)

ALPHA = 0.01
ROOT = Path(__file__).resolve().parents[2]


# --- sphere cap -----------------------------------------------------------------------
def _polar_pvalue(x, r):
    return stats.kstest(np.arccos(np.clip(x[:, 2], -1, 1)), stats.uniform(0, r).cdf).pvalue


def test_sphere_cap_polar_angle_uniform():
    """Polar angle ~ U[0, pi/8] and azimuth ~ U[0, 2pi): KS, n = 3000, alpha = 0.01."""
    r = np.pi / 8
    x = sphere_cap(3000, random_seed=11)
    assert x.shape == (3000, 3) and x.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
    assert _polar_pvalue(x, r) > ALPHA
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    assert stats.kstest(phi, stats.uniform(0, 2 * np.pi).cdf).pvalue > ALPHA


def test_polar_ks_rejects_area_uniform_cap():
    """Wrong variant: the area-uniform cap (cos theta uniform) fails the same KS test."""
    r = np.pi / 8
    rng = np.random.default_rng(11)
    cos_t = rng.uniform(np.cos(r), 1.0, 3000)
    phi = rng.uniform(0, 2 * np.pi, 3000)
    s = np.sqrt(1 - cos_t**2)
    x = np.stack([s * np.cos(phi), s * np.sin(phi), cos_t], axis=1)
    assert _polar_pvalue(x, r) < 1e-6


def test_sphere_cap_other_center_and_radius():
    c = np.array([1.0, 2.0, -2.0]) / 3.0
    x = sphere_cap(2000, radius=0.5, center=c, random_seed=3)
    t = np.arccos(np.clip(x @ c, -1, 1))
    assert t.max() <= 0.5 + 1e-12
    assert stats.kstest(t, stats.uniform(0, 0.5).cdf).pvalue > ALPHA


def test_uniform_radius_ball_kendall_distance_uniform():
    """Kendall shapes: distance to the center ~ U[0, r] (KS, n = 1500, alpha = 0.01)."""
    K = pmd.KendallShape(k_landmarks=6)
    m0 = K.validate(np.array([[np.cos(a), np.sin(a)] for a in np.linspace(0, 5, 6)]))
    x = uniform_radius_ball(K, 1500, center=m0, radius=0.35, random_seed=5)
    assert x.shape == (1500, 6, 2)
    d = K.dist(m0, x)
    assert stats.kstest(d, stats.uniform(0, 0.35).cdf).pvalue > ALPHA


def test_generators_reproducible_and_checked():
    np.testing.assert_array_equal(sphere_cap(5, random_seed=1), sphere_cap(5, random_seed=1))
    with pytest.raises(TypeError, match="random_seed"):
        sphere_cap(5, random_seed="1")
    with pytest.raises(TypeError, match="Sphere"):
        sphere_cap(5, sphere=pmd.SPD(k=2))
    with pytest.raises(ValueError, match="injectivity"):
        sphere_cap(5, radius=4.0)
    with pytest.raises(ValueError, match="df"):
        wishart_in_ball(5, k=3, df=1.5)


# --- Wishart in the ball --------------------------------------------------------------
def _ai_dist_to_identity(x):
    w = np.linalg.eigvalsh(x)
    return np.sqrt(np.sum(np.log(w) ** 2, axis=-1))


def _reference_wishart(n, rng, k=2, df=2):
    """Independent: X = G G^T with df columns N(0, I/k), no ball condition."""
    g = rng.normal(scale=np.sqrt(1.0 / k), size=(n, k, df))
    return g @ np.swapaxes(g, -1, -2)


def test_wishart_in_ball_support_and_shape():
    x = wishart_in_ball(400, random_seed=2)
    assert x.shape == (400, 2, 2) and x.dtype == np.float64
    np.testing.assert_array_equal(x, np.swapaxes(x, -1, -2))
    assert np.all(np.linalg.eigvalsh(x) > 0)
    assert np.all(_ai_dist_to_identity(x) < 1.5)
    pmd.DataDomain(pmd.SPD(k=2), np.eye(2), 1.5).check(x)  # the library agrees


def test_wishart_in_ball_law_matches_conditioned_reference():
    """Two-sample KS (n = 2000 each, alpha = 0.01) on the trace and the distance to I.

    The reference is an independent G G^T Wishart sampler conditioned on the ball; the
    unconditioned Wishart (wrong variant: rejection step missing) must be rejected.
    """
    x = wishart_in_ball(2000, random_seed=4)
    ref = _reference_wishart(20000, np.random.default_rng(9))
    ref_in = ref[_ai_dist_to_identity(ref) < 1.5][:2000]
    assert len(ref_in) == 2000
    for f in (lambda a: np.trace(a, axis1=1, axis2=2), _ai_dist_to_identity):
        assert stats.ks_2samp(f(x), f(ref_in)).pvalue > ALPHA
    wrong = ref[:2000]
    assert stats.ks_2samp(_ai_dist_to_identity(x), _ai_dist_to_identity(wrong)).pvalue < 1e-6


@pytest.mark.parametrize(
    "k, df, scale",
    [
        (2, 2.0, np.eye(2) / 2),
        (3, 3.5, np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])),
    ],
)
def test_wishart_draws_are_scipys_bit_for_bit(k, df, scale):
    """The batched Bartlett draw makes scipy's Wishart variates, the same bits from the
    same generator (scipy is the oracle); a transposed factor (AᵀA, the wrong variant
    of the construction) has the same law's support but other matrices."""
    from scipy import linalg

    from pymc_manidp.datasets.generators import _wishart_rvs

    chol = linalg.cholesky(scale, lower=True)
    ours = _wishart_rvs(500, k, df, chol, np.random.default_rng(3))
    ref = stats.wishart(df=df, scale=scale).rvs(size=500, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(ours, ref)
    a = np.linalg.cholesky(ours)  # lower: C A with A lower triangular
    wrong = np.swapaxes(a, -1, -2) @ a
    assert not np.allclose(wrong, ref)


# --- cells ----------------------------------------------------------------------------
def _signed_area(x):
    return 0.5 * np.sum(
        x[..., 0] * np.roll(x[..., 1], -1, -1) - np.roll(x[..., 0], -1, -1) * x[..., 1], -1
    )


def test_cells_load_and_validate():
    cells = load_cells()
    assert cells.landmarks.shape == (650, 64, 2) and cells.landmarks.dtype == np.float64
    assert dict(zip(*np.unique(cells.cell_line, return_counts=True), strict=True)) == {
        "dlm8": 258,
        "dunn": 392,
    }
    assert dict(zip(*np.unique(cells.treatment, return_counts=True), strict=True)) == {
        "control": 318,
        "cytd": 175,
        "jasp": 157,
    }
    np.testing.assert_allclose(cells.landmarks.mean(axis=1), 0.0, atol=1e-2)
    assert np.all(_signed_area(cells.landmarks) > 0)  # counter-clockwise
    z = pmd.KendallShape(k_landmarks=64).validate(cells.landmarks)
    np.testing.assert_allclose(np.sum(z**2, axis=(1, 2)), 1.0)
    np.testing.assert_allclose(z.sum(axis=1), 0.0, atol=1e-12)


def test_cells_equal_arc_length_spacing():
    """Stored landmarks are equally spaced in arc length: chords <= spacing, and close."""
    land = load_cells().landmarks
    chords = np.linalg.norm(np.roll(land, -1, axis=1) - land, axis=-1)
    rel = chords / chords.mean(axis=1, keepdims=True)
    assert np.median(rel) > 0.97  # chords equal the spacing on straight stretches


@pytest.mark.parametrize("k", [3, 8, 20])
def test_cells_resampled_k(k):
    land = load_cells(k_landmarks=k).landmarks
    assert land.shape == (650, k, 2)
    pmd.KendallShape(k_landmarks=k).validate(land)


def test_cells_bad_k():
    with pytest.raises(ValueError, match="between 3 and 64"):
        load_cells(k_landmarks=65)
    with pytest.raises(TypeError):
        load_cells(k_landmarks=8.0)


def test_resample_closed_circle_equal_chords():
    a = np.sort(np.random.default_rng(0).uniform(0, 2 * np.pi, 500))
    a[0] = 0.0
    poly = np.stack([np.cos(a), np.sin(a)], axis=1)
    out = resample_closed(poly, 12)
    np.testing.assert_array_equal(out[0], poly[0])  # the start point is kept
    chords = np.linalg.norm(np.roll(out, -1, axis=0) - out, axis=1)
    np.testing.assert_allclose(chords, chords.mean(), rtol=2e-3)


def _derive_cells_module():
    spec = importlib.util.spec_from_file_location("derive_cells", ROOT / "scripts/derive_cells.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_derivation_start_point_moves_with_the_cell():
    """Rotating and translating a contour rotates the derived landmarks (same labels)."""
    dc = _derive_cells_module()
    s = np.linspace(0, 2 * np.pi, 300, endpoint=False)
    contour = np.stack([3 * np.cos(s) + 0.4 * np.cos(2 * s), np.sin(s)], axis=1)
    c, si = np.cos(1.1), np.sin(1.1)
    rot = np.array([[c, -si], [si, c]])
    a = dc.resample(contour, 16)
    b = dc.resample(contour @ rot.T + [5.0, -7.0], 16)
    np.testing.assert_allclose(b, a @ rot.T, atol=1e-9)


# --- cities ---------------------------------------------------------------------------
def test_cities_on_unit_sphere():
    cities = load_cities()
    n = len(cities.name)
    assert n == 1183 and cities.points.shape == (n, 3)
    np.testing.assert_allclose(np.linalg.norm(cities.points, axis=1), 1.0, atol=1e-12)
    pmd.Sphere(dim=2).validate(cities.points)
    lat, lon = unit_to_latlon(cities.points)
    np.testing.assert_allclose(lat, cities.latitude, atol=1e-9)
    np.testing.assert_allclose(lon, cities.longitude, atol=1e-9)
    assert np.all(cities.population >= 500_000)
    paris = cities.latitude[(cities.name == "Paris") & (cities.country == "FR")]
    assert paris.shape == (1,) and abs(paris[0] - 48.85) < 0.1


def test_cities_by_continent():
    eu = load_cities("EU")
    assert len(eu.name) == 118 and set(eu.continent.tolist()) == {"EU"}
    with pytest.raises(ValueError, match="continent must be one of"):
        load_cities("XX")


# --- packaging ------------------------------------------------------------------------
def test_data_files_small_and_licensed():
    data = resources.files("pymc_manidp.datasets").joinpath("data")
    for name in ("cells.npz", "cities.csv"):
        assert len(data.joinpath(name).read_bytes()) < 200_000
    lic = data.joinpath("LICENSES.md").read_text("utf-8")
    for needle in ("geomstats", "MIT", "GeoNames", "CC BY 4.0", "Nina Miolane"):
        assert needle in lic
