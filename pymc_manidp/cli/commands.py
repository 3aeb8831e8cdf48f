"""Command line ``pymc-manidp``: ``demo``, ``release``, ``budget``, ``audit`` and
``reproduce``.

Every failure ends the program with one line on stderr, never a traceback. Exit codes
(docs/cli.md):

- 0: success;
- 1: the privacy audit ran and failed (``audit`` only);
- 2: bad input or a refused release (docs/cli.md lists every class: a missing or
  malformed input, an output that is an input, a cluster that is not one, a bad
  environment variable, a failed premise, diagnostics, a sampler cap);
- 3: an unexpected internal error (a bug: please report the line printed);
- 4: the release was made (and charged to ``--budget``) but its output could not be
  written; the ledger keeps its public record (``pymc-manidp budget LEDGER --json``);
- 130: interrupted (Ctrl-C);
- 141: the reader of standard output closed it early (``--out - | head``): what was
  asked for was done (a release was made and charged) and its output cut short.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

from pymc_manidp.environment import environment_problem

# Nothing heavy is imported here: NumPy, PyTensor and the package load inside main(),
# where a Ctrl-C during the seconds of imports exits 130 with one line, and after
# PyTensor's compile folder is known to be writable.

__all__ = [
    "EXIT_AUDIT_FAILED",
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_OUTPUT_LOST",
    "build_parser",
    "main",
]


class OutputLostError(OSError):
    """A release was made (and maybe charged) but writing its output failed."""


EXIT_AUDIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_OUTPUT_LOST = 4
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a writer killed by it


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help with each option's default stated from the parser itself, so the
    help cannot disagree with what is used (issue 38 item 10). ``None`` and ``False``
    mean "not given" and are not printed: where a not-given option still has a default
    (the MCMC settings' own), its help states it."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "%(default)" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (its default adds the usage block) and each
    option's default in its help."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        self.options = []  # every option added, for the errors' keywords (_keyword_options)
        self.commands = {}  # a command's name -> its parser
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.options.append(action)
        return action

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _status():
    """A spinner on stderr for long steps (plain text when stderr is not a terminal)."""
    from rich.console import Console

    return Console(stderr=True).status


class _SettingsDefault:
    """``MCMCSettings``' default of one field, for ``--help``: looked up when the help is
    printed, so building the parser imports no MCMC code."""

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        from pymc_manidp.mcmc.settings import MCMCSettings

        return str(getattr(MCMCSettings(), self.name))


def build_parser() -> argparse.ArgumentParser:
    from pymc_manidp.io.files import MANIFOLDS

    parser = _Parser(
        prog="pymc-manidp",
        description="Differentially private releases on Riemannian manifolds.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.commands = sub.choices

    p = sub.add_parser(
        "demo",
        help="the main job: a private mean of built-in sphere data, with diagnostics",
        description="Release a private mean location of the built-in European cities "
        "with the manifold Laplace mechanism and KNG, exactly (pure eps-DP) and with "
        "NUTS (diagnostics printed); writes a map and the curator's plots.",
    )
    p.add_argument("--seed", type=int, default=20211206, help="random seed")
    p.add_argument("--epsilon", type=float, default=1.0, help="privacy budget")
    p.add_argument("--out", default="demo", help="folder for the figures")
    p.add_argument("--no-nuts", action="store_true", help="exact releases only (seconds)")

    p = sub.add_parser(
        "release",
        help="release a private mean (or KNG median) of your data (.npy/.csv) as JSON",
        description="Release a private mean of the records in DATA (one per row; see "
        "pymc_manidp.io.files for the layouts) and write it with its provenance as JSON. "
        "The center and radius of the public ball must be chosen without looking at "
        "the data.",
    )
    p.add_argument(
        "data",
        help="data file, .npy or .csv, one record per row; or data too big for memory, read "
        "in passes with Dask: a folder or glob of .npy shards, a .zarr store, Parquet files",
    )
    p.add_argument("--manifold", required=True, choices=MANIFOLDS, help="the space of the records")
    p.add_argument(
        "--epsilon", required=True, type=_number("--epsilon"), help="privacy budget (> 0)"
    )
    p.add_argument(
        "--center",
        required=True,
        help="center of the public ball: comma-separated coordinates, 'identity' (the space's "
        "origin: I on spd and rotations) "
        "or a .npy/.csv file",
    )
    p.add_argument("--radius", required=True, type=float, help="radius of the public ball")
    p.add_argument(
        "--mechanism",
        choices=("kng", "laplace"),
        default="kng",
        help="the K-norm gradient mechanism or the manifold Laplace",
    )
    p.add_argument("--restrict", action="store_true", help="Laplace: restrict the law to the ball")
    p.add_argument(
        "--statistic",
        choices=("mean", "median"),
        default=None,
        help="KNG: release a private Fréchet mean or median (robust to outliers) (default: mean)",
    )
    p.add_argument(
        "--sampler",
        default="exact",
        help="exact (pure eps-DP), nuts or metropolis (approximately DP)",
    )
    for name, text in zip(
        MCMC_OPTIONS,
        ("MCMC draws per chain", "MCMC tuning steps per chain", "MCMC chains"),
        strict=True,
    ):
        # not given (None), the release uses MCMCSettings' default: the one set
        text = f"{text} (default: %(settings_default)s)"
        action = p.add_argument(f"--{name}", type=int, default=None, help=text)
        action.settings_default = _SettingsDefault(name)
    p.add_argument("--clip", action="store_true", help="project records outside the ball onto it")
    p.add_argument(
        "--project",
        action="store_true",
        help="move records that are on the manifold up to rounding to the nearest point of "
        "it (rotations: by SVD; sphere: normalized; spd: symmetrized, eigenvalues floored); "
        "recorded in the output",
    )
    p.add_argument(
        "--layout",
        choices=("quaternion", "poincare"),
        default=None,
        help="the file holds another layout: quaternion (rotations, 4 columns, scalar last as "
        "SciPy) or poincare (hyperbolic, d columns of Poincaré-ball points, read as H^d)",
    )
    p.add_argument(
        "--scalar-first",
        action="store_true",
        help="with --layout quaternion: the columns are w, x, y, z (default x, y, z, w)",
    )
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
    p.add_argument(
        "--out",
        default="release.json",
        help="output JSON file, a regular file or a new path ('-': stdout)",
    )
    p.add_argument(
        "--budget",
        default=None,
        metavar="LEDGER",
        help="charge the release to this privacy budget's ledger (JSON) before the data are "
        "read; refused if it would overspend. Created with --budget-epsilon if missing",
    )
    p.add_argument(
        "--budget-epsilon",
        type=_number("--budget-epsilon"),
        default=None,
        help="the total epsilon of a new ledger (checked against an existing one)",
    )
    p.add_argument(
        "--budget-delta",
        type=_number("--budget-delta"),
        default=None,
        help="the total delta of a new ledger (default: 0)",
    )
    p.add_argument(
        "--composition",
        choices=("basic", "optimal"),
        default=None,
        help="how a new ledger composes releases (optimal needs dp-accounting and "
        "--budget-plan) (default: basic)",
    )
    p.add_argument(
        "--budget-plan",
        default=None,
        metavar="EPS[:DELTA],...",
        help="with --composition optimal: every charge the new ledger will admit, in order, "
        "declared before its first release (e.g. 0.4,0.4,0.2); optimal composition holds for "
        "(epsilon, delta) fixed in advance",
    )
    p.add_argument(
        "--delta",
        type=_number("--delta"),
        default=None,
        help="MCMC with --budget: the delta you assume for the release (charged, and recorded "
        "as your assumption: an MCMC release has no proved delta)",
    )
    p.add_argument(
        "--estimate-delta",
        action="store_true",
        help="MCMC: estimate the release's delta by coupling (for the curator; with --budget "
        "recorded in the ledger's 'estimated, not proved' column, never in its total)",
    )
    p.add_argument("--report", default=None, help="MCMC: folder for the curator's plots")
    p.add_argument(
        "--header",
        action="store_true",
        help="the CSV's first line is a header (default: only if none of its fields is a number)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="fixed seed, for testing only (never written; needs --allow-fixed-seed)",
    )
    p.add_argument(
        "--allow-fixed-seed",
        action="store_true",
        help="accept --seed: the release is then reproducible by anyone who guesses the seed",
    )

    p = sub.add_parser(
        "budget",
        help="print a privacy budget's ledger: spent, left, and every charge",
        description="Check a ledger written by 'release --budget' (its checksum, entries and "
        "totals) and print what may be published: the budget, what is spent and left, and "
        "every charge with its release. The data set's fingerprint and the delta estimates "
        "stay in the file.",
    )
    p.add_argument("ledger", help="the ledger file (JSON)")
    p.add_argument("--json", action="store_true", help="print the public ledger as JSON")

    p = sub.add_parser(
        "audit",
        help="audit a mechanism's privacy loss on worst-case neighbouring datasets",
        description="Quadrature audit (and optionally the black-box sample test) of a "
        "mechanism on neighbouring datasets; exits 1 if the audit fails. "
        "--sigma-divisor > 1 audits a deliberately broken variant.",
    )
    p.add_argument(
        "--manifold", choices=tuple(_audit_spaces()), default="sphere", help="the space audited"
    )
    p.add_argument(
        "--mechanism",
        choices=("laplace", "laplace-ball", "kng"),
        default="kng",
        help="the mechanism audited (laplace-ball: the Laplace restricted to the ball)",
    )
    p.add_argument("--epsilon", type=float, default=1.0, help="the epsilon audited")
    p.add_argument("--radius", type=float, default=None, help="public radius (default: per space)")
    p.add_argument("--n", type=int, default=10, help="records per dataset")
    p.add_argument("--sigma-divisor", type=float, default=1.0, help="break the mechanism")
    p.add_argument(
        "--resolution",
        type=int,
        default=None,
        help="quadrature nodes per axis (>= 4) (default: per space)",
    )
    p.add_argument(
        "--t-max",
        type=float,
        default=None,
        help="truncation radius of the quadrature for an unrestricted law on a non-compact "
        "space (spd laplace), around each density's mode; the tail beyond it is not audited",
    )
    p.add_argument("--sample-test", action="store_true", help="also run the sample test")
    p.add_argument("--size", type=int, default=200_000, help="sample test draws per dataset")
    p.add_argument("--seed", type=int, default=0, help="random seed")

    p = sub.add_parser(
        "reproduce",
        help="reproduce the papers' figures (PNG) and tables (CSV/JSON)",
        description="Reproduce a figure of the papers, or all of them: writes PNG figures, "
        "CSV tables of every plotted number and a JSON summary into OUT/<experiment>/.",
    )
    p.add_argument(
        "experiment",
        help="laplace2021_sensitivity, laplace2021_fig1, kng2022_fig1, kng2022_shapes, "
        "theorems, median_robustness, or all",
    )
    p.add_argument("--quick", action="store_true", help="scaled-down settings (minutes)")
    p.add_argument("--replicates", type=int, default=None, help="replicates per sample size (>= 2)")
    p.add_argument("--out", default="reproduction", help="output folder")
    p.add_argument("--seed", type=int, default=20211206, help="random seed")
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the replicates on this distributed cluster (e.g. tcp://10.0.0.5:8786; "
        "default: Dask's local scheduler, 2 worker processes)",
    )
    p.add_argument(
        "--doc",
        default=None,
        help="after a full run, rewrite the generated number blocks of this document "
        "(docs/reproduction.md) from the files in OUT",
    )
    return parser


#: older names of the audited spaces, kept so that scripts written for them still run
AUDIT_ALIASES = {"kendall3": "kendall", "spd2": "spd"}


def _audit_spaces():
    """``--manifold`` of ``audit`` -> (manifold, public center, radius, resolution).

    Every named space of :mod:`pymc_manidp.geometry` that offers an audit
    (``audit_space``), under its name and its older alias.
    """
    from pymc_manidp.geometry import manifold_class, manifold_names

    spaces = {}
    for name in manifold_names():
        space = manifold_class(name).audit_space()
        if space is not None:
            spaces[name] = space
    spaces.update({old: spaces[new] for old, new in AUDIT_ALIASES.items() if new in spaces})
    return spaces


def demo(args) -> int:
    """``pymc-manidp demo``: the README's main job."""
    from pymc_manidp.demo import run_demo

    with _status()("releasing (NUTS compiles its model the first time: about a minute)"):
        run_demo(seed=args.seed, epsilon=args.epsilon, out=args.out, nuts=not args.no_nuts)
    return 0


