r"""MCMC sampling of a mechanism's model with nutpie or PyMC.

Everything in a model built by :func:`~pymc_manidp.mcmc.model.polar_model` that
depends on the data is a ``pm.Data``, so one compiled model serves every data set of
the same size: :class:`CompiledSampler` replaces all of them before each run, and a
mechanism keeps one per ``(n, sampler)`` in its :class:`SamplerCache`.

NUTS runs on nutpie (a dependency; PyMC's own NUTS if nutpie is absent or
``PYMC_MANIDP_NUTS_BACKEND=pymc``): 3-16x faster per release on S² (docs/benchmarks.md,
issue 12). Its compiled entry points do not depend on the data or on n and are kept
on disk across processes (:mod:`pymc_manidp.mcmc.nutpie_cache`), so a fresh process
only rebuilds the PyTensor graph.
"""

from __future__ import annotations

import importlib.util
import threading
import time

import numpy as np
import pymc as pm

from pymc_manidp.geometry.validation import read_env
from pymc_manidp.mcmc.budget import check_mcmc_budget
from pymc_manidp.mcmc.nutpie_cache import _compile_nutpie_or_fallback, _nutpie_with_data

__all__ = [
    "BACKEND_ENV",
    "NUTS_BACKENDS",
    "SAMPLERS",
    "CompiledSampler",
    "SamplerCache",
    "has_nutpie",
    "nuts_backend",
    "sample",
]

SAMPLERS = ("nuts", "metropolis")
_TARGET_ACCEPT = 0.9


NUTS_BACKENDS = ("nutpie", "pymc")
BACKEND_ENV = "PYMC_MANIDP_NUTS_BACKEND"


def has_nutpie() -> bool:
    """Whether nutpie (a dependency since issue 12) is importable."""
    return importlib.util.find_spec("nutpie") is not None


def nuts_backend(backend=None) -> str:
    """The NUTS implementation to use: ``"nutpie"`` or ``"pymc"``.

    ``backend`` (or, when it is None, the environment variable
    ``PYMC_MANIDP_NUTS_BACKEND``) is ``"nutpie"``, ``"pymc"`` or ``"auto"`` (the
    default): nutpie when it is installed, PyMC's NUTS otherwise. Asking for nutpie
    without it installed is an ``ImportError``.
    """
    choice = (
        backend
        or read_env(
            BACKEND_ENV, "choice", "auto", choices=(*NUTS_BACKENDS, "auto"), what="the NUTS backend"
        )
    ).lower()
    if choice == "auto":
        return "nutpie" if has_nutpie() else "pymc"
    if choice not in NUTS_BACKENDS:
        raise ValueError(
            f"NUTS backend must be one of {(*NUTS_BACKENDS, 'auto')}, got {choice!r} "
            f"(argument or ${BACKEND_ENV})"
        )
    if choice == "nutpie" and not has_nutpie():
        raise ImportError(
            "the nutpie backend needs nutpie, a dependency of pymc-manidp: pip install nutpie"
        )
    return choice


