r"""MCMC sampling of a mechanism's model with nutpie or PyMC.

Everything in a model built by :func:`~pymc_manidp.mcmc.model.polar_model` that
depends on the data is a ``pm.Data``, so one compiled model serves every data set of
the same size: :class:`CompiledSampler` replaces all of them before each run, and a
mechanism keeps one per ``(n, sampler, backend)`` in its :class:`SamplerCache`. How
long a run samples is one :class:`~pymc_manidp.mcmc.settings.MCMCSettings`.

NUTS runs on nutpie (a dependency; PyMC's own NUTS if nutpie is absent or
``PYMC_MANIDP_NUTS_BACKEND=pymc``): 3-16x faster per release on S² (docs/benchmarks.md,
issue 12). Its compiled entry points do not depend on the data or on n and are kept
on disk across processes (:mod:`pymc_manidp.mcmc.nutpie_cache`), so a fresh process
only rebuilds the PyTensor graph.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
import threading
import time

import numpy as np
import pymc as pm
import pytensor

from pymc_manidp._options import options
from pymc_manidp._progress import _progress_enabled
from pymc_manidp.geometry._numba.cache import check_environment_once
from pymc_manidp.mcmc.memory_limit import check_mcmc_memory
from pymc_manidp.mcmc.nutpie_cache import _compile_nutpie_or_fallback, _nutpie_with_data
from pymc_manidp.mcmc.settings import MCMCSettings

__all__ = [
    "BACKEND_ENV",
    "NUTS_BACKENDS",
    "SAMPLERS",
    "CompiledSampler",
    "FreshNUTS",
    "SamplerCache",
    "has_nutpie",
    "nuts_backend",
    "sample",
    "sampler_backend",
    "strict_floats",
]

SAMPLERS = ("nuts", "metropolis")


NUTS_BACKENDS = ("nutpie", "pymc")
BACKEND_ENV = options.env("nuts_backend")


def has_nutpie() -> bool:
    """Whether nutpie (a dependency since issue 12) is importable.

    Returns
    -------
    bool
        True when ``import nutpie`` would find the package (it is not imported).
    """
    return importlib.util.find_spec("nutpie") is not None


def nuts_backend(backend=None) -> str:
    """The NUTS implementation to use: ``"nutpie"`` or ``"pymc"``.

    ``backend`` (or, when it is None, ``pymc_manidp.options["nuts_backend"]``: set in
    Python, else the environment variable ``PYMC_MANIDP_NUTS_BACKEND``) is
    ``"nutpie"``, ``"pymc"`` or ``"auto"`` (the default): nutpie when it is installed,
    PyMC's NUTS otherwise.

    Parameters
    ----------
    backend : {None, "auto", "nutpie", "pymc"}, optional
        The choice (any case); None reads ``pymc_manidp.options["nuts_backend"]``
        (``$PYMC_MANIDP_NUTS_BACKEND``, then ``"auto"``).

    Returns
    -------
    {"nutpie", "pymc"}
        The implementation that will run NUTS.

    Raises
    ------
    ValueError
        Another choice, as argument or in the environment variable (named).
    ImportError
        ``"nutpie"`` asked for and nutpie not installed.
    """
    # None, not any falsy value, means the default: "" is a wrong choice, 1 a wrong type
    if backend is not None and not isinstance(backend, str):
        raise TypeError(
            f"the NUTS backend must be a string {(*NUTS_BACKENDS, 'auto')} or None, got "
            f"{type(backend).__name__} {backend!r}"
        )
    choice = (options["nuts_backend"] if backend is None else backend).lower()
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


def sampler_backend(sampler, backend=None) -> str:
    """The implementation that runs ``sampler``: nutpie or PyMC.

    Parameters
    ----------
    sampler : {"nuts", "metropolis"}
        One of ``SAMPLERS``.
    backend : {None, "auto", "nutpie", "pymc"}, optional
        The NUTS implementation asked for (see :func:`nuts_backend`); ignored for
        ``"metropolis"``.

    Returns
    -------
    {"nutpie", "pymc"}
        :func:`nuts_backend` of ``backend`` for ``"nuts"``; ``"pymc"`` for
        ``"metropolis"`` (only PyMC has it).

    Raises
    ------
    ValueError
        An unknown ``sampler`` (or ``backend``, see :func:`nuts_backend`).
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    return nuts_backend(backend) if sampler == "nuts" else "pymc"


