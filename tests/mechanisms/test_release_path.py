"""A release is one straight line: Δ, σ and the data's Fréchet mean computed once.

The counts are taken by wrapping ``stats.frechet.frechet_mean`` in every module that
imported it, and the mechanisms' ``sensitivity`` and the σ rule
(``calibrated_sigma``) with counters. Before the release path was folded into the
mechanism base (issue 22), measured with these counters on the nutpie backend, an
exact release took the mean once, the sensitivity 3 times and σ twice; a NUTS release
the mean 3 times (KNG; Laplace 2), the sensitivity 4 times and σ 3 times. Expecting 1
of each fails if any layer recomputes them. Also here: the deprecated names
(``scale``), the one MCMC settings value and the Calibration a Release records.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings

import numpy as np
import pytest

import pymc_manidp as pmd
from pymc_manidp import mcmc
from pymc_manidp.mechanisms import base
from pymc_manidp.stats import frechet

S2 = pmd.Sphere(dim=2)
NORTH = np.array([0.0, 0.0, 1.0])
R8 = np.pi / 8
DATA = S2.exp_coords(NORTH, np.random.default_rng(0).normal(size=(40, 2)) * 0.1)
MECHS = {
    "laplace": lambda: pmd.LaplaceMechanism(S2, epsilon=1.0, center=NORTH, radius=R8),
    "kng": lambda: pmd.KNGMechanism(S2, epsilon=1.0, center=NORTH, radius=R8),
}


@pytest.fixture
def counts(monkeypatch):
    """Counters of Fréchet means, sensitivities and σ rules, wrapped where used."""
    tally = {"frechet_mean": 0, "sensitivity": 0, "sigma": 0}
    original = frechet.frechet_mean

    def counted_mean(*args, **kwargs):
        tally["frechet_mean"] += 1
        return original(*args, **kwargs)

    for name, mod in list(sys.modules.items()):
        if name.startswith("pymc_manidp") and getattr(mod, "frechet_mean", None) is original:
            monkeypatch.setattr(mod, "frechet_mean", counted_mean)
    for cls in (pmd.LaplaceMechanism, pmd.KNGMechanism):
        own = cls.sensitivity

        def counted_sensitivity(self, n, _own=own):
            tally["sensitivity"] += 1
            return _own(self, n)

        monkeypatch.setattr(cls, "sensitivity", counted_sensitivity)
    rule = base.calibrated_sigma

    def counted_rule(*args, **kwargs):
        tally["sigma"] += 1
        return rule(*args, **kwargs)

    monkeypatch.setattr(base, "calibrated_sigma", counted_rule)
    return tally


@pytest.mark.parametrize("kind", sorted(MECHS))
def test_one_mean_one_sensitivity_one_sigma_per_release(kind, counts):
    mech = MECHS[kind]()
    rel = mech.release(DATA, random_seed=1)
    assert counts == {"frechet_mean": 1, "sensitivity": 1, "sigma": 1}, "exact"
    assert rel.calibration == mech.calibrate(40)
    counts.update(frechet_mean=0, sensitivity=0, sigma=0)
    # a NUTS release that compiles its model, then one that reuses it (other data)
    short = mcmc.MCMCSettings(draws=50, tune=50, chains=2)
    kw = dict(sampler="nuts", settings=short, skip_diagnostics=True)
    mech.release(DATA, random_seed=2, **kw)
    assert counts == {"frechet_mean": 1, "sensitivity": 1, "sigma": 1}, "NUTS, compiling"
    counts.update(frechet_mean=0, sensitivity=0, sigma=0)
    rel = mech.release(DATA[::-1].copy(), random_seed=3, **kw)
    assert counts == {"frechet_mean": 1, "sensitivity": 1, "sigma": 1}, "NUTS, cached"
    assert rel.sigma == mech.sigma(40) and rel.n == 40


@pytest.mark.parametrize("kind", sorted(MECHS))
def test_the_chains_start_one_sigma_from_the_mode(kind):
    """The polar model's start comes from its pm.Data (no distribution recomputes the
    mode): one σ from the data's Fréchet mean, computed here independently."""
    mech = MECHS[kind]()
    model = mech.model(DATA)
    point = model.compile_fn(model.replace_rvs_by_values([model["release"]]))(model.initial_point())
    mean = pmd.frechet_mean(S2, DATA, tol=1e-12).mean
    assert S2.dist(mean, point) == pytest.approx(mech.sigma(40), rel=1e-6)


def test_sample_returns_its_rejection_statistics():
    """Issue 37: the statistics come back with the draws, not as state on the
    long-lived mechanism."""
    kng = MECHS["kng"]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draws, info = kng.sample(DATA, 6, random_seed=3, return_info=True)
    np.testing.assert_array_equal(draws, kng.sample(DATA, 6, random_seed=3))
    assert info["proposals"] >= 6 and 0 < info["acceptance_rate"] <= 1
    with pytest.raises(TypeError, match="return_info must be True or False"):
        kng.sample(DATA, 6, random_seed=3, return_info="yes")
    assert not any("info" in key for key in vars(kng))  # nothing kept on the object


def test_a_subclass_overriding_sigma_sets_the_released_sigma():
    class Third(pmd.LaplaceMechanism):
        def sigma(self, n):
            return super().sigma(n) / 3

    mech = Third(S2, epsilon=1.0, center=NORTH, radius=R8)
    full = MECHS["laplace"]().sigma(40)
    assert mech.release(DATA, random_seed=0).sigma == pytest.approx(full / 3)


