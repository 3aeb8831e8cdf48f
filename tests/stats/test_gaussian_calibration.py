"""The analytic Gaussian calibration (issue 39) against independent computations: the
Balle–Wang condition solved again with mpmath at 60 digits, and dp_accounting's
privacy loss distribution of the Gaussian mechanism."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymc_manidp.stats.gaussian import gaussian_delta, gaussian_mu, gaussian_sigma

POINTS = [
    (1.0, 1e-6),
    (0.1, 1e-10),
    (3.0, 1e-3),
    (0.5, 1e-300),
    (8.0, 0.3),
    (1 / 3, 1e-5),
    (1e-4, 1e-200),
    (1e-6, 1e-12),
]


def _mp_delta(eps, mu):
    """Balle & Wang 2018, Thm 8, written again in mpmath (60 digits), no log tricks."""
    eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
    return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.e**eps * mpmath.ncdf(-mu / 2 - eps / mu)


def _mp_mu(eps, delta):
    """The root of delta(mu) = delta by 300 bisection steps in log mu, at 60 digits."""
    with mpmath.workdps(60):
        lo, hi = mpmath.mpf(-60), mpmath.mpf(10)  # delta(e^-60) < 1e-300 < delta(e^10)
        for _ in range(300):
            mid = (lo + hi) / 2
            if _mp_delta(eps, mpmath.e**mid) <= delta:
                lo = mid
            else:
                hi = mid
        return float(mpmath.e**lo)


@pytest.mark.parametrize(("eps", "delta"), POINTS)
def test_mu_matches_mpmath_root(eps, delta):
    mu = gaussian_mu(eps, delta)
    assert mu == pytest.approx(_mp_mu(eps, delta), rel=1e-6)
    # the returned end never spends more than delta; one part in 1e9 more does
    with mpmath.workdps(60):
        assert _mp_delta(eps, mu) <= delta
        assert _mp_delta(eps, mu * (1 + 1e-6)) > delta


def test_known_values():
    # the note's table: (1, 1e-6) gives mu = 0.2367, sigma = 4.23 Delta
    assert gaussian_mu(1.0, 1e-6) == pytest.approx(0.23670, abs=1e-5)
    # the classical calibration sqrt(2 ln(1.25/delta))/eps is valid, so larger
    assert 1 / gaussian_mu(1.0, 1e-6) < math.sqrt(2 * math.log(1.25 / 1e-6))


@pytest.mark.parametrize("eps", [1e-10, 1e-3, 0.1, 1.0, 5.0, 40.0])
@pytest.mark.parametrize("mu", [1e-11, 1e-4, 0.02, 0.05, 0.2, 1.0, 5.0, 20.0])
def test_delta_is_accurate_where_the_terms_cancel(eps, mu):
    # at small mu, Phi(a) and e^eps Phi(b) agree in most of their digits (or underflow):
    # the plain difference in floats loses them, gaussian_delta keeps 1e-11
    with mpmath.workdps(80):
        want = float(_mp_delta(eps, mu))
    if want < 1e-300:
        assert gaussian_delta(eps, mu) < 1e-290
        return
    assert abs(gaussian_delta(eps, mu) / want - 1) < 1e-11


def test_plain_formulas_would_fail():
    # the oracle above can fail: the textbook difference in floats, and the difference
    # of log_ndtr's (both near -a^2/2), lose digits here; gaussian_delta keeps them
    from scipy.special import log_ndtr, ndtr

    eps, mu = 1e-10, 1e-11  # a = -10, the two terms agree in 12 digits
    a, b = mu / 2 - eps / mu, -mu / 2 - eps / mu
    with mpmath.workdps(80):
        want = float(_mp_delta(eps, mu))
    plain = ndtr(a) - math.exp(eps) * ndtr(b)
    logs = math.exp(log_ndtr(a)) * -math.expm1(eps + log_ndtr(b) - log_ndtr(a))
    assert want > 0
    assert abs(plain / want - 1) > 1e-3
    assert abs(logs / want - 1) > 1e-4
    assert abs(gaussian_delta(eps, mu) / want - 1) < 1e-11


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.5, 1e-9), (2.0, 1e-5)])
def test_sigma_against_dp_accounting_pld(eps, delta):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sens = 0.37
    sigma, mu = gaussian_sigma(sens, eps, delta)
    assert mu == sens / sigma and mu <= gaussian_mu(eps, delta)

    def eps_of(s):  # pessimistic discretization: an upper estimate of the true epsilon
        return pld.from_gaussian_mechanism(
            standard_deviation=s, sensitivity=sens, value_discretization_interval=1e-5
        ).get_epsilon_for_delta(delta)

    assert eps_of(sigma) == pytest.approx(eps, abs=2e-3)
    # a sigma 10% too small spends visibly more than epsilon
    assert eps_of(0.9 * sigma) > eps * 1.05


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.just(float("nan")),
    st.just(float("inf")),
    st.just(-1.0),
    st.just(0.0),
    st.just(5e-324),
    st.just(1e308),
    st.just(10**400),
    st.just([1.0]),
)


_deltas = st.sampled_from([1e-6, math.nextafter(1.0, 0.0), 0.5, 1e-300, 1e-301])


@given(
    eps=st.one_of(_junk, st.sampled_from([1 / 3, 0.3333333333333333, 1.0])),
    delta=st.one_of(_junk, _deltas),
)
def test_mu_refuses_junk_or_holds(eps, delta):
    try:
        mu = gaussian_mu(eps, delta)
    except TypeError:
        return
    except ValueError as err:
        msg = str(err)
        assert "epsilon" in msg or "delta" in msg
        return
    assert np.isfinite(mu) and mu > 0
    assert gaussian_delta(float(eps), mu) <= float(delta)


@given(
    eps=st.sampled_from([1e308, 1.7976931348623157e308, 1e300, 1e250, 1e200]),
    mu=st.sampled_from([1 / 3, 1.0, 1e-3, 5e-324, 1e100, 1e154]),
)
def test_delta_at_huge_epsilon_is_a_number_not_a_math_domain_error(eps, mu):
    # eps/mu near 1e308: erfcx(-a/sqrt 2) was subnormal, its log1p left the domain and
    # gaussian_mu(1e308, 1e-7) (the CLI's --budget-plan gaussian:1e308:1e-7) said only
    # "math domain error"; there delta <= Phi(a) < e^(-a^2/2), below every float
    d = gaussian_delta(eps, mu)
    assert 0.0 <= d <= 1.0
    a = mu / 2 - eps / mu
    if a < -40:  # Phi(a) < 1e-349
        assert d == 0.0
    try:
        found = gaussian_mu(eps, 1e-7)
    except ValueError as err:
        assert "epsilon" in str(err) and "too large" in str(err)
    else:
        assert gaussian_delta(eps, found) <= 1e-7