def strict_floats():
    """Compile with numba's fastmath off (a context manager).

    PyTensor compiles its numba functions with fastmath (``reassoc``, ``contract``) by
    default, which lets a freshly compiled log-density and one loaded from numba's
    on-disk cache differ in the last bits; a seeded MCMC run then drew other values cold
    and warm (a release's coordinates differed in about their last 10 bits), which
    breaks the promise that a seed makes a run reproducible (:mod:`pymc_manidp.rng`).
    Strict IEEE arithmetic makes both compilations agree; the nutpie cache's key carries
    the flag. Measured cost: one log-density and gradient 1.17 times slower on SPD(3),
    none on S^2 (2026-11-25, busy machine).
    """
    return pytensor.config.change_flags(numba__fastmath=False)


class FreshNUTS:
    """PyMC's NUTS compiled once for a model, every run a freshly built sampler.

    ``pm.sample`` compiles its helpers (the initial point, the trace's point function)
    again at every call: about 1 s a run on SPD(3), more than the sampling of a small
    posterior. A run here reuses what was compiled once (the NUTS step's log-density
    and gradient, the initial point, the traced variables) and nothing that was
    adapted: before each chain the step is put back into the state it had when it was
    built (``sampling_state``, a deep copy), so its step size and mass matrix adapt
    from scratch, and each chain gets its generator as ``pm.sample`` gives it. A run
    is therefore the run of ``pm.sample(step=pm.NUTS(...), random_seed=seed,
    cores=1)`` with a step built fresh for it (``tests/mcmc/test_fresh_nuts.py``
    checks that draw for draw), and a run does not depend on the runs before it.

    The model's ``pm.Data`` are read when a run starts: ``pm.set_data`` between runs
    samples a new posterior with the same compiled functions.

    Parameters
    ----------
    model : pymc.Model
        The model; its continuous free variables are sampled.
    var_names : list of str, optional
        The variables :meth:`sample` returns (default: the free variables).
    initvals : dict, optional
        ``pm.sample``'s ``initvals``, compiled once: a value may be a shared variable
        (a ``pm.Data``), read at each run, so every run can start somewhere else.
    target_accept : float
        NUTS's target acceptance rate.

    Attributes
    ----------
    step : pymc.NUTS
        The compiled step (its state is restored before every chain).
    var_names : tuple of str
        The variables returned.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as m:
    ...     y = pm.Data("y", 0.0)
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     _ = pm.Normal("obs", mu, 1.0, observed=y)
    >>> nuts = FreshNUTS(m)
    >>> pm.set_data({"y": 2.0}, model=m)
    >>> draws, diverging = nuts.sample(draws=50, tune=50, chains=2, random_seed=1)
    >>> draws["mu"].shape, diverging.shape
    ((2, 50), (2, 50))
    """

    def __init__(self, model, *, var_names=None, initvals=None, target_accept=0.8):
        from pymc.initial_point import make_initial_point_fn

        self.model = model
        names = [v.name for v in model.free_RVs] if var_names is None else list(var_names)
        self.var_names = tuple(names)
        with model, strict_floats():
            self._initial_point = make_initial_point_fn(
                model=model, overrides=initvals, jitter_rvs=set(), return_transformed=True
            )
            # given the point, pm.NUTS does not compile model.initial_point() (twice)
            self.step = pm.NUTS(target_accept=target_accept, initial_point=self._initial_point(0))
            outputs = model.replace_rvs_by_values([model[n] for n in names])
            self._values = model.compile_fn(
                outputs, inputs=model.value_vars, on_unused_input="ignore", point_fn=True
            )
        self._fresh = self.step.sampling_state  # a deep copy, restored before every chain

    def sample(self, *, draws, tune, chains, random_seed):
        """Run ``chains`` chains one after another, each adapting from scratch.

        Parameters
        ----------
        draws, tune, chains : int
            Draws kept per chain, tuning steps before them, chains.
        random_seed : int, Generator or None
            As ``pm.sample``'s: the same seed gives the same draws.

        Returns
        -------
        draws : dict of str to ndarray
            Per variable of ``var_names``, shape ``(chains, draws, *shape)``.
        diverging : ndarray of bool, shape ``(chains, draws)``
            Divergent transitions after tuning.
        """
        from pymc.util import get_random_generator

        draws, tune, chains = int(draws), int(tune), int(chains)
        # pm.sample's seeding: one spawned generator per chain, each first advanced by
        # the draw of its chain's initial-point seed
        rngs = get_random_generator(random_seed).spawn(chains)
        seeds = [rng.integers(2**30) for rng in rngs]
        out = {n: [] for n in self.var_names}
        diverging = np.zeros((chains, draws), dtype=bool)
        step = self.step
        with strict_floats():
            for c in range(chains):
                point = self._initial_point(seeds[c])
                step.sampling_state = self._fresh
                step.setup_chain(rngs[c], tune, draws)
                step.tune = bool(tune)
                step.reset_tuning()
                step.iter_count = 0
                kept = []
                for i in range(tune + draws):
                    if i == tune:
                        step.stop_tuning()
                    point, stats = step.step(point)
                    if i >= tune:
                        kept.append(self._values(point))
                        diverging[c, i - tune] = any(s.get("diverging", False) for s in stats)
                for j, n in enumerate(self.var_names):
                    out[n].append(np.stack([np.asarray(k[j]) for k in kept]))
        return {n: np.stack(v) for n, v in out.items()}, diverging


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

    Parameters
    ----------
    model : pymc.Model
        A model whose data-dependent quantities are all ``pm.Data`` (e.g. from
        :func:`polar_model`); nutpie compiles it here, PyMC in each :meth:`sample`.
    sampler : {"nuts", "metropolis"}
        One of ``SAMPLERS``.
    backend : {None, "auto", "nutpie", "pymc"}, optional
        The NUTS implementation (:func:`sampler_backend`), fixed for the life of the
        object.

    Attributes
    ----------
    backend : {"nutpie", "pymc"}
        The implementation that samples.
    model : pymc.Model
        The model given.
    sampler : str
        The sampler given.
    data_names : frozenset of str
        The names of the model's ``pm.Data``: exactly the keys :meth:`sample` takes.
    cache_hits : int
        How many of nutpie's two compiled entry points were loaded from
        :func:`cache_dir` (0 for PyMC).

    Raises
    ------
    ValueError
        An unknown ``sampler`` or ``backend``, or a compiled model that does not read
        all its ``pm.Data``.
    """

    def __init__(self, model, sampler="nuts", *, backend=None):
        # compiled code is written and loaded here: the command line's checks, for Python
        check_environment_once()
        # Metropolis is PyMC's; NUTS is nutpie's when installed (nuts_backend)
        self.backend = sampler_backend(sampler, backend)
        self.model = model
        self.sampler = sampler
        self.data_names = frozenset(v.name for v in model.data_vars)
        self._lock = threading.Lock()
        self._compiled = None
        self.cache_hits = 0  # compiled NUTS entry points loaded from the disk cache
        if self.backend == "nutpie":
            with strict_floats():
                self._compiled, self.cache_hits = _compile_nutpie_or_fallback(model)
            unread = self.data_names - {v.name for v in self._compiled.shared_var_keys}
            if unread:  # with_data could not replace them: refuse rather than guess
                raise ValueError(f"the compiled model does not read its data {sorted(unread)}")

    def current_data(self) -> dict:
        """The values the model's ``pm.Data`` hold now (copies)."""
        return {v.name: np.array(v.get_value()) for v in self.model.data_vars}

    def sample(
        self,
        values,
        settings=None,
        *,
        random_seed=None,
        draws=None,
        tune=None,
        chains=None,
        progressbar=None,
    ):
        """Set every ``pm.Data`` to ``values`` (exactly the model's names), run MCMC.

        Parameters
        ----------
        values : dict of str to array_like
            A value for each name of ``data_names`` (e.g. :func:`polar_data`'s),
            each of the rank the model was built with; a missing or an unknown name
            is a ``ValueError``.
        settings : MCMCSettings, optional
            How long (default PyMC's 4 x (1,000 + 1,000)). Its ``backend`` is
            ignored: it was fixed when this sampler was compiled.
        random_seed : int or None, optional
            Seed of the run; None draws one from the operating system.
        draws, tune, chains : int, optional
            Override the fields of ``settings``.
        progressbar : bool or None
            Show the sampler's own progress display (nutpie's, or PyMC's rich bars,
            put on stderr), as ``pm.sample(progressbar=)``; ``None``: only when stderr
            is a terminal and ``$CI`` is unset (``pymc_manidp._progress``). It draws
            no random numbers: the run is the same with or without it.

        Returns
        -------
        DataTree
            ArviZ's ``posterior`` (``chains x draws`` per variable) and
            ``sample_stats``; the posterior's ``sampling_time`` attribute is the
            sampler's own time, without compilation, and ``sampler_backend`` says
            which implementation drew the chains. The data are left out of it: no
            ``constant_data`` group.
        """
        s = MCMCSettings.resolve(settings, draws=draws, tune=tune, chains=chains)
        # the model's manifold is not at hand: the bound for the smallest one
        check_mcmc_memory(s)
        given = set(values)
        if given != self.data_names:
            raise ValueError(
                "a compiled model must get new values for all its data before sampling: "
                f"missing {sorted(self.data_names - given)}, "
                f"unknown {sorted(given - self.data_names)}"
            )
        shown = _progress_enabled(progressbar)
        if self.backend == "nutpie":
            return self._sample_nutpie(values, s, random_seed, shown)
        with self._lock:
            pm.set_data({k: np.asarray(v, float) for k, v in values.items()}, model=self.model)
            kwargs = dict(
                draws=s.draws,
                tune=s.tune,
                chains=s.chains,
                random_seed=random_seed,
                progressbar=shown,
                compute_convergence_checks=False,
            )
            if s.cores is not None:
                kwargs["cores"] = s.cores
            # PyMC draws its bars on stdout, which may carry what a command prints
            to_stderr = (
                contextlib.redirect_stdout(sys.stderr) if shown else contextlib.nullcontext()
            )
            with self.model, strict_floats(), to_stderr, _interruptions():
                if self.sampler == "metropolis":
                    idata = pm.sample(step=pm.Metropolis(), **kwargs)
                else:
                    idata = pm.sample(nuts_sampler="pymc", target_accept=s.target_accept, **kwargs)
        return self._record(idata)

    def _record(self, idata):
        """Drop the data groups; say which implementation drew the chains."""
        idata = _without_data(idata)
        label = "nutpie" if self.backend == "nutpie" else f"pymc-{self.sampler}"
        idata.posterior.attrs["sampler_backend"] = label
        idata.attrs["sampler_backend"] = label
        return idata

    def _sample_nutpie(self, values, s, random_seed, progressbar=False):
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
        with _interruptions():
            idata = nutpie.sample(
                compiled,
                draws=s.draws,
                tune=max(s.tune, 1),  # nuts-rs needs at least one tuning step
                chains=s.chains,
                seed=seed,
                save_warmup=False,
                progress_bar=bool(progressbar),  # nutpie's: on stderr in a terminal
                target_accept=s.target_accept,
            )
        idata.posterior.attrs["sampling_time"] = time.time() - t0
        idata.posterior.attrs["tuning_steps"] = s.tune
        return self._record(idata)