#: the MCMC options; their defaults are ``pymc_manidp.mcmc.MCMCSettings``'s, the one set
MCMC_OPTIONS = ("draws", "tune", "chains")


def _refuse_ignored_options(args) -> None:
    """Options that would be silently ignored for this release are errors instead."""
    ignored = []
    if args.sampler == "exact":
        ignored += [f"--{k}" for k in MCMC_OPTIONS if getattr(args, k) is not None]
        ignored += ["--report"] * (args.report is not None)
        ignored += ["--skip-diagnostics"] * args.skip_diagnostics
        ignored += ["--delta"] * (args.delta is not None)
        ignored += ["--estimate-delta"] * args.estimate_delta
    if args.mechanism == "kng" and args.restrict:
        ignored.append("--restrict")
    if args.mechanism == "laplace" and args.statistic is not None:
        ignored.append("--statistic")
    if args.budget is None:
        for k in ("budget_epsilon", "budget_delta", "composition", "budget_plan", "delta"):
            if getattr(args, k) is not None:
                raise ValueError(
                    f"--{k.replace('_', '-')} is for a release charged to a ledger: add "
                    "--budget LEDGER, or drop it"
                )
    if ignored:
        raise ValueError(
            f"{', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect on a "
            f"{args.mechanism} release with the {args.sampler} sampler (--restrict is for "
            "--mechanism laplace, --statistic for kng; --draws/--tune/--chains/--report/"
            "--skip-diagnostics/--delta/--estimate-delta are for --sampler nuts or "
            "metropolis): drop them"
        )
    if args.seed is not None and not args.allow_fixed_seed:
        raise ValueError(
            "--seed makes the noise reproducible by anyone who guesses the seed, which can "
            "undo the privacy of a real release: omit it (OS entropy), or pass "
            "--allow-fixed-seed for tests"
        )