class CompiledSampler:
    """A model prepared once for one sampler and sampled again with new data.

    Every data-dependent quantity of the model must be a ``pm.Data`` (as in
    :func:`polar_model`). :meth:`sample` first replaces **all** of them by the values
    given (a missing or unknown name is a ``ValueError``, so a run can never sample
    a previous data set's law), then samples:

    - ``"nuts"`` with nutpie: the model is compiled once, here
      (:func:`compile_nutpie`: PyTensor's graph, numba entry points loaded from
      :func:`cache_dir` when a model of the same structure was compiled before,
      ``cache_hits`` counts them); each run samples a copy with the new values, the
      compiled object itself is never changed.
    - ``"nuts"`` without nutpie, ``"metropolis"``: ``pm.set_data`` on the model, then
      ``pm.sample``. PyMC compiles its functions again in every call (from its
      on-disk cache after the first); only the graph is reused.

    Not thread-safe across calls of the PyMC path (``pm.set_data`` changes the
    model); a lock serializes them.
    """

    def __init__(self, model, sampler="nuts", *, backend=None):
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        self.model = model
        self.sampler = sampler
        self.data_names = frozenset(v.name for v in model.data_vars)
        # Metropolis is PyMC's; NUTS is nutpie's when installed (nuts_backend)
        self.backend = nuts_backend(backend) if sampler == "nuts" else "pymc"
        self._lock = threading.Lock()
        self._compiled = None
        self.cache_hits = 0  # compiled NUTS entry points loaded from the disk cache
        if self.backend == "nutpie":
            self._compiled, self.cache_hits = _compile_nutpie_or_fallback(model)
            unread = self.data_names - {v.name for v in self._compiled.shared_var_keys}
            if unread:  # with_data could not replace them: refuse rather than guess
                raise ValueError(f"the compiled model does not read its data {sorted(unread)}")

    def current_data(self) -> dict:
        """The values the model's ``pm.Data`` hold now (copies)."""
        return {v.name: np.array(v.get_value()) for v in self.model.data_vars}

    def sample(self, values, *, draws=1000, tune=1000, chains=2, random_seed=None):
        """Set every ``pm.Data`` to ``values`` (exactly the model's names), run MCMC.

        Returns the ArviZ ``DataTree`` (``posterior``, ``sample_stats``; the
        posterior's ``sampling_time`` attribute is the sampler's own time, without
        compilation). The data are left out of it: no ``constant_data`` group.
        """
        given = set(values)
        if given != self.data_names:
            raise ValueError(
                "a compiled model must get new values for all its data before sampling: "
                f"missing {sorted(self.data_names - given)}, "
                f"unknown {sorted(given - self.data_names)}"
            )
        if self.backend == "nutpie":
            return self._sample_nutpie(values, draws, tune, chains, random_seed)
        with self._lock:
            pm.set_data({k: np.asarray(v, float) for k, v in values.items()}, model=self.model)
            kwargs = dict(
                draws=draws,
                tune=tune,
                chains=chains,
                random_seed=random_seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
            with self.model:
                if self.sampler == "metropolis":
                    idata = pm.sample(step=pm.Metropolis(), **kwargs)
                else:
                    idata = pm.sample(nuts_sampler="pymc", target_accept=_TARGET_ACCEPT, **kwargs)
        return self._record(idata)

    def _record(self, idata):
        """Drop the data groups; say which implementation drew the chains."""
        idata = _without_data(idata)
        label = "nutpie" if self.backend == "nutpie" else f"pymc-{self.sampler}"
        idata.posterior.attrs["sampler_backend"] = label
        idata.attrs["sampler_backend"] = label
        return idata

    def _sample_nutpie(self, values, draws, tune, chains, random_seed):
        import nutpie

        if (
            isinstance(self._compiled.user_data, np.ndarray)
            and self._compiled.user_data.dtype.names
        ):
            compiled = self._compiled.with_data(**values)  # nutpie's own (fallback) compile
        else:
            compiled = _nutpie_with_data(self._compiled, values)
        seed = int(np.random.default_rng(random_seed).integers(2**63 - 1))
        t0 = time.time()
        idata = nutpie.sample(
            compiled,
            draws=draws,
            tune=max(int(tune), 1),  # nuts-rs needs at least one tuning step
            chains=chains,
            seed=seed,
            save_warmup=False,
            progress_bar=False,
            target_accept=_TARGET_ACCEPT,
        )
        idata.posterior.attrs["sampling_time"] = time.time() - t0
        idata.posterior.attrs["tuning_steps"] = int(tune)
        return self._record(idata)


class SamplerCache:
    """The compiled samplers of one mechanism object, one per ``(n, sampler)``.

    A mechanism keeps one (``mech.mcmc_cache``) so that its second MCMC release of a
    data set of the same size reuses the compiled model instead of compiling again.
    What is cached is only the compiled model: :meth:`CompiledSampler.sample`
    replaces all its data before every run. The manifold, the public ball and the
    model's structure are constants of the compiled graph; they are fixed when the
    mechanism is built. Copies and pickles of the cache are empty.

    The cached models keep the values of a data set in memory (nutpie's compiled
    model those it was compiled with, PyMC's model the last ones set) for as long
    as the mechanism lives; :meth:`clear` drops them.
    """

    def __init__(self):
        self._entries: dict = {}
        self._lock = threading.Lock()

    def get(self, n, sampler, build, *, budget=None) -> CompiledSampler:
        """The sampler for data of size ``n``; ``build()`` gives the model on a miss.

        ``budget``, a dict of :func:`check_mcmc_budget`'s arguments besides ``n``
        (``manifold``, ``chains``, ``tune``, ``draws``), refuses hopeless runs before
        anything is compiled."""
        if budget is not None:
            check_mcmc_budget(n=n, **budget)
        key = (int(n), sampler)
        with self._lock:
            if key not in self._entries:
                self._entries[key] = CompiledSampler(build(), sampler)
            return self._entries[key]

    def keys(self):
        return list(self._entries)

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()


def _without_data(idata):
    """Drop the groups that copy the model's ``pm.Data`` (the private data)."""
    for group in ("constant_data", "observed_data"):
        if group in idata.children:
            del idata[group]
    return idata


def sample(
    model, sampler="nuts", *, draws=1000, tune=1000, chains=2, random_seed=None, progressbar=False
):
    """Run MCMC once on ``model`` with its current data; return the ArviZ ``DataTree``.

    ``"nuts"`` uses nutpie when it is installed (faster adaptation, compiled with
    numba), PyMC's own NUTS otherwise; ``"metropolis"`` uses PyMC's random-walk
    Metropolis. Each call compiles the model: to sample one model structure for
    several data sets, keep a :class:`CompiledSampler`. ``progressbar`` is accepted
    for compatibility and ignored.
    """
    compiled = CompiledSampler(model, sampler)
    return compiled.sample(
        compiled.current_data(), draws=draws, tune=tune, chains=chains, random_seed=random_seed
    )
