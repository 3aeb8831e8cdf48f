"""FreshNUTS: PyMC's NUTS compiled once, every run the run of a freshly built step.

The oracle is ``pm.sample`` itself: a run of :class:`FreshNUTS` must give, draw for
draw, what ``pm.sample(step=pm.NUTS(), cores=1)`` gives with a step built for that run,
also after runs on other data (nothing adapted is carried from one run to the next,
issue 28, item 6), and must compile nothing. A variant that keeps the adapted state
(no restore before a chain) is shown to differ from the fresh step, so the comparison
can fail.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from pytensor.compile import maker

from pymc_manidp.mcmc.sampling import FreshNUTS, strict_floats

RUN = {"draws": 30, "tune": 30, "chains": 2}


def _model():
    # a 2-d posterior whose scale depends on the data, so an adapted mass matrix is
    # visibly another sampler
    with pm.Model() as model:
        y = pm.Data("y", np.zeros(2))
        scale = pm.Data("scale", 1.0)
        mu = pm.Normal("mu", 0.0, 10.0, shape=2)
        pm.Normal("obs", mu, scale, observed=y)
    return model


def _fresh_pm_sample(model, seed):
    with model, strict_floats():
        idata = pm.sample(
            step=pm.NUTS(),
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **RUN,
        )
    return idata.posterior["mu"].values, idata.sample_stats["diverging"].values


def test_a_run_is_a_fresh_pm_sample_draw_for_draw(monkeypatch):
    model = _model()
    nuts = FreshNUTS(model)
    pm.set_data({"y": [5.0, -3.0], "scale": 0.05}, model=model)
    nuts.sample(random_seed=1, **RUN)  # adapts to a narrow posterior first
    pm.set_data({"y": [1.0, 2.0], "scale": 3.0}, model=model)
    count = {"n": 0}
    original = maker.FunctionMaker.__init__

    def counting(self, *args, **kwargs):
        count["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(maker.FunctionMaker, "__init__", counting)
    draws, diverging = nuts.sample(random_seed=2, **RUN)
    assert count["n"] == 0  # a run compiles nothing
    monkeypatch.undo()
    expected, expected_div = _fresh_pm_sample(model, 2)
    np.testing.assert_array_equal(draws["mu"], expected)
    np.testing.assert_array_equal(diverging, expected_div)
    assert draws["mu"].shape == (2, 30, 2)


def test_an_adapted_step_is_another_sampler(monkeypatch):
    # the same run with the adapted step size and mass matrix kept (neither the state
    # restored nor the tuning reset) is not the fresh step's run: the comparison above
    # can fail. (Either of the two alone makes the step fresh again: pm.sample's
    # reset_tuning does, which is why a step handed to pm.sample is one too.)
    model = _model()
    nuts = FreshNUTS(model)
    pm.set_data({"y": [5.0, -3.0], "scale": 0.05}, model=model)
    nuts.sample(random_seed=1, **RUN)
    pm.set_data({"y": [1.0, 2.0], "scale": 3.0}, model=model)
    nuts._fresh = nuts.step.sampling_state  # the adapted state, "restored"
    monkeypatch.setattr(nuts.step, "reset_tuning", lambda: None)
    draws, _ = nuts.sample(random_seed=2, **RUN)
    expected, _ = _fresh_pm_sample(model, 2)
    assert not np.array_equal(draws["mu"], expected)


def test_initial_values_may_be_data_read_at_each_run():
    model = _model()
    with model:
        start = pm.Data("start", np.zeros(2))
    nuts = FreshNUTS(model, initvals={"mu": start}, var_names=["mu"])
    first = nuts._initial_point(0)["mu"]
    pm.set_data({"start": [3.0, 4.0]}, model=model)
    np.testing.assert_array_equal(nuts._initial_point(0)["mu"], [3.0, 4.0])
    assert first.tolist() == [0.0, 0.0]
