"""Profile (issue 38 item 6): where the first NUTS release of a process goes, with every
cache empty (cold) and then warm, on H², SO(3), S² and SPD(2).

Each case runs twice, each time in a new Python process: first with empty caches (a new
temporary ``HOME`` and ``XDG_CACHE_HOME``, so the package's cache of nutpie's entry
points is empty; a new ``PYTENSOR_FLAGS=base_compiledir``; a new ``NUMBA_CACHE_DIR``),
then again with the same folders (warm). The child times, inside ``mech.release(data,
sampler="nuts")`` with its defaults:

- ``import``: ``import pymc_manidp`` and the MCMC layer (PyMC, PyTensor, nutpie);
- ``check``: the data against the public ball (``DataDomain.check``);
- ``mode``: the density's mode and inputs (``mcmc_inputs``: the Fréchet mean);
- ``model``: building the ``pm.Model`` (``mcmc.polar_model``);
- ``compile``: ``CompiledSampler(...)``: nutpie's numba compile (or the cache's load),
  of which ``graphs`` is PyTensor's part (rewriting the log-density and its gradient,
  and the expansion to the traced variables, into numba functions: nutpie's
  ``_make_functions``), ``logp`` and ``expand`` numba's compile (LLVM) of the two entry
  points nutpie calls (``mcmc.nutpie_cache._cfunc``; a load when cached);
- ``sample``: ``CompiledSampler.sample``, of which ``nuts`` is nutpie's own time
  (tuning and draws; ``tune_share`` = the tuning steps' share of the leapfrog steps);
- ``gate``: the diagnostics (``check_run``); ``release``: the whole call; of which
  ``numba_init``, numba's compiler context set up at its first use in the process (its
  registries imported and installed: ``BaseContext.refresh``, whichever step loads or
  compiles the first numba function: ``check`` on S², ``compile`` on SO(3)), and
  ``dask_import``, xarray importing ``dask.array`` at its first ``DataArray`` when Dask
  is installed (nutpie's conversion of the draws, inside ``sample``): one-time costs of
  the dependencies that a second release in the process, or any earlier use of numba or
  xarray, does not pay; ``total``:
  from the interpreter's start; ``release CPU``: the release call's CPU seconds (all
  threads of the child); ``CPU``: user + sys seconds of the whole child (all threads).

``--variants`` (comma-separated, default ``nutpie``) runs each case through several
NUTS paths, each with its own empty folders, cold then warm, one case after the other
(side by side in one run):

- ``nutpie``: the release's default path (nutpie, numba, the entry points cached by
  :mod:`pymc_manidp.mcmc.nutpie_cache`);
- ``pymc-c``: PyMC's own NUTS (``PYMC_MANIDP_NUTS_BACKEND=pymc``) with PyTensor's C
  backend (``PYTENSOR_FLAGS=linker=cvm``: C modules compiled by the C++ compiler,
  cached in the new ``base_compiledir``); PyMC compiles inside ``sample``;
- ``nutpie-graph``: ``nutpie`` with the law's PyTensor graph instead of the fused
  density (``PYMC_MANIDP_NUTS_DENSITY=graph``: the path of every release before the
  fused densities, issue 38 item 6);
- ``nutpie-nodask``: ``nutpie`` with ``dask`` hidden from the child, as on an install
  without the ``[dask]`` extra (xarray imports ``dask.array`` at its first
  ``DataArray`` when it can: nutpie's conversion of the draws);
- ``pymc-numba``: PyMC's own NUTS on PyTensor's default (numba) backend;
- ``nutpie-jax``: ``nutpie.compile_pymc_model(model, backend="jax",
  gradient_backend="jax", freeze_model=False)``, with JAX's persistent cache of
  compiled XLA programs in the new folder (``JAX_COMPILATION_CACHE_DIR``); JAX is not
  a dependency: put it on ``PYTHONPATH``.

With ``--profile`` the cold child also writes a cProfile of the release call and prints
its 15 costliest functions (own CPU time); ``--profile-warm`` does so for the warm child.

``--warm ROOT`` (with ``--variants`` and one case) only runs warm children, each
variant in turn, ``--rounds`` times (default 3), on the folders ``ROOT`` a cold run
filled (its ``manidp-first-release-*`` folder): side by side on one warm cache.

Run::

    PYTHONPATH=$PWD .venv/bin/python docs/benchmarks/profile_first_release.py \\
        H2:KNG:1000 SO3:Laplace:23648 [--profile | --profile-warm]
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

T_START = time.perf_counter()
PHASES = (
    "import",
    "check",
    "mode",
    "model",
    "compile",
    "graphs",
    "logp",
    "expand",
    "sample",
    "nuts",
    "gate",
    "release",
    "numba_init",
    "dask_import",
)


def _data(space, n):
    import numpy as np

    import pymc_manidp as pmd

    rng = np.random.default_rng(0)
    if space == "H2":
        M, center, radius = pmd.Hyperbolic(dim=2), np.array([1.0, 0.0, 0.0]), 1.0
    elif space == "SO3":
        M, center, radius = pmd.Rotations(), np.eye(3), 0.5
    elif space == "S2":
        M, center, radius = pmd.Sphere(dim=2), np.array([0.0, 0.0, 1.0]), 0.5
    elif space == "SPD2":
        M, center, radius = pmd.SPD(2), np.eye(2), 1.0
    elif space == "R3":
        M, center, radius = pmd.Euclidean(dim=3), np.zeros(3), 1.0
    elif space == "K4":  # planar shapes of 4 landmarks: the unit square's, radius 0.3
        M = pmd.KendallShape(4)
        center = M.validate(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]))
        radius = 0.3  # below r* = pi/8
    else:
        raise SystemExit(f"unknown space {space}: H2, SO3, S2, SPD2, R3 or K4")
    coords = rng.normal(size=(n, M.dim)) * 0.25 * radius
    coords *= np.minimum(1.0, 0.9 * radius / np.linalg.norm(coords, axis=-1))[:, None]
    return M, center, radius, M.exp_coords(center, coords)


def _use_nutpie_jax(mcmc):
    """Route the release's NUTS through nutpie's JAX backend (a measurement only: a
    first release's model holds its own data, so it is sampled as compiled)."""
    import nutpie

    from pymc_manidp.mcmc import sampling

    class Keys(dict):  # CompiledSampler checks that every pm.Data is read
        pass

    def compile_jax(model):  # XLA compiles in every process: nothing cached on disk
        compiled = nutpie.compile_pymc_model(
            model, backend="jax", gradient_backend="jax", freeze_model=False
        )
        object.__setattr__(compiled, "shared_var_keys", {v: v.name for v in model.data_vars})
        return compiled, 0

    def sample_jax(self, values, s, random_seed, progressbar=False):
        seed = int(np.random.default_rng(random_seed).integers(2**63 - 1))
        t0 = time.time()
        idata = nutpie.sample(
            self._compiled,
            draws=s.draws,
            tune=s.tune,
            chains=s.chains,
            seed=seed,
            save_warmup=False,
            progress_bar=False,
            target_accept=s.target_accept,
        )
        idata.posterior.attrs["sampling_time"] = time.time() - t0
        idata.posterior.attrs["tuning_steps"] = s.tune
        return self._record(idata)

    sampling._compile_nutpie_or_fallback = compile_jax
    mcmc.CompiledSampler._sample_nutpie = sample_jax


def _time_first_uses(timed):
    """Time numba's context refreshes (outermost calls) and xarray's probe of Dask."""
    from numba.core.base import BaseContext
    from xarray.namedarray import pycompat

    refresh, depth = BaseContext.refresh, [0]
    timed_refresh = timed("numba_init", refresh)

    def outermost(self):  # refresh calls itself: count the outer call only
        depth[0] += 1
        try:
            return timed_refresh(self) if depth[0] == 1 else refresh(self)
        finally:
            depth[0] -= 1

    BaseContext.refresh = outermost
    probe = pycompat.DuckArrayModule.__init__
    timed_probe = timed("dask_import", probe)
    pycompat.DuckArrayModule.__init__ = lambda self, mod: (
        timed_probe(self, mod) if mod == "dask" else probe(self, mod)
    )


def child(case, profile):
    if os.environ.get("BENCH_VARIANT") == "nutpie-nodask":
        # as on an install without the [dask] extra: xarray's first DataArray (nutpie's
        # conversion of the draws) imports dask.array when it can
        sys.modules["dask"] = None
    timings = {}
    t0 = time.perf_counter()
    import nutpie.compile_pymc

    import pymc_manidp as pmd
    from pymc_manidp import mcmc
    from pymc_manidp.mcmc import nutpie_cache
    from pymc_manidp.mechanisms import base

    timings["import"] = time.perf_counter() - t0

    def timed(label, fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[label] = timings.get(label, 0.0) + time.perf_counter() - t

        return wrapper

    space, mechanism, n = case.split(":")
    M, center, radius, data = _data(space, int(n))
    cls = {"KNG": pmd.KNGMechanism, "Laplace": pmd.LaplaceMechanism}[mechanism]
    mech = cls(M, epsilon=1.0, center=center, radius=radius)
    type(mech.domain).check = timed("check", type(mech.domain).check)
    cls.mcmc_inputs = timed("mode", cls.mcmc_inputs)
    mcmc.polar_model = timed("model", mcmc.polar_model)
    mcmc.fused_model = timed("model", mcmc.fused_model)
    mcmc.CompiledSampler.__init__ = timed("compile", mcmc.CompiledSampler.__init__)
    mcmc.CompiledSampler.sample = timed("sample", mcmc.CompiledSampler.sample)
    base.check_run = timed("gate", base.check_run)
    nutpie.compile_pymc._make_functions = timed("graphs", nutpie.compile_pymc._make_functions)
    cfunc = nutpie_cache._cfunc

    def by_kind(src, name, *args, **kwargs):
        return timed(name.removesuffix("_wrapper"), cfunc)(src, name, *args, **kwargs)

    nutpie_cache._cfunc = by_kind
    _time_first_uses(timed)
    if os.environ.get("BENCH_VARIANT") == "nutpie-jax":
        _use_nutpie_jax(mcmc)
    t0, cpu0 = time.perf_counter(), time.process_time()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile(time.process_time)  # CPU: the machine is shared
        rel = prof.runcall(mech.release, data, sampler="nuts", random_seed=1)
        timings["release"] = time.perf_counter() - t0
        path = os.path.join(tempfile.gettempdir(), f"first_release_{space}_{mechanism}.prof")
        prof.dump_stats(path)
        print(f"PROFILE {path}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    else:
        rel = mech.release(data, sampler="nuts", random_seed=1)
        timings["release"] = time.perf_counter() - t0
    release_cpu = time.process_time() - cpu0
    post = rel.diagnostics.posterior
    timings["nuts"] = float(post.attrs.get("sampling_time", float("nan")))
    tune, draws = int(post.attrs.get("tuning_steps", 0)), post.sizes["draw"]
    stats = rel.diagnostics.sample_stats
    steps = float(stats["n_steps"].sum()) if "n_steps" in stats else float("nan")
    hits = mech.mcmc_cache.find(len(data), "nuts", rel.sampler_info["backend"]).cache_hits
    total = time.perf_counter() - T_START
    print(
        "ROW",
        rel.sampler_info["backend"],
        hits,
        " ".join(f"{timings.get(p, float('nan')):.2f}" for p in PHASES),
        f"{release_cpu:.2f}",
        f"{total:.2f}",
        f"{tune}/{draws}",
        f"{steps:.0f}",
        flush=True,
    )


def _run(case, env, profile):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    args = [sys.executable, __file__, "--child", case] + (["--profile"] if profile else [])
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows = [line for line in out.stdout.splitlines() if line.startswith("ROW")]
    if not rows:
        print(out.stdout[-3000:], out.stderr[-4000:])
        raise SystemExit("child failed")
    if profile:
        print("\n".join(line for line in out.stdout.splitlines() if not line.startswith("ROW")))
    _, backend, hits, *numbers = rows[0].split()
    return f"{backend} | {hits} | {' | '.join(numbers)} | {wall:.2f} | {cpu:.2f}"


_BACKEND = {
    "nutpie": "nutpie",
    "nutpie-graph": "nutpie",
    "nutpie-nodask": "nutpie",
    "nutpie-jax": "nutpie",
    "pymc-c": "pymc",
    "pymc-numba": "pymc",
}


def main(cases, profile, variants=("nutpie",), warm=None, rounds=3):
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    head = [
        "case",
        "variant",
        "caches",
        "backend",
        "cache hits",
        *PHASES,
        "release CPU",
        "total",
        "tune/draws",
    ]
    print("| " + " | ".join([*head, "leapfrogs", "wall", "CPU", "load"]) + " |")
    print("|---" * (len(head) + 4) + "|")
    if warm is not None:  # warm children only, the variants interleaved, on one cache
        for _ in range(rounds):
            for variant in variants:
                row = _run(cases[0], _env(warm, variant), profile == "warm")
                load = os.getloadavg()[0]
                print(f"| {cases[0]} | {variant} | warm | {row} | {load:.1f} |", flush=True)
        return
    for case in cases:
        for variant in variants:
            env = _env(tempfile.mkdtemp(prefix="manidp-first-release-"), variant)
            for label in ("cold", "warm"):
                row = _run(case, env, profile == label)
                load = os.getloadavg()[0]
                print(f"| {case} | {variant} | {label} | {row} | {load:.1f} |", flush=True)


def _env(root, variant):
    """The child's environment: every cache in the folder ``root``."""
    flags = f"base_compiledir={os.path.join(root, 'pytensor')}"
    env = dict(
        os.environ,
        HOME=root,
        XDG_CACHE_HOME=os.path.join(root, "cache"),
        NUMBA_CACHE_DIR=os.path.join(root, "numba"),
        PYTENSOR_FLAGS=flags + (",linker=cvm" if variant == "pymc-c" else ""),
        PYMC_MANIDP_NUTS_BACKEND=_BACKEND[variant],
        BENCH_VARIANT=variant,
        PYMC_MANIDP_NUTS_DENSITY="graph" if variant == "nutpie-graph" else "auto",
    )
    if variant == "nutpie-jax":  # JAX's own persistent cache of XLA programs
        env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(root, "jax")
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env.pop("PYMC_MANIDP_CACHE_DIR", None)
    return env


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--child" in argv:
        child(argv[1], "--profile" in argv)
    else:
        profile = "cold" if "--profile" in argv else "warm" if "--profile-warm" in argv else ""
        variants = ["nutpie"]
        if "--variants" in argv:
            i = argv.index("--variants")
            variants = argv.pop(i + 1).split(",")
            argv.pop(i)
        opts = {}
        for flag, kind in (("--warm", str), ("--rounds", int)):
            if flag in argv:
                i = argv.index(flag)
                opts[flag[2:]] = kind(argv.pop(i + 1))
                argv.pop(i)
        cases = [a for a in argv if not a.startswith("--")] or ["H2:KNG:1000"]
        main(cases, profile, variants, **opts)
