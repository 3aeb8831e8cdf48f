"""The commands of ``pymc-manidp``: ``demo``, ``release``, ``budget``, ``audit`` and
``reproduce``, each a function of the parsed arguments that returns the exit code
(:data:`COMMANDS`); the package loads inside each, so a command imports only what it runs."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys

from pymc_manidp.cli.exit_codes import (
    EXIT_AUDIT_FAILED,
    OutputLostError,
)
from pymc_manidp.cli.messages import _ledger_keywords
from pymc_manidp.cli.paths import _check_out, _stdout_is_open, _write_atomic


def _status():
    """A spinner on stderr for long steps (plain text when stderr is not a terminal)."""
    from rich.console import Console

    return Console(stderr=True).status


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
    if args.sampler != "nuts":  # only a NUTS release tries a short run first
        ignored += ["--no-short-run"] * args.no_short_run
    if args.mechanism == "kng" and args.restrict:
        ignored.append("--restrict")
    if args.mechanism == "laplace" and args.statistic is not None:
        ignored.append("--statistic")
    if args.median_floor is not None and (
        args.mechanism != "kng" or args.statistic != "median" or args.sampler != "exact"
    ):
        ignored.append("--median-floor")
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
            "--mechanism laplace, --statistic for kng, --median-floor for the kng median's exact "
            "sampler; --draws/--tune/--chains/--report/"
            "--skip-diagnostics/--delta/--estimate-delta are for --sampler nuts or "
            "metropolis, --no-short-run for nuts): drop them"
        )
    if args.seed is not None and not args.allow_fixed_seed:
        raise ValueError(
            "--seed makes the noise reproducible by anyone who guesses the seed, which can "
            "undo the privacy of a real release: omit it (OS entropy), or pass "
            "--allow-fixed-seed for tests"
        )


def release(args) -> int:
    """``pymc-manidp release``: a user's data in, the public release as JSON out."""
    import pymc_manidp as pmd
    from pymc_manidp.io.files import manifold_for, parse_center, read_points, release_json
    from pymc_manidp.io.stores import is_lazy_source, open_points, source_name
    from pymc_manidp.stats import reductions

    _refuse_ignored_options(args)
    mcmc = {}
    if args.sampler != "exact":
        from pymc_manidp.mcmc.settings import MCMCSettings

        # options not given (None) keep MCMCSettings' defaults, which live in one place;
        # a bad value is refused here, before any file is read or ledger made
        mcmc["settings"] = MCMCSettings().with_overrides(
            **{k: getattr(args, k) for k in MCMC_OPTIONS}
        )
        if args.no_short_run:  # None in with_overrides keeps a value: replace it
            mcmc["settings"] = dataclasses.replace(mcmc["settings"], short_run=None)
        from pymc_manidp.mcmc.memory_limit import check_mcmc_memory

        # the trace's size is public: a run that cannot fit is refused before any file
        # is read (the manifold, from the data's shape, is not known yet: the bound is
        # for the smallest; the release checks it again with the manifold)
        check_mcmc_memory(mcmc["settings"])
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
            median_floor=args.median_floor or "proved",
        )
    else:
        mech = pmd.LaplaceMechanism(
            M, epsilon=args.epsilon, center=center, radius=args.radius, restrict=args.restrict
        )
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
        options={
            "restrict": bool(mech.restricted),
            "clip": args.clip,
            "project": args.project,
            # the median's floor, proved or measured (docs/exact.md): public, as an option
            **(
                {"median_floor": mech.median_floor}
                if getattr(mech, "statistic", None) == "median" and args.sampler == "exact"
                else {}
            ),
        },
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


_PLAN_SYNTAX = (
    "--budget-plan must be EPS[:DELTA], a Gaussian charge EPS:DELTA:MU, or gaussian:EPS:DELTA "
    "(mu derived as TangentGaussianMechanism(epsilon=EPS, delta=DELTA) declares it), "
    "separated by commas (e.g. 0.4,0.4:1e-7,gaussian:0.2:1e-7)"
)


def _parse_plan(text):
    """``--budget-plan`` as ``[(epsilon, delta), (epsilon, delta, mu), ...]`` (None: no plan).

    An item is ``EPS[:DELTA]``, a Gaussian charge ``EPS:DELTA:MU`` as the Python plan
    takes it, or ``gaussian:EPS:DELTA``: the charge of a tangent Gaussian release at
    (ε, δ), its μ computed by the same function as the mechanism's ``planned_charge``
    (``gaussian_mu``), so the ledger's plan matches that release's charge exactly.
    """
    if text is None:
        return None
    plan = []
    for i, item in enumerate(text.split(","), start=1):
        parts = item.strip().split(":")
        gaussian = parts[0].strip().lower() == "gaussian"
        numbers = parts[1:] if gaussian else parts
        if not (
            (len(numbers) == 2 if gaussian else 1 <= len(numbers) <= 3)
            and all(n.strip() for n in numbers)
        ):
            raise ValueError(f"{_PLAN_SYNTAX}, got {item!r}")
        try:
            values = [
                _decimal(n, f"--budget-plan {what}")
                for n, what in zip(numbers, ("epsilon", "delta", "mu"), strict=False)
            ]
        except ValueError as err:
            if "smallest double" in str(err):
                raise
            raise ValueError(f"{_PLAN_SYNTAX}, got {item!r}") from None
        if gaussian:
            from pymc_manidp.stats.gaussian import MIN_DELTA, gaussian_mu

            # checked here, in the item's words: gaussian_mu's "epsilon must ..." read as
            # the ledger's --budget-epsilon on the command line
            eps, delta = values
            if not (math.isfinite(eps) and eps > 0) or not MIN_DELTA <= delta < 1:
                raise ValueError(
                    f"--budget-plan item {i} ({item.strip()}): a Gaussian charge needs EPS a "
                    f"finite number > 0 and DELTA in [{MIN_DELTA:g}, 1), got EPS = {eps!r}, "
                    f"DELTA = {delta!r}"
                )
            try:
                values.append(gaussian_mu(*values))
            except ValueError as err:
                raise ValueError(f"--budget-plan item {i} ({item.strip()}): {err}") from None
        plan.append(tuple(values) if len(values) > 1 else (values[0], 0.0))
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
        progress=None,  # bars in a terminal; none in a log or under CI
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
