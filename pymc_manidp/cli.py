"""Command line ``pymc-manidp``: ``demo``, ``release``, ``audit`` and ``reproduce``.

Errors in user input end the program with one line on stderr and exit code 2,
never a traceback. A failed privacy audit exits with code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pymc_manidp.files import MANIFOLDS

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (its default adds the usage block)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _status():
    """A spinner on stderr for long steps (plain text when stderr is not a terminal)."""
    from rich.console import Console

    return Console(stderr=True).status


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pymc-manidp",
        description="Differentially private releases on Riemannian manifolds.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser(
        "demo",
        help="the main job: a private mean of built-in sphere data, with diagnostics",
        description="Release a private mean location of the built-in European cities "
        "with the manifold Laplace mechanism and KNG, exactly (pure eps-DP) and with "
        "NUTS (diagnostics printed); writes a map and the curator's plots.",
    )
    p.add_argument("--seed", type=int, default=20211206, help="random seed")
    p.add_argument("--epsilon", type=float, default=1.0, help="privacy budget (default 1)")
    p.add_argument("--out", default="demo", help="folder for the figures (default: demo)")
    p.add_argument("--no-nuts", action="store_true", help="exact releases only (seconds)")

    p = sub.add_parser(
        "release",
        help="release a private mean of your data (.npy/.csv) as JSON",
        description="Release a private mean of the records in DATA (one per row; see "
        "pymc_manidp.files for the layouts) and write it with its provenance as JSON. "
        "The centre and radius of the public ball must be chosen without looking at "
        "the data.",
    )
    p.add_argument(
        "data",
        help="data file, .npy or .csv, one record per row; or data too big for memory, read "
        "in passes with Dask: a folder or glob of .npy shards, a .zarr store, Parquet files",
    )
    p.add_argument("--manifold", required=True, choices=MANIFOLDS)
    p.add_argument("--epsilon", required=True, type=float, help="privacy budget (> 0)")
    p.add_argument(
        "--center",
        required=True,
        help="centre of the public ball: comma-separated coordinates, 'identity' (spd) "
        "or a .npy/.csv file",
    )
    p.add_argument("--radius", required=True, type=float, help="radius of the public ball")
    p.add_argument("--mechanism", choices=("kng", "laplace"), default="kng")
    p.add_argument("--restrict", action="store_true", help="Laplace: restrict the law to the ball")
    p.add_argument(
        "--sampler",
        default="exact",
        help="exact (default, pure eps-DP), nuts or metropolis (approximately DP)",
    )
    p.add_argument("--draws", type=int, default=2000, help="MCMC draws per chain")
    p.add_argument("--tune", type=int, default=1000, help="MCMC tuning steps per chain")
    p.add_argument("--chains", type=int, default=4, help="MCMC chains")
    p.add_argument("--clip", action="store_true", help="project records outside the ball onto it")
    p.add_argument(
        "--skip-diagnostics",
        action="store_true",
        help="release even if the MCMC diagnostics fail (recorded in the output)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the passes over sharded data on this distributed cluster "
        "(e.g. tcp://10.0.0.5:8786; default: Dask's local scheduler)",
    )
    p.add_argument("--out", default="release.json", help="output JSON file ('-': stdout)")
    p.add_argument("--report", default=None, help="MCMC: folder for the curator's plots")
    p.add_argument(
        "--seed", type=int, default=None, help="fixed seed, for testing only (never written)"
    )

    p = sub.add_parser(
        "audit",
        help="audit a mechanism's privacy loss on worst-case neighbouring datasets",
        description="Quadrature audit (and optionally the black-box sample test) of a "
        "mechanism on neighbouring datasets; exits 1 if the audit fails. "
        "--sigma-divisor > 1 audits a deliberately broken variant.",
    )
    p.add_argument("--manifold", choices=tuple(AUDIT_SPACES), default="sphere")
    p.add_argument("--mechanism", choices=("laplace", "laplace-ball", "kng"), default="kng")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--radius", type=float, default=None, help="public radius (default per space)")
    p.add_argument("--n", type=int, default=10, help="records per dataset (default 10)")
    p.add_argument("--sigma-divisor", type=float, default=1.0, help="break the mechanism")
    p.add_argument("--resolution", type=int, default=None, help="quadrature nodes per axis")
    p.add_argument("--sample-test", action="store_true", help="also run the sample test")
    p.add_argument("--size", type=int, default=200_000, help="sample test draws per dataset")
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser(
        "reproduce",
        help="reproduce the papers' figures (PNG) and tables (CSV/JSON)",
        description="Reproduce a figure of the papers, or all of them: writes PNG figures, "
        "CSV tables of every plotted number and a JSON summary into OUT/<experiment>/.",
    )
    p.add_argument(
        "experiment",
        help="laplace2021_fig1, kng2022_fig1, kng2022_shapes, theorems, or all",
    )
    p.add_argument("--quick", action="store_true", help="scaled-down settings (minutes)")
    p.add_argument("--replicates", type=int, default=None, help="replicates per sample size (>= 2)")
    p.add_argument("--out", default="reproduction", help="output folder (default: reproduction)")
    p.add_argument("--seed", type=int, default=20211206, help="random seed")
    return parser


def _audit_spaces():
    import pymc_manidp as pmd

    # (manifold, public centre, default radius, default quadrature nodes per axis)
    return {
        "sphere": (pmd.Sphere(dim=2), np.array([0.0, 0, 1]), np.pi / 8, 400),
        "kendall3": (
            pmd.KendallShape(k_landmarks=3),
            np.array([[0.0, 0], [1, 0], [0, 1]]),
            np.pi / 16,
            400,
        ),
        "spd2": (pmd.SPD(k=2), np.eye(2), 1.0, 60),
    }


AUDIT_SPACES = ("sphere", "kendall3", "spd2")


def demo(args) -> int:
    """``pymc-manidp demo``: the README's main job."""
    from pymc_manidp.demo import run_demo

    with _status()("releasing (NUTS compiles its model the first time: about a minute)"):
        run_demo(seed=args.seed, epsilon=args.epsilon, out=args.out, nuts=not args.no_nuts)
    return 0


