"""A bad leapfrog step is a divergence, never an exception; draws compile without warnings.

Issue 28: PyMC's NUTS on SPD(3) stopped with ``ZeroDivisionError``. A step far out in
the polar chart (log-radius s = 5.37, an SPD point at distance 64 from the footpoint)
makes ``exp`` of the tangent vector so ill-conditioned that the eigenvalues of the
matrix the log-density takes the logarithm of come out as ``[-2^31, 3.7e25, 0]``; the
Daleckii-Krein divided difference of ``log`` at the zero eigenvalue divided by
zero in a numba kernel compiled with numba's default error model (Python's: raise).
The kernels now use NumPy's (``inf``/``nan``): the log-density is ``nan`` there, which
PyMC and nutpie count as a divergence. The oracle is the captured point itself, the
kernel inputs it produced, and seeded runs of the original report.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry._numba.sym_kernels import FUNC_CODES, sym_function_pullback_eig

# the unconstrained point (z, s) of the polar chart where PyMC's NUTS stopped with
# ZeroDivisionError (SPD(3), footpoint I, sigma 0.3, pm.sample(300, tune=300, chains=1,
# nuts_sampler="pymc", random_seed=2), captured at the failing leapfrog step)
BAD_STEP = np.array(
    [
        -0.0005374055926638765,
        1.242218030969732,
        -0.09791834973243611,
        1.9460050524866974,
        0.095230976478745,
        -0.2894271497746983,
        5.365053842995581,
    ]
)
OBJECT_MODE = "Numba will use object mode"


def _spd3_model():
    with pm.Model() as model:
        pmd.ManifoldLaplace("x", pmd.SPD(k=3), np.eye(3), 0.3)
    return model


@pytest.mark.parametrize("func", ["log", "sqrt", "invsqrt"])
def test_kernel_pullback_at_a_zero_eigenvalue_is_not_an_exception(func):
    # the kernel inputs at the failing step had a zero (and a negative) eigenvalue: f'(0)
    # divides by zero for log, sqrt and invsqrt. Before the fix: ZeroDivisionError
    w = np.array([-(2.0**31), 3.655290513758206e25, 0.0])
    out = sym_function_pullback_eig(w, np.eye(3), np.ones((3, 3)), FUNC_CODES[func])
    assert out.shape == (3, 3)
    assert not np.all(np.isfinite(out))  # the bad point shows as inf/nan, for the sampler
    # a positive spectrum stays finite (the change touched only the failure mode)
    ok = sym_function_pullback_eig(np.array([0.5, 1.0, 2.0]), np.eye(3), np.ones((3, 3)), 1)
    assert np.all(np.isfinite(ok))


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE"], ids=["numba", "python"])
def test_compiled_logp_at_the_failing_step_is_not_finite(mode):
    # PyMC's logp-and-gradient function (numba backend, PyMC's default; and the Python
    # linker, which calls the Ops' perform) at the captured step: nan, not an exception
    func = _spd3_model().logp_dlogp_function(ravel_inputs=True, mode=mode)
    func.set_extra_values({})
    logp, grad = func._pytensor_function(BAD_STEP)
    assert not np.isfinite(logp)
    assert grad.shape == BAD_STEP.shape


def test_draws_and_pymc_nuts_on_spd3_emit_no_object_mode_warning():
    # the random variable Ops run their exact samplers in Python under the NUMBA
    # backend by design (laws/distributions.py); PyTensor's generic fallback warned at
    # every compilation. A short PyMC NUTS run, pm.draw and a predictive draw: none.
    # The check can fail: PyTensor's fallback on an Op of our own still warns.
    from pytensor.link.numba.dispatch.basic import generate_fallback_impl

    model = _spd3_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = pm.sample(
            10,
            tune=10,
            chains=1,
            nuts_sampler="pymc",
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
            model=model,
        )
        pm.draw(pmd.ManifoldLaplace.dist(pmd.SPD(k=3), np.eye(3), 0.3), random_seed=1)
        pm.draw(pmd.ManifoldUniform.dist(pmd.Sphere(dim=2), size=2), random_seed=1)
        pm.sample_posterior_predictive(idata, model=model, progressbar=False)
    assert not [w for w in caught if OBJECT_MODE in str(w.message)]
    rv = pmd.ManifoldLaplace.dist(pmd.SPD(k=3), np.eye(3), 0.3)
    with pytest.warns(UserWarning, match=OBJECT_MODE):
        generate_fallback_impl(rv.owner.op, node=rv.owner)


@pytest.mark.slow
@pytest.mark.parametrize("sigma, seed", [(0.3, 2), (0.5, 2), (0.3, 5)])
def test_pymc_nuts_on_spd3_runs_through_bad_steps(sigma, seed):
    # the reproduction (seed 2 stopped with ZeroDivisionError): it now runs to
    # the end; far steps are divergences, counted in the sample stats
    with pm.Model() as model:
        pmd.ManifoldLaplace("x", pmd.SPD(k=3), np.eye(3), sigma)
    idata = pm.sample(
        300,
        tune=300,
        chains=1,
        nuts_sampler="pymc",
        random_seed=seed,
        progressbar=False,
        compute_convergence_checks=False,
        model=model,
    )
    assert idata.posterior["x"].shape == (1, 300, 3, 3)
    assert np.all(np.isfinite(idata.posterior["x"].values))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["S2", "SPD2", "SPD3", "SPD5", "Kendall4", "R3", "S1(R=2)"])
def test_extreme_chart_points_give_no_exception_on_any_manifold(name):
    # the polar chart's extremes on every manifold, PyTensor's default (NUMBA) backend:
    # log-radius from -745 (t underflows to 0) to 1e308 (overflows), directions zero,
    # tiny and huge, and non-finite values. Every evaluation returns (no exception),
    # and a finite log-density comes with a finite gradient
    from tests.geometry.contract import random_point

    M = {
        "S2": pmd.Sphere(dim=2),
        "SPD2": pmd.SPD(k=2),
        "SPD3": pmd.SPD(k=3),
        "SPD5": pmd.SPD(k=5),
        "Kendall4": pmd.KendallShape(k_landmarks=4),
        "R3": pmd.Euclidean(dim=3),
        "S1(R=2)": pmd.Sphere(dim=1, radius=2.0),
    }[name]
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        pmd.ManifoldLaplace("x", M, random_point(M, rng), 0.3)
    func = model.logp_dlogp_function(ravel_inputs=True)
    func.set_extra_values({})
    size = next(iter(model.initial_point().values())).size
    points = [np.full(size, v) for v in (np.nan, np.inf, -np.inf)]
    for s in (-745.0, -50.0, 0.0, 5.4, 50.0, 700.0, 1e308):
        for z in (rng.standard_normal(size - 1), np.zeros(size - 1), np.full(size - 1, 1e-300)):
            points.append(np.append(z, s) if M.dim > 1 else np.array([s]))
    for q in points:
        logp, grad = func._pytensor_function(q)
        assert not np.isfinite(logp) or np.all(np.isfinite(grad)), (q, logp, grad)