class SamplerCache:
    """The compiled samplers of one mechanism object, one per ``(n, sampler, backend)``.

    A mechanism keeps one (``mech.mcmc_cache``) so that its second MCMC release of a
    data set of the same size reuses the compiled model instead of compiling again:
    it looks the sampler up with :meth:`find` and, on a miss, compiles one and keeps
    it with :meth:`add` (the cache never builds a model itself). What is cached is only
    the compiled model: :meth:`CompiledSampler.sample` replaces all its data before
    every run. The manifold, the public ball and the model's structure are constants
    of the compiled graph; they are fixed when the mechanism is built. Copies and
    pickles of the cache are empty.

    The cached models keep the values of a data set in memory (nutpie's compiled
    model those it was compiled with, PyMC's model the last ones set) for as long
    as the mechanism lives; :meth:`clear` drops them.
    """

    def __init__(self):
        self._entries: dict = {}
        self._lock = threading.Lock()

    def find(self, n, sampler, backend) -> CompiledSampler | None:
        """The sampler compiled for data of size ``n``, or None."""
        with self._lock:
            return self._entries.get((int(n), sampler, backend))

    def add(self, n, compiled: CompiledSampler) -> CompiledSampler:
        """Keep ``compiled`` for data of size ``n``; returns the one kept (the first
        added under its key, should two threads have compiled the same model)."""
        key = (int(n), compiled.sampler, compiled.backend)
        with self._lock:
            return self._entries.setdefault(key, compiled)

    def keys(self):
        """The ``(n, sampler, backend)`` of the compiled samplers.

        Returns
        -------
        list of tuple
            One ``(n, sampler, backend)`` per kept sampler, in the order added.
        """
        return list(self._entries)

    def clear(self):
        """Drop every compiled sampler (and the data values they keep in memory)."""
        self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()