# --- one MCMC settings value --------------------------------------------------------------
def test_mcmc_settings_have_one_set_of_defaults_and_are_checked():
    s = mcmc.MCMCSettings()
    assert (s.chains, s.tune, s.draws) == (4, 1000, 1000)  # PyMC's pm.sample defaults
    assert s.with_overrides(draws=None) is s
    assert s.with_overrides(chains=2) == mcmc.MCMCSettings(chains=2)
    for bad, exc, msg in [
        (dict(chains=1), ValueError, r"chains must be an integer >= 2"),
        (dict(draws=0), ValueError, r"draws must be an integer >= 1"),
        (dict(tune=-1), ValueError, r"tune must be an integer >= 0"),
        (dict(draws=10.5), TypeError, "draws must be an integer"),
        (dict(target_accept=1.0), ValueError, r"target_accept must lie in \(0, 1\)"),
        (dict(backend="stan"), ValueError, "backend must be one of"),
    ]:
        with pytest.raises(exc, match=msg):
            mcmc.MCMCSettings(**bad)
    with pytest.raises(TypeError, match="unknown MCMC settings"):
        s.with_overrides(warmup=10)
    with pytest.raises(TypeError, match="settings must be an MCMCSettings"):
        MECHS["kng"]().release(DATA, sampler="nuts", settings={"draws": 10})


def test_the_settings_reach_the_run_and_are_its_only_length():
    mech = MECHS["laplace"]()
    rel = mech.release(
        DATA,
        sampler="nuts",
        settings=mcmc.MCMCSettings(draws=40, tune=20, chains=3),
        random_seed=1,
        skip_diagnostics=True,
    )
    post = rel.diagnostics.posterior
    assert (post.sizes["chain"], post.sizes["draw"]) == (3, 40)
    rel = mech.release(DATA, sampler="nuts", random_seed=1, skip_diagnostics=True)
    post = rel.diagnostics.posterior
    assert (post.sizes["chain"], post.sizes["draw"]) == (4, 1000)  # the one default
    # issue 37 item 8: how long a run samples is one MCMCSettings, no keyword beside it
    for old in ("draws", "tune", "chains"):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'"):
            mech.release(DATA, sampler="nuts", random_seed=1, **{old: 10})


@pytest.mark.parametrize("sampler", ["exact", "nuts"])
def test_the_release_path_gets_one_frozen_request(sampler, monkeypatch):
    """The checked arguments go down as one ReleaseRequest (issue 37 item 8): the
    calibration computed before the charge, the settings only for MCMC."""
    from pymc_manidp.mechanisms.request import ReleaseRequest

    mech = MECHS["kng"]()
    seen = []
    monkeypatch.setattr(mech, "_release_checked", lambda data, request: seen.append(request))
    settings = mcmc.MCMCSettings(draws=50, chains=2)
    mech.release(DATA, sampler=sampler, settings=settings, random_seed=4, clip=True)
    (req,) = seen
    assert isinstance(req, ReleaseRequest) and req.sampler == sampler
    assert req.calibration == mech.calibrate(len(DATA))
    assert req.settings == (settings if sampler == "nuts" else None)
    assert req.is_mcmc == (sampler == "nuts")
    assert (req.clip, req.project, req.seed_policy, req.notes) == (True, False, "fixed seed", ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.clip = False


def test_the_calibration_is_recorded():
    mech = pmd.LaplaceMechanism(S2, epsilon=0.5, center=NORTH, radius=R8, restrict=True)
    cal = mech.calibrate(40)
    # restricted Laplace: sigma = 2 Delta / eps (2021 Thm 3), Delta from Thm 2 widened
    assert cal.sigma == pytest.approx(2 * cal.sensitivity / 0.5)
    assert cal.sensitivity == pytest.approx(mech.sensitivity(40))
    rel = mech.release(DATA, random_seed=0)
    assert rel.calibration == cal
    public = rel.public()
    assert (public["n"], public["sensitivity"], public["sigma"]) == (
        cal.n,
        cal.sensitivity,
        cal.sigma,
    )
    with pytest.raises(TypeError, match="n must be an integer"):
        mech.calibrate(4.0)


def test_an_instance_level_sigma_is_the_sigma_released():
    """A sigma patched on the instance (as on a class) is the one drawn with and recorded."""
    S = pmd.Sphere(dim=2)
    mech = pmd.KNGMechanism(S, epsilon=1.0, center=[0.0, 0.0, 1.0], radius=0.3)
    data = S.exp_coords([0.0, 0.0, 1.0], np.random.default_rng(0).normal(size=(40, 2)) * 0.05)
    mech.sigma = lambda n: 0.123
    assert mech.release(data, random_seed=0).sigma == 0.123


def test_the_halved_sigma_needs_a_manifold_that_vouches_for_homogeneity():
    """sigma = Delta/eps (2021 Thm 1) holds on a homogeneous space only: a subclass that
    may have changed the geometry and does not say ``homogeneous = True`` gets 2 Delta/eps."""

    class Warped(pmd.Sphere):
        pass

    kw = dict(epsilon=1.0, center=[0.0, 0.0, 1.0], radius=0.3)
    shipped = pmd.LaplaceMechanism(pmd.Sphere(dim=2), **kw)
    warped = pmd.LaplaceMechanism(Warped(dim=2), **kw)
    assert shipped.sigma(50) == shipped.sensitivity(50) / 1.0
    assert warped.sigma(50) == 2 * warped.sensitivity(50) / 1.0
    for M in (pmd.Sphere(dim=2), pmd.SPD(k=2), pmd.KendallShape(k_landmarks=4), pmd.Euclidean(3)):
        assert M.homogeneous
    assert not Warped(dim=2).homogeneous and not Warped(dim=2).exact_sampling