def _input_paths(args) -> list[Path]:
    """Every file the release reads: the data (a folder's or pattern's members, a
    ``.zarr`` store's folder) and a center file."""
    from pymc_manidp.io.stores import input_files, is_lazy_source

    paths = []
    if is_lazy_source(args.data):
        try:
            paths += input_files(args.data)
        except ValueError:  # nothing readable there: the reader names the problem later
            pass
    else:
        paths.append(Path(args.data))
    if str(args.center).strip().lower().endswith((".npy", ".csv", ".txt")):
        paths.append(Path(str(args.center).strip()))
    if getattr(args, "budget", None) is not None:  # the ledger is read and rewritten
        paths.append(Path(args.budget))
    return paths


def _stdout_is_open() -> bool:
    """False when standard output is closed (``>&-``): Python then sets ``sys.stdout``
    to None and ``print`` writes nowhere, silently."""
    if sys.stdout is None:
        return False
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): trust it
        return True
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _is_ledger(path: Path) -> bool:
    """``path`` is a regular file that starts as a privacy ledger does."""
    from pymc_manidp.privacy.budget import FORMAT

    try:  # non-blocking: a FIFO would otherwise wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and FORMAT.encode() in os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one file by any names (False if either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _resolve(path: Path) -> Path:
    """``path.resolve()``, a loop of symbolic links refused as the user's error (pathlib
    raises RuntimeError for it)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as err:
        raise ValueError(
            f"{path} cannot be resolved: a loop of symbolic links, or {err}; name a file"
        ) from None


def _check_out(args) -> Path | None:
    """The output file, checked before any sampling: no input, a writable folder.

    An input is any file the release reads, after resolving folders, patterns and
    symbolic links (and hard links: the same file by any name); a name ending in
    ``/`` is a folder, and a folder is never the output. An existing output must be a
    regular file, and neither a privacy ledger nor a ledger's lock file: the record
    replaces it (``os.replace``), which would turn a device (``/dev/null``) or a FIFO
    into a plain file, lose a ledger, or give a lock a new inode that the next writer
    locks while another holds the old one. ``-`` (standard output) must be open.
    """
    if args.out == "-":
        if not _stdout_is_open():
            raise ValueError(
                "--out -: standard output is closed, so the release would be printed "
                "nowhere (and charged to a --budget all the same): open it (e.g. "
                "> release.json) or write to --out FILE"
            )
        return None
    out = Path(args.out)
    if args.out.endswith(("/", os.sep)) or args.out in (".", ".."):
        what = "is a folder" if out.is_dir() else "names a folder that does not exist"
        raise ValueError(f"--out {args.out} {what}: name a file, e.g. {out / 'release.json'}")
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except OSError as err:  # e.g. a component that is not a folder
        raise ValueError(f"--out {out}: {err.strerror or err}") from None
    target = _resolve(out)
    # the ledger is written by the release even when it does not exist yet
    if getattr(args, "budget", None) is not None:
        from pymc_manidp.io.ledger import LedgerFile

        ledger = LedgerFile(args.budget)
        for name, path in (("the ledger", ledger.path), ("the ledger's lock", ledger.lock_path)):
            if target == _resolve(path) or _same_file(out, path):
                raise ValueError(
                    f"--out {out} is {name} of --budget {args.budget}: write elsewhere"
                )
    if st is not None and (
        _is_ledger(out) or (out.name.endswith(".lock") and _is_ledger(out.with_suffix("")))
    ):
        raise ValueError(
            f"--out {out} is a privacy ledger or a ledger's lock file: replacing it would "
            "lose the ledger's charges or defeat its lock; write elsewhere"
        )
    for src in _input_paths(args):
        if not src.exists():
            continue
        same = target == _resolve(src) or _same_file(out, src)
        if same or (src.is_dir() and _resolve(src) in target.parents):
            raise ValueError(
                f"--out {out} is {'inside ' if not same else ''}the input {src}: it would "
                "be overwritten; write the release elsewhere"
            )
    # after the inputs and ledgers, whose messages say more; the same check as
    # Release.to_json's (io.files.check_output_target)
    from pymc_manidp.io.files import check_output_target

    try:
        check_output_target(out, label=f"--out {out}")
    except ValueError as err:
        if "not a regular file" in str(err):
            raise ValueError(f"{err} (--out - for standard output)") from None
        raise
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"--out {out}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (st is not None and not os.access(out, os.W_OK)):
        raise ValueError(f"--out {out}: not writable")
    return out


def _write_atomic(out: Path, text: str) -> None:
    """Write ``text`` to ``out`` whole or not at all (``io.files.write_atomic``)."""
    from pymc_manidp.io.files import write_atomic

    write_atomic(out, text)


def release(args) -> int:
    """``pymc-manidp release``: a user's data in, the public release as JSON out."""
    import pymc_manidp as pmd
    from pymc_manidp.io.files import manifold_for, parse_center, read_points, release_json
    from pymc_manidp.io.stores import is_lazy_source, open_points, source_name
    from pymc_manidp.stats import reductions

    _refuse_ignored_options(args)
    out = _check_out(args)
    if args.budget is not None:  # a FIFO, a device, a linked ledger: refused before any read
        from pymc_manidp.io.ledger import check_ledger_path

        check_ledger_path(args.budget)
    with _ledger_keywords():
        new = _new_budget(args)
    if args.seed is not None:
        print(
            "pymc-manidp release: WARNING: fixed seed: this release is reproducible by "
            "anyone who guesses the seed; never publish it",
            file=sys.stderr,
        )
    lazy = is_lazy_source(args.data)
    if args.scheduler is not None and not lazy:
        raise ValueError(
            "--scheduler runs the passes over sharded data (a folder or glob of .npy "
            "shards, .zarr, Parquet): a single .npy/.csv file is released in memory"
        )
    if lazy and args.header:
        raise ValueError("--header applies to CSV files only: sharded data have no header")
    M, data = manifold_for(
        args.manifold,
        open_points(args.data) if lazy else read_points(args.data, header=args.header or None),
        layout=args.layout,
        scalar_first=args.scalar_first,
    )
    center = parse_center(args.center, M)
    if args.mechanism == "kng":
        mech = pmd.KNGMechanism(
            M,
            epsilon=args.epsilon,
            center=center,
            radius=args.radius,
            statistic=args.statistic or "mean",
        )
    else:
        mech = pmd.LaplaceMechanism(
            M, epsilon=args.epsilon, center=center, radius=args.radius, restrict=args.restrict
        )
    # options not given are left to the release (None): the defaults live in one place
    mcmc = {k: getattr(args, k) for k in MCMC_OPTIONS}
    budget = None
    if args.budget is not None:
        from pymc_manidp.io.ledger import open_ledger

        # refused here (another data set's ledger, a damaged one) before any release
        with _ledger_keywords():
            budget = open_ledger(args.budget, data=data, **new)
        if args.sampler != "exact":
            mcmc.update(delta=args.delta, estimate_delta=args.estimate_delta)
    elif args.estimate_delta:
        mcmc["estimate_delta"] = True
    with contextlib.ExitStack() as stack:
        if lazy:  # a progress bar per pass over the data instead of the spinner
            if args.scheduler is not None:
                from pymc_manidp.experiments._common import connected

                stack.enter_context(connected(args.scheduler, quiet=True))
            stack.enter_context(reductions.progress())
        else:
            stack.enter_context(_status()(f"releasing with the {args.sampler} sampler"))
        # refused before its charge, the release removes a ledger made for it (new)
        rel = mech.release(
            data,
            sampler=args.sampler,
            random_seed=args.seed,
            clip=args.clip,
            project=args.project,
            skip_diagnostics=args.skip_diagnostics,
            budget=budget,
            **mcmc,
        )
    doc = release_json(
        rel,
        manifold_name=args.manifold,
        manifold=M,
        center=center,
        radius=args.radius,
        options={"restrict": bool(mech.restricted), "clip": args.clip, "project": args.project},
        source=source_name(args.data),
    )
    text = json.dumps(doc, indent=2)
    try:
        if out is None:
            if not _stdout_is_open():  # closed since the check: print would write nowhere
                raise OSError("standard output is closed")
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        else:
            _write_atomic(out, text + "\n")
    except BrokenPipeError:
        raise  # the reader left early: main's own code and message
    except OSError as err:
        kept = (
            f"its public record, with the value, is kept in the ledger: pymc-manidp budget "
            f"{args.budget} --json"
            if budget is not None
            else "it was not kept anywhere (no --budget)"
        )
        raise OutputLostError(
            f"the release was made{' and charged' if budget is not None else ''}, but "
            f"writing it to {'standard output' if out is None else out} failed "
            f"({err.strerror or err}); {kept}"
        ) from None
    if out is not None:
        print(f"wrote {args.out}: {rel.mechanism}, eps = {rel.epsilon:g}, delta = {rel.delta}")
        print(f"released value: {_value_text(rel.value)}")
        with contextlib.suppress(Exception):  # a bug here must not hide a release made
            far = float(M.dist(center, rel.value))
            print(f"geodesic distance from --center: {far!r}")
    if budget is not None:  # stderr: stdout may carry the release (--out -)
        print(_budget_line(args.budget, budget.public()), file=sys.stderr)
    moved = (rel.sampler_info or {}).get("projection")
    if moved is not None:  # depends on the data: printed for the curator, never written
        print(
            f"--project moved {moved['records_moved']} of {rel.n} records, the farthest by "
            f"{moved['max_distance']:.3g} (for the curator, not for publication)",
            file=sys.stderr,
        )
    if rel.diagnostics is not None:  # for the curator: printed, never written to the JSON
        from pymc_manidp.privacy.diagnostics import report

        rep = report(rel, out=args.report)
        print("MCMC diagnostics (for the curator, not for publication):", file=sys.stderr)
        print(rep, file=sys.stderr)
        for f in rep.files:
            print(f"wrote {f}", file=sys.stderr)
        rep.close()
    return 0