def release(args) -> int:
    """``pymc-manidp release``: a user's data in, the public release as JSON out."""
    import contextlib

    import pymc_manidp as pmd
    from pymc_manidp.files import manifold_for, parse_center, read_points, release_json
    from pymc_manidp.io import is_lazy_source, open_points, source_name
    from pymc_manidp.stats import reductions

    lazy = is_lazy_source(args.data)
    if args.scheduler is not None and not lazy:
        raise ValueError(
            "--scheduler runs the passes over sharded data (a folder or glob of .npy "
            "shards, .zarr, Parquet): a single .npy/.csv file is released in memory"
        )
    M, data = manifold_for(
        args.manifold, open_points(args.data) if lazy else read_points(args.data)
    )
    center = parse_center(args.center, M)
    if args.mechanism == "kng":
        mech = pmd.KNGMechanism(M, epsilon=args.epsilon, center=center, radius=args.radius)
    else:
        mech = pmd.LaplaceMechanism(
            M, epsilon=args.epsilon, center=center, radius=args.radius, restrict=args.restrict
        )
    with contextlib.ExitStack() as stack:
        if lazy:  # a progress bar per pass over the data instead of the spinner
            if args.scheduler is not None:
                from distributed import Client

                stack.enter_context(Client(args.scheduler))
            stack.enter_context(reductions.progress())
        else:
            stack.enter_context(_status()(f"releasing with the {args.sampler} sampler"))
        rel = mech.release(
            data,
            sampler=args.sampler,
            random_seed=args.seed,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            clip=args.clip,
            skip_diagnostics=args.skip_diagnostics,
        )
    doc = release_json(
        rel,
        manifold_name=args.manifold,
        manifold=M,
        center=center,
        radius=args.radius,
        options={"restrict": bool(mech.restricted), "clip": args.clip},
        source=source_name(args.data),
    )
    text = json.dumps(doc, indent=2)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text + "\n")
        print(f"wrote {args.out}: {rel.mechanism}, eps = {rel.epsilon:g}, delta = {rel.delta}")
        print(f"released value: {np.array2string(np.asarray(rel.value), precision=6)}")
    if rel.diagnostics is not None:  # for the curator: printed, never written to the JSON
        from pymc_manidp.privacy.diagnostics import report

        rep = report(rel, out=args.report)
        print("MCMC diagnostics (for the curator, not for publication):", file=sys.stderr)
        print(rep, file=sys.stderr)
        for f in rep.files:
            print(f"wrote {f}", file=sys.stderr)
        rep.close()
    return 0


def audit(args) -> int:
    """``pymc-manidp audit``: exit 0 when the audits pass, 1 when one fails."""
    import pymc_manidp as pmd
    from pymc_manidp.privacy.audit import (
        boundary_pair,
        quadrature_audit,
        sample_test,
        with_sigma_divided,
    )

    M, c, r0, res0 = _audit_spaces()[args.manifold]
    radius = r0 if args.radius is None else args.radius
    if args.mechanism == "kng":
        mech = pmd.KNGMechanism(M, epsilon=args.epsilon, center=c, radius=radius)
    else:
        mech = pmd.LaplaceMechanism(
            M,
            epsilon=args.epsilon,
            center=c,
            radius=radius,
            restrict=args.mechanism == "laplace-ball",
        )
    if args.sigma_divisor != 1.0:
        mech = with_sigma_divided(mech, args.sigma_divisor)
    res = args.resolution or res0
    with _status()(f"quadrature audit on a {res}-node grid per axis"):
        result = quadrature_audit(mech, n=args.n, resolution=res, random_seed=args.seed)
    print(result.summary())
    passed = result.passed
    if args.sample_test:
        pair = boundary_pair(mech.domain, args.n)
        with _status()(f"sample test with {args.size} draws per dataset"):
            st = sample_test(mech, pair.data, pair.neighbour, size=args.size, random_seed=args.seed)
        print(st.summary())
        passed = passed and st.passed
    return 0 if passed else 1


def reproduce(args) -> int:
    """``pymc-manidp reproduce``: run the experiments, print where the files went."""
    from pymc_manidp.experiments import run

    tables = run(
        args.experiment,
        quick=args.quick,
        replicates=args.replicates,
        out=args.out,
        seed=args.seed,
        progress=True,
    )
    for name in tables:
        print(f"{name}: figures and tables in {args.out}/{name}/")
    return 0


COMMANDS = {"demo": demo, "release": release, "audit": audit, "reproduce": reproduce}


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for bad input, one line on stderr)."""
    from pymc_manidp.privacy.diagnostics import DiagnosticsError
    from pymc_manidp.samplers.exact import ExactSamplingError

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, TypeError, OSError, DiagnosticsError, ExactSamplingError) as err:
        msg = " ".join(str(err).split())  # one line, whatever the message
        print(f"pymc-manidp {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pymc-manidp: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
