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

Every test runs PyMC's chains in its own process (``pm.sample``'s ``cores`` is 1 unless
the test passes it): a seed gives the same draws either way (PyMC seeds each chain
before choosing where to run it), and starting chain processes, each importing PyMC and
compiling the model again, while the other xdist worker holds a core made such tests
about 10 times slower inside the suite than alone (issue 37: 82-100 s against 10 s,
140 s against 9 s). PyMC's own default is ``cpu_count() // 2`` processes: 1 on the
2-core CI machine, 2 or more on a laptop. A test about the process boundary passes
``cores`` itself.

Property-based tests (hypothesis) run under one of two profiles, chosen by the
environment variable ``HYPOTHESIS_PROFILE``:

- ``default`` (CI and the everyday loop): derandomized, so a clean clone draws the same
  examples every run (a red CI is reproducible, a green one is not luck), few examples
  per test, no deadline (a cold numba compile would blow any deadline);
- ``long`` (on demand: ``HYPOTHESIS_PROFILE=long bash .ci/run test tests/...``): random,
  twenty times the examples, for hunting.

A test that sets its own ``@settings(max_examples=...)`` keeps that count in both.
"""

import functools
import os

import pymc
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


@pytest.fixture(autouse=True, scope="session")
def _chains_in_process():
    real = pymc.sample

    @functools.wraps(real)
    def sample(*args, **kwargs):
        kwargs.setdefault("cores", 1)
        return real(*args, **kwargs)

    pymc.sample = sample
    try:
        yield
    finally:
        pymc.sample = real