def _value_text(value) -> str:
    """The released value with every digit of each float (the shortest text that reads
    back as the same double): six significant digits printed a rotation 1e-9 away from
    a center with entries of order one as that center (issue 38 item 10)."""
    import numpy as np

    return np.array2string(np.asarray(value), floatmode="unique", separator=", ")


def _new_budget(args) -> dict:
    """``open_ledger``'s budget arguments, checked before the data are read."""
    new = {"epsilon": args.budget_epsilon}
    if args.budget_epsilon is not None:
        from pymc_manidp.privacy.budget import new_state

        new["delta"] = args.budget_delta if args.budget_delta is not None else 0.0
        new["composition"] = args.composition or "basic"
        new["plan"] = _parse_plan(args.budget_plan)
        new_state(**new)  # a bad budget or a plan that does not fit it: refused now
    elif any(v is not None for v in (args.budget_delta, args.composition, args.budget_plan)):
        raise ValueError("--budget-delta, --composition and --budget-plan need --budget-epsilon")
    return new


def _decimal(text: str, what: str) -> float:
    """The double of a decimal typed on the command line, refusing one that is not 0 but
    underflows to 0 (``1e-400``): a δ read as 0 would silently claim more privacy than
    was asked for (a plan's charge of 0 instead of 1e-400)."""
    from decimal import Decimal, InvalidOperation

    value = float(text)  # ValueError: not a number, said by the caller
    if value == 0.0:
        try:
            nonzero = Decimal(text.strip().replace("_", "")) != 0
        except InvalidOperation:
            nonzero = False
        if nonzero:
            raise ValueError(
                f"{what} = {text.strip()} is not 0 but smaller than the smallest double "
                "(5e-324), so it would be read as 0: give 0, or a value of at least 5e-324"
            )
    return value


