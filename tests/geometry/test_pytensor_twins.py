"""PyTensor's matrix functions where SPD's twins need them: finite, correct gradients
at repeated eigenvalues (the identity), where PyTensor's own eigh gradient is NaN.

The twins of every manifold (values against NumPy, gradients near 0 and near r*) are
checked by the contract suite, ``tests/geometry/contract.py``. Gradients here are
checked against 4th-order central finite differences of a random projection of the
output along random directions, in FAST_COMPILE mode (same graph, no C compilation).
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_manidp as pmd
from pymc_manidp.geometry._numba import pt_numerics as ptn
from tests.geometry.contract import random_coords, vgrad


def _vgrad(fn, args, seed):
    vgrad(lambda *t: [fn(*t)], args, seed=seed)


def _sym(t):
    return 0.5 * (t + t.T)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_spd_gradients_at_the_identity(k):
    P = pmd.SPD(k=k)
    eye = np.eye(k)
    rng = np.random.default_rng(k)
    # at distances 0.5..2 from the identity: nearer, rho's cusp at y spoils the finite
    # differences (step 1e-4); farther, their truncation error shows
    c = random_coords(P, rng, 3, max_norm=1.5)
    y = P.exp_coords(eye, c + 0.5 * c / np.linalg.norm(c, axis=-1, keepdims=True))
    _vgrad(lambda t: P.pt_exp_coords(eye, t), [np.zeros(P.dim)], 1)
    # points move along symmetric directions (off them the maps need not be smooth)
    _vgrad(lambda t: P.pt_log(_sym(t), y), [eye], 2)
    _vgrad(lambda t: P.pt_dist(_sym(t), y), [eye], 3)
    _vgrad(lambda t: P.pt_log(_sym(t), eye), [eye], 4)  # log_I(I): every eigenvalue equal
    _vgrad(P.pt_log_volume_density, [np.zeros(P.dim)], 5)
    # and every gradient is finite there, where PyTensor's eigh gradient is not
    x = pt.matrix("x")
    g = pytensor.function([x], pt.grad(pt.sum(P.pt_log(x, y) ** 2), x), mode="FAST_COMPILE")(eye)
    assert np.all(np.isfinite(g))


def test_naive_eigh_gradient_is_nan_at_identity():
    # Why the custom pullback exists: this is what it replaces.
    x = pt.matrix("x")
    w, u = pt.linalg.eigh(x)
    naive = (u * pt.exp(w)[None, :]) @ u.T
    fast = "FAST_COMPILE"
    naive_grad = pytensor.function([x], pt.grad(naive[0, 1] + naive.sum(), x), mode=fast)
    with pytest.warns(RuntimeWarning, match="encountered in"):  # the 0/0 it makes, on purpose
        g = naive_grad(np.eye(3))
    assert not np.all(np.isfinite(g))
    cost = ptn.expm(x)[0, 1] + ptn.expm(x).sum()
    ours = pytensor.function([x], pt.grad(cost, x), mode=fast)(np.eye(3))
    assert np.all(np.isfinite(ours))


@pytest.mark.parametrize("name", ["expm", "logm", "sqrtm", "invsqrtm"])
def test_matrix_functions_near_repeated_eigenvalues(name):
    fn = getattr(ptn, name)
    rng = np.random.default_rng(0)
    for gap in [0.0, 1e-9, 1e-5, 0.3]:
        a = np.diag([1.0, 1.0 + gap, 2.0])
        q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        _vgrad(fn, [q @ a @ q.T], 0)
