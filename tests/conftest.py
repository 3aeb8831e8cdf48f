"""Session-wide test settings.

Every test compiles PyTensor's numba functions with fastmath off
(``pymc_manidp.mcmc.sampling.strict_floats``), as the library's own releases do. With
fastmath on (PyTensor's default) a freshly compiled log-density and one loaded from
numba's on-disk cache may differ in the last bits, so a test that runs ``pm.sample``
from a fixed seed drew other chains with a cold and a warm cache: the clean-clone CI
run of 2026-11-27 drew a hyperbolic KNG chain whose KS test gave p = 7e-4, a seed that
passed with a warm cache. Strict floats make a seeded test one fixed computation, which
passes or fails the same way on every machine state. The one test of the default
itself (``test_samplers_compile_with_strict_floats``) turns fastmath back on.

Property-based tests (hypothesis) run under one of two profiles, chosen by the
environment variable ``HYPOTHESIS_PROFILE``:

- ``default`` (CI and the everyday loop): derandomized, so a clean clone draws the same
  examples every run (a red CI is reproducible, a green one is not luck), few examples
  per test, no deadline (a cold numba compile would blow any deadline);
- ``long`` (on demand: ``HYPOTHESIS_PROFILE=long bash .ci/run test tests/...``): random,
  twenty times the examples, for hunting.

A test that sets its own ``@settings(max_examples=...)`` keeps that count in both.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

from pymc_manidp.mcmc.sampling import strict_floats

settings.register_profile(
    "default",
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "long",
    max_examples=600,
    derandomize=False,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True, scope="session")
def _strict_floats():
    with strict_floats():
        yield