def _number(what: str):
    """An argparse type: :func:`_decimal`, its refusal as argparse's one-line error."""

    def parse(text):
        try:
            return _decimal(text, what)
        except ValueError as err:
            if "smallest double" in str(err):
                raise argparse.ArgumentTypeError(str(err)) from None
            raise

    parse.__name__ = "number"  # argparse's "invalid number value: 'x'"
    return parse


def _parse_plan(text):
    """``--budget-plan EPS[:DELTA],...`` as ``[(epsilon, delta), ...]`` (None: no plan)."""
    if text is None:
        return None
    plan = []
    for item in text.split(","):
        eps, _, delta = item.strip().partition(":")
        try:
            plan.append(
                (
                    _decimal(eps, "--budget-plan epsilon"),
                    _decimal(delta, "--budget-plan delta") if delta else 0.0,
                )
            )
        except ValueError as err:
            if "smallest double" in str(err):
                raise
            raise ValueError(
                f"--budget-plan must be EPS[:DELTA] separated by commas (e.g. 0.4,0.4:1e-7), "
                f"got {item!r}"
            ) from None
    return plan


def _budget_line(name, pub) -> str:
    spent, left, budget = pub["spent"], pub["remaining"], pub["budget"]
    proved = "" if spent["proved"] else " (not proved: rests on MCMC deltas, see the charges)"
    return (
        f"{name}: spent epsilon = {spent['epsilon']:.6g}, delta = {spent['delta']:.6g}"
        f"{proved} of epsilon = {budget['epsilon']:.6g}, delta = {budget['delta']:.6g}; "
        f"left epsilon = {left['epsilon']:.6g}, delta = {left['delta']:.6g}"
    )