@contextlib.contextmanager
def _interruptions():
    """Note a Ctrl-C (SIGINT) while the samplers run, and raise it after them.

    nutpie (``abort()``) and PyMC catch ``KeyboardInterrupt`` while they sample and
    return the chains drawn so far: the release would go on from a run cut short in
    its tuning and end in a refusal (code 2) instead of an interruption (130). The
    handler records the signal and lets it through as before; the caller raises it.
    Signal handlers belong to the main thread: elsewhere nothing is installed.
    """
    hit = []
    if threading.current_thread() is not threading.main_thread():
        yield hit
        return
    previous = signal.getsignal(signal.SIGINT)

    def note(signum, frame):
        hit.append(signum)
        if callable(previous):
            previous(signum, frame)  # Python's default raises KeyboardInterrupt
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield hit
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:
        raise KeyboardInterrupt(
            "MCMC was interrupted (Ctrl-C): the chains drawn so far are not released"
        )


def _without_data(idata):
    """Drop the groups that copy the model's ``pm.Data`` (the private data)."""
    for group in ("constant_data", "observed_data"):
        if group in idata.children:
            del idata[group]
    return idata


def sample(
    model,
    sampler="nuts",
    settings=None,
    *,
    random_seed=None,
    draws=None,
    tune=None,
    chains=None,
    progressbar=None,
):
    """Run MCMC once on ``model`` with its current data; return the ArviZ ``DataTree``.

    Each call compiles the model: to sample one model structure for several data
    sets, keep a :class:`CompiledSampler`.

    Parameters
    ----------
    model : pymc.Model
        The model, sampled with the values its ``pm.Data`` hold now.
    sampler : {"nuts", "metropolis"}
        ``"nuts"`` uses nutpie when it is installed (faster adaptation, compiled
        with numba), PyMC's own NUTS otherwise; ``"metropolis"`` uses PyMC's
        random-walk Metropolis.
    settings : MCMCSettings, optional
        How long, and which NUTS implementation (default PyMC's 4 x (1,000 + 1,000),
        the one set of defaults; before issue 22 this function ran 2 chains by default),
        nutpie when installed).
    random_seed : int or None, optional
        Seed of the run; None draws one from the operating system.
    draws, tune, chains : int, optional
        Override the fields of ``settings``.
    progressbar : bool or None
        The sampler's own progress display, as :meth:`CompiledSampler.sample`
        (``None``: in a terminal only, not under CI).

    Returns
    -------
    DataTree
        As :meth:`CompiledSampler.sample`: ``posterior`` and ``sample_stats``,
        without the data.
    """
    s = MCMCSettings.resolve(settings, draws=draws, tune=tune, chains=chains)
    compiled = CompiledSampler(model, sampler, backend=s.backend)
    return compiled.sample(
        compiled.current_data(), s, random_seed=random_seed, progressbar=progressbar
    )
