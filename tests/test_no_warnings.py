"""A user's first session raises no warning (issue 42).

``python -W error`` (every warning an exception, in a fresh interpreter: nothing
filtered by pytest's own settings) imports the package, makes an exact and a NUTS
release, draws each law of ``pymc_manidp`` with ``pm.draw`` (the distributions'
random Ops on PyTensor's explicit-rng API; their draws run in numba's object mode on
purpose, without the warning) and samples a noise-aware model (its ``pm.CustomDist``
draws marked the same way) with ``pm.sample``. Each of these warned before issue 42:
PyTensor's "Calling a RandomVariable without an explicit rng is deprecated" and
"RandomVariable Ops will stop hiding the rng output", and "Numba will use object mode
to run CustomDist_...".
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SESSION = textwrap.dedent(
    """
    import numpy as np
    import pymc as pm
    import pymc_manidp as pmd

    S = pmd.Sphere(dim=2)
    center = np.array([0.0, 0.0, 1.0])
    data = S.exp_coords(center, np.random.default_rng(0).normal(scale=0.1, size=(20, 2)))
    dom = pmd.DataDomain(S, center, 0.5)
    mech = pmd.LaplaceMechanism(S, epsilon=1.0, center=center, radius=0.5)
    rel = mech.release(data, random_seed=1)
    mech.release(data, sampler="nuts", random_seed=1)
    laws = {
        "ManifoldLaplace": pmd.ManifoldLaplace.dist(S, center, 0.1, size=3),
        "KNG": pmd.KNG.dist(S, data, 0.1, dom, size=2),
        "ManifoldUniform": pmd.ManifoldUniform.dist(S, size=2),
        "VonMisesFisher": pmd.VonMisesFisher.dist(center, 5.0, size=2),
        "MatrixFisher": pmd.MatrixFisher.dist(5.0 * np.eye(3), size=2),
        "Bingham": pmd.Bingham.dist(np.diag([0.0, 1.0, 5.0]), size=2),
    }
    for law in laws.values():
        pm.draw(law, random_seed=0)
    model = pmd.noise_aware_model(rel.public(), S)
    pm.draw([model["mean"], model["release"]], draws=5, random_seed=0)
    with model:
        pm.sample(draws=50, tune=50, chains=1, random_seed=0, progressbar=False,
                  compute_convergence_checks=False)
    print("LAWS", *sorted(laws))
    """
)


def test_a_first_session_raises_no_warning_under_W_error():
    pytest.importorskip("nutpie")
    import pymc_manidp as pmd

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", SESSION],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # every law the public namespace exports was drawn (a new one must join the session)
    import pymc as pm

    laws = [
        name
        for name in pmd.__all__
        if isinstance(getattr(pmd, name), type) and issubclass(getattr(pmd, name), pm.Distribution)
    ]
    drawn = next(line for line in out.stdout.splitlines() if line.startswith("LAWS")).split()[1:]
    assert drawn == sorted(laws)
