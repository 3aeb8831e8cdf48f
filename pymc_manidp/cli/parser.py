"""The argument parser of ``pymc-manidp``: one small function per command.

The help states each option's default, read from the parser itself, and every parse
error names the command; building the parser imports no MCMC code."""

from __future__ import annotations

import argparse

from pymc_manidp.cli.commands import MCMC_OPTIONS, _audit_spaces, _number


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


class _SettingsDefault:
    """``MCMCSettings``' default of one field, for ``--help``: looked up when the help is
    printed, so building the parser imports no MCMC code."""

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        from pymc_manidp.mcmc.settings import MCMCSettings

        return str(getattr(MCMCSettings(), self.name))


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``pymc-manidp``: one subcommand each, added by its own function."""
    parser = _Parser(
        prog="pymc-manidp",
        description="Differentially private releases on Riemannian manifolds.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.commands = sub.choices
    _add_demo(sub)
    _add_release(sub)
    _add_budget(sub)
    _add_audit(sub)
    _add_reproduce(sub)
    return parser


def _add_demo(sub) -> None:
    """``pymc-manidp demo``: the README's first command."""
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


def _add_release(sub) -> None:
    """``pymc-manidp release``: a user's data in, a private mean or median out."""
    from pymc_manidp.io.files import MANIFOLD_NAMES

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
    p.add_argument(
        "--manifold", required=True, choices=MANIFOLD_NAMES, help="the space of the records"
    )
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
        "--median-floor",
        choices=("proved", "measured"),
        default=None,
        help="KNG median, exact sampler: accept only where the chance the sampler gives up "
        "after reading the data is proved at most 2^-64 (proved, the default), or down to "
        "the floors an adversarial search measured (measured: not proved, recorded in the "
        "release; docs/exact.md)",
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
    p.add_argument(
        "--no-short-run",
        action="store_true",
        help="NUTS: sample the full --tune + --draws at once (by default, at the default "
        "length, a release first tries 300 tuning steps and 500 draws per chain and samples "
        "the full run only when that one fails the diagnostics)",
    )
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
        "(epsilon, delta) fixed in advance. A Gaussian charge is EPS:DELTA:MU, or "
        "gaussian:EPS:DELTA for a tangent Gaussian release at (EPS, DELTA) (its mu derived "
        "as the mechanism declares it)",
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


def _add_budget(sub) -> None:
    """``pymc-manidp budget``: print a ledger's public record."""
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


def _add_audit(sub) -> None:
    """``pymc-manidp audit``: a mechanism's privacy loss on neighbouring data sets."""
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


def _add_reproduce(sub) -> None:
    """``pymc-manidp reproduce``: the papers' figures and tables."""
    p = sub.add_parser(
        "reproduce",
        help="reproduce the papers' figures (PNG) and tables (CSV/JSON)",
        description="Reproduce a figure of the papers, or all of them: writes PNG figures, "
        "CSV tables of every plotted number and a JSON summary into OUT/<experiment>/.",
    )
    p.add_argument(
        "experiment",
        help="laplace2021_sensitivity, laplace2021_fig1, kng2022_fig1, kng2022_shapes, "
        "theorems, median_robustness, geodesic_regression, tangent_mechanisms, or all",
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