def budget(args) -> int:
    """``pymc-manidp budget``: check a ledger and print its public view."""
    from pymc_manidp.io.ledger import read_ledger

    if not _stdout_is_open():  # the ledger's view would be printed nowhere: not a success
        raise ValueError(
            "standard output is closed, so the ledger's view would be printed nowhere: "
            "open it (e.g. > budget.txt)"
        )
    ledger = read_ledger(args.ledger)
    pub = ledger.public()
    estimated = [e for e in ledger.entries if e["delta_basis"] == "estimated"]
    if estimated:  # the curator's column: the estimates depend on the data, never on stdout
        told = sum(e["delta_estimate"] is not None for e in estimated)
        print(
            f"{args.ledger}: estimated, not proved (for the curator, not for publication): "
            f"delta_hat = {ledger.estimated_delta:.6g} summed over {told} of "
            f"{len(estimated)} charges with an estimated delta (never in the total)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(pub, indent=2))
        return 0
    print(f"data set: {pub['dataset']}; privacy unit: {pub['privacy_unit']}")
    print(f"composition: {pub['rule']}")
    plan = pub["budget"].get("plan")
    if plan is not None:
        made = len(pub["charges"])
        planned = ", ".join(f"{e:.6g}" + (f":{d:.6g}" if d else "") for e, d in plan)
        total = pub["planned"]
        print(
            f"plan ({made} of {len(plan)} charges made; all together epsilon = "
            f"{total['epsilon']:.6g}, delta = {total['delta']:.6g}): {planned}"
        )
    print(_budget_line(args.ledger, pub))
    exact = pub["spent_exact"]
    print(f"spent exactly: epsilon = {exact['epsilon']}, delta = {exact['delta']}")
    for c in pub["charges"]:
        basis = {"proved": "", "assumed": " (assumed)", "estimated": " (estimated, not proved)"}
        print(
            f"  #{c['index']}: {c['mechanism']} [{c['sampler'] or '-'}] epsilon = "
            f"{c['epsilon']:.6g}, delta = {c['delta']:.6g}{basis[c['delta_basis']]}, "
            f"{c['status']}"
        )
    return 0


def audit(args) -> int:
    """``pymc-manidp audit``: exit 0 when the audits pass, 1 when one fails."""
    import numpy as np

    import pymc_manidp as pmd
    from pymc_manidp.privacy.audit import (
        MIN_RESOLUTION,
        boundary_pair,
        quadrature_audit,
        sample_test,
        sample_test_cost,
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
    if args.resolution is not None and args.resolution < MIN_RESOLUTION:
        raise ValueError(
            f"--resolution must be an integer >= {MIN_RESOLUTION} (the grid error estimate "
            f"halves it), got {args.resolution}"
        )
    res = res0 if args.resolution is None else args.resolution
    t_max = args.t_max
    if t_max is None and args.mechanism == "laplace" and not np.isfinite(M.injectivity_radius):
        raise ValueError(
            f"the unrestricted Laplace lives on all of the non-compact {M}: pass --t-max T "
            "to truncate the quadrature at radius T (the tail beyond T is not audited), or "
            "audit --mechanism laplace-ball"
        )
    if t_max is not None and args.mechanism != "laplace":
        raise ValueError(
            "--t-max is only for --mechanism laplace (the other laws live on the public ball)"
        )
    pair = boundary_pair(mech.domain, args.n) if args.sample_test else None
    if args.sample_test:  # refuse a too large --size before the quadrature's minutes
        sample_test_cost(mech, pair.data, args.size)
    with _status()(f"quadrature audit on a {res}-node grid per axis"):
        result = quadrature_audit(
            mech, n=args.n, resolution=res, random_seed=args.seed, t_max=t_max
        )
    print(result.summary())
    passed = result.passed
    if args.sample_test:
        with _status()(f"sample test with {args.size} draws per dataset"):
            st = sample_test(mech, pair.data, pair.neighbour, size=args.size, random_seed=args.seed)
        print(st.summary())
        passed = passed and st.passed
    return 0 if passed else EXIT_AUDIT_FAILED


def reproduce(args) -> int:
    """``pymc-manidp reproduce``: run the experiments, print where the files went."""
    from pathlib import Path

    from pymc_manidp.experiments import report, run

    if args.doc is not None:
        # fail before the work: the document sets only full runs beside the papers
        if args.quick or args.replicates is not None:
            raise ValueError(
                "--doc needs a full run: drop --quick and --replicates (quick numbers are "
                "not set beside the papers')"
            )
        if not Path(args.doc).is_file():
            raise ValueError(f"--doc {args.doc}: no such document")
    tables = run(
        args.experiment,
        quick=args.quick,
        replicates=args.replicates,
        out=args.out,
        seed=args.seed,
        progress=True,
        scheduler=args.scheduler,
    )
    for name in tables:
        print(f"{name}: figures and tables in {args.out}/{name}/")
    if args.doc is not None:
        names = report.update_doc(args.doc, args.out)
        print(f"{args.doc}: rewrote the generated blocks {', '.join(names)}")
    return 0


COMMANDS = {
    "demo": demo,
    "release": release,
    "budget": budget,
    "audit": audit,
    "reproduce": reproduce,
}


def _one_line(err) -> str:
    return " ".join(str(err).split()) or type(err).__name__  # one line, whatever the message


#: Python keyword arguments whose option has another name; a keyword named like an
#: option (``delta``, ``estimate_delta``, ``t_max``) is that option (``_keyword_options``)
KEYWORD_OPTIONS = {"random_seed": "--seed", "plan": "--budget-plan", "budget": "--budget"}
#: ... in the errors of a ledger's own budget (``new_state``, ``open_ledger``), where
#: ``epsilon`` and ``delta`` are the ledger's, not the release's
LEDGER_KEYWORD_OPTIONS = {"epsilon": "--budget-epsilon", "delta": "--budget-delta"}


def _keyword_options(command_parser, extra=None) -> dict[str, tuple[str, str]]:
    """Python keyword -> (its option, the option's value placeholder) for one command."""
    options = {}
    for action in command_parser.options:
        if action.option_strings and action.dest != "help":
            value = "" if action.nargs == 0 else (action.metavar or action.dest.upper())
            options[action.dest] = (action.option_strings[-1], value)
    by_option = {opt: value for opt, value in options.values()}
    for keyword, opt in {**KEYWORD_OPTIONS, **(extra or {})}.items():
        if opt in by_option:  # only the options this command has
            options[keyword] = (opt, by_option[opt])
    return options


def _speak_cli(message: str, options: dict[str, tuple[str, str]]) -> str:
    """``message`` with the Python keyword arguments it names as the command's options.

    The library's errors are written for Python (``pass estimate_delta=True``,
    ``sampler='exact'``, ``draws must be``); the command line shows the same message with
    ``--estimate-delta``, ``--sampler exact``, ``--draws must be`` (issue 38 item 10).
    Translated: ``name=value`` (a flag's ``True`` drops), ``name must`` at the start of a
    sentence, ``name[i]`` items of a list option, ``a/b`` pairs, and names with an
    underscore wherever they stand; a plain word in prose ("more chains", "a larger
    epsilon") is left alone.
    """
    if not options:
        return message
    # a Python object's repr or call (Sphere(dim=2, radius=1.0), KNGMechanism(...,
    # max_attempts=...)) is Python, and says so: kept as it is
    calls = re.findall(r"\b[A-Z]\w*\([^()]*\)", message)
    for i, call in enumerate(calls):
        message = message.replace(call, f"\0{i}\0", 1)
    message = _translate(message, options)
    for i, call in enumerate(calls):
        message = message.replace(f"\0{i}\0", call, 1)
    return message


def _translate(message: str, options: dict[str, tuple[str, str]]) -> str:
    """:func:`_speak_cli`'s substitutions, outside Python calls."""
    quotes = "'\""
    names = "|".join(sorted(map(re.escape, options), key=len, reverse=True))
    head = r"(?<![\w.\-\[])"  # not part of a longer name, a field (budget.plan) or an item

    def assigned(m):
        opt, placeholder = options[m["name"]]
        value = m["value"]
        if value is None or value in ("True", "..."):
            return opt
        if value.startswith("["):  # a Python list: the option's own format
            return f"{opt} {placeholder}".rstrip()
        return f"{opt} {value.strip(quotes)}"

    value = r"True\b|\.\.\.|'[^']*'|\"[^\"]*\"|\[[^\]]*\]|[-+]?\d[\w.+-]*"
    message = re.sub(rf"{head}(?P<name>{names})=(?P<value>{value})?", assigned, message)
    message = re.sub(
        rf"{head}(?P<name>{names})\[(?P<i>\d+)\]",
        lambda m: f"{options[m['name']][0]} item {int(m['i']) + 1}",
        message,
    )
    message = re.sub(
        rf"(?:^|(?<=[:;.] )){head}(?P<name>{names})(?= must\b)",
        lambda m: options[m["name"]][0],
        message,
    )
    message = re.sub(
        rf"{head}(?P<a>{names})/(?P<b>{names})\b",
        lambda m: f"{options[m['a']][0]}/{options[m['b']][0]}",
        message,
    )
    underscored = "|".join(re.escape(k) for k in options if "_" in k)
    if underscored:
        message = re.sub(rf"{head}\b({underscored})\b", lambda m: options[m[1]][0], message)
    return message


@contextlib.contextmanager
def _ledger_keywords():
    """Errors raised inside name the ledger's budget: ``epsilon`` is ``--budget-epsilon``."""
    try:
        yield
    except Exception as err:
        if not hasattr(err, "cli_keywords"):
            err.cli_keywords = LEDGER_KEYWORD_OPTIONS
        raise


def _error_line(err, command_parser) -> str:
    """The one line printed for ``err``: the message, in the command's options."""
    extra = getattr(err, "cli_keywords", None)
    return _speak_cli(_one_line(err), _keyword_options(command_parser, extra))


class _BrokenEnvironment(RuntimeError):
    """A dependency cannot be imported in this environment (exit code 2)."""


def _start_dependencies() -> None:
    """Import PyTensor and numba here, where their failure is the environment's.

    :func:`~pymc_manidp.environment.environment_problem` catches the variables known to
    break them; any other setting they refuse (a PyTensor flag with a bad value, a
    numba variable numba cannot parse) raises here, as a :class:`_BrokenEnvironment`
    with one line naming it, instead of a traceback or numba's many-line warning.
    """
    import warnings

    with warnings.catch_warnings():
        # numba warns, with a traceback in the message, about a variable it cannot parse
        warnings.filterwarnings("error", message="Environment variable '", category=RuntimeWarning)
        for name, label in (("pytensor", "PyTensor"), ("numba", "numba")):
            try:
                __import__(name)
            except Exception as err:
                first = (str(err).splitlines() or [type(err).__name__])[0]
                raise _BrokenEnvironment(
                    f"{label} cannot start with this environment ({type(err).__name__}: "
                    f"{first}); check the variables it reads (PYTENSOR_FLAGS, PYTENSORRC, "
                    "OMP_NUM_THREADS, NUMBA_*)"
                ) from err
    _check_pytensor_compiledir()


def _check_pytensor_compiledir() -> None:
    """Refuse PyTensor's compile folder unless it is ours alone (issue 43 item 7): the
    check a release from Python makes too (``geometry._kernels.cache``)."""
    from pymc_manidp.geometry._kernels.cache import pytensor_compiledir_problem

    problem = pytensor_compiledir_problem()
    if problem is not None:
        raise _BrokenEnvironment(problem)


def _cannot_write(folder: Path) -> str | None:
    """Why ``folder`` cannot be made or written, or None (it is made, mode 0700)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def _writable_compile_dir() -> None:
    """Give PyTensor and the package a temporary compile folder (with one warning line)
    when theirs cannot be made or written, e.g. ``HOME`` read-only or ``/proc``.

    PyTensor creates its folder (``~/.pytensor``) when it is first imported and fails
    with a long traceback; the package's cache (``~/.cache/pymc-manidp``, where numba
    keeps the compiled kernels) would warn at every kernel module. A folder the user
    chose for PyTensor (``PYTENSOR_FLAGS``, ``PYTENSORRC``) is left alone. Runs after
    :func:`~pymc_manidp.environment.environment_problem`, so the variables read here
    are absolute paths.
    """
    import atexit
    import shutil

    home = os.path.expanduser("~")
    notes, tmp = [], None

    def temporary():
        nonlocal tmp
        if tmp is None:
            tmp = tempfile.mkdtemp(prefix="pymc-manidp-pytensor-")
            atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        return tmp

    flags = os.environ.get("PYTENSOR_FLAGS", "")
    if not ("compiledir" in flags or os.environ.get("PYTENSORRC")):
        default = Path(home) / ".pytensor"
        reason = _cannot_write(default)
        if reason is not None:
            new = f"base_compiledir={temporary()}"
            os.environ["PYTENSOR_FLAGS"] = ",".join(filter(None, (flags, new)))
            notes.append(f"PyTensor's compile folder {default} cannot be written ({reason})")
    # as geometry/_kernels/cache.py's cache_dir, without importing it (it loads PyTensor)
    ours = os.path.expanduser(os.environ.get("PYMC_MANIDP_CACHE_DIR", "").strip())
    if not ours:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
        ours = os.path.join(xdg, "pymc-manidp")
    reason = _cannot_write(Path(ours))
    if reason is not None:
        os.environ["PYMC_MANIDP_CACHE_DIR"] = os.path.join(temporary(), "pymc-manidp")
        notes.append(f"the package's compile cache {ours} cannot be written ({reason})")
    if notes:
        print(
            f"pymc-manidp: warning: {' and '.join(notes)} (HOME={os.environ.get('HOME')!r}): "
            f"compiling in {tmp}, removed at exit; set HOME to a writable folder, or "
            "PYTENSOR_FLAGS=base_compiledir=DIR and PYMC_MANIDP_CACHE_DIR=DIR",
            file=sys.stderr,
        )


def _silence_stdout() -> None:
    """Send what is left for a closed stdout to /dev/null (Python's documented remedy for
    SIGPIPE: otherwise the flush at exit prints a traceback of its own)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (module docstring), one line on stderr."""
    problem = environment_problem()  # shared with the Python API: stdlib only
    if problem is not None:  # before any dependency reads it
        print(f"pymc-manidp: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:  # the imports take seconds: Ctrl-C there is an interruption like any other
        _writable_compile_dir()
        _start_dependencies()
        from pymc_manidp.laws.exact import ExactSamplingError
        from pymc_manidp.privacy.diagnostics import DiagnosticsError

        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("pymc-manidp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _BrokenEnvironment as err:
        print(f"pymc-manidp: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # not a refusal (code 2 says nothing was released, and here something was): the
        # reader left. Point stdout at /dev/null so the interpreter's last flush is quiet
        _silence_stdout()
        print(
            f"pymc-manidp {args.command}: standard output was closed by its reader; "
            "the command ran, its output was cut short",
            file=sys.stderr,
        )
        return EXIT_PIPE_CLOSED
    except OutputLostError as err:  # not code 2: a release was made, and maybe charged
        print(f"pymc-manidp {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_OUTPUT_LOST
    # OSError includes a lost or unreachable cluster (ClusterError); ImportError a
    # missing optional package (nutpie asked for by name)
    except (
        ValueError,
        TypeError,
        OSError,
        ImportError,
        DiagnosticsError,
        ExactSamplingError,
    ) as err:
        line = _error_line(err, parser.commands[args.command])
        print(f"pymc-manidp {args.command}: error: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("pymc-manidp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a bug: still one line, and a code apart from "audit failed"
        print(
            f"pymc-manidp {args.command}: internal error ({type(err).__name__}): "
            f"{_one_line(err)}; nothing was released. Please report this line.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
