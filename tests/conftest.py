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
"""

import pytest

from pymc_manidp.mcmc.sampling import strict_floats


@pytest.fixture(autouse=True, scope="session")
def _strict_floats():
    with strict_floats():
        yield
