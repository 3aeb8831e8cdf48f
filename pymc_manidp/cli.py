"""Command line: ``pymc-manidp demo`` and ``pymc-manidp reproduce``.

Errors in user input end the program with one line on stderr and exit code 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import pymc_manidp as pmd

__all__ = ["main"]


def _demo_manifolds():
    return [
        ("sphere S^2", pmd.Sphere(dim=2)),
        ("SPD(3)", pmd.SPD(k=3)),
        ("Kendall shapes, 8 landmarks", pmd.KendallShape(k_landmarks=8)),
        ("Euclidean R^3", pmd.Euclidean(dim=3)),
    ]


def demo(seed: int) -> int:
    """The main job: geometry checks, then private releases on built-in data.

    For each manifold: draw 1,000 tangent vectors inside the radius ``r*`` that the
    privacy guarantees need, map them with ``exp`` and back with ``log``, and report
    the worst round-trip error and the volume-density range of the chart. Then release
    a private mean direction with the Laplace and KNG mechanisms (NUTS) and print each
    run's convergence diagnostics.
    """
    rng = np.random.default_rng(seed)
    print("pymc-manidp demo: geometry, then a private mean direction (NUTS, diagnostics)")
    print(f"seed = {seed}\n")
    header = f"{'space':<30}{'dim':>4}{'inj':>8}{'kappa':>14}{'r*':>8}{'round trip':>12}{'vol':>16}"
    print(header)
    print("-" * len(header))
    for name, M in _demo_manifolds():
        x = M.validate(_demo_point(M, rng))
        r = min(M.max_radius, 2.0) * 0.99
        c = rng.normal(size=(1000, M.dim))
        c *= rng.uniform(0, r, size=(1000, 1)) / np.linalg.norm(c, axis=-1, keepdims=True)
        y = M.exp_coords(x, c)
        err = float(np.max(np.abs(M.log_coords(x, y) - c)))
        lv = M.log_volume_density(c)
        kmin, kmax = M.curvature_bounds
        print(
            f"{name:<30}{M.dim:>4}{M.injectivity_radius:>8.3g}{f'[{kmin:g}, {kmax:g}]':>14}"
            f"{M.max_radius:>8.3g}{err:>12.1e}{f'{np.exp(lv.min()):.3f}..{np.exp(lv.max()):.3f}':>16}"
        )
    print("\nround trip: max |log(exp(c)) - c| over 1,000 chart vectors with |c| < min(r*, 2)")
    print("vol: range of the exp chart's volume density over those vectors")
    _demo_statistics(rng)
    return 0


def _demo_statistics(rng, n: int = 200, epsilon: float = 1.0):
    """Private mean direction of built-in sphere data, with the run's diagnostics."""
    from pymc_manidp.privacy.diagnostics import check_run

    S = pmd.Sphere(dim=2)
    # the 2021 supplement's generator: polar angle uniform on [0, pi/8] around the pole
    th, ph = rng.uniform(0, np.pi / 8, n), rng.uniform(0, 2 * np.pi, n)
    data = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
    center, radius = [0.0, 0.0, 1.0], np.pi / 8
    res = pmd.frechet_mean(S, data)
    print(f"\nprivate mean direction of {n} points in the public ball B_(pi/8)(north pole)")
    print(
        f"  Fréchet mean (not private) {np.array2string(res.mean, precision=6)}, "
        f"{res.iterations} steps, |grad F| = {res.grad_norm:.1e}"
    )
    for mech in (
        pmd.LaplaceMechanism(S, epsilon=epsilon, center=center, radius=radius),
        pmd.KNGMechanism(S, epsilon=epsilon, center=center, radius=radius),
    ):
        rel = mech.release(data, sampler="nuts", random_seed=int(rng.integers(2**31)))
        rep = check_run(rel.diagnostics)
        print(
            f"\n  {rel.mechanism}: eps = {rel.epsilon}, sensitivity {rel.sensitivity:.6f}, "
            f"sigma {rel.sigma:.6f}, sampler {rel.sampler} ({rel.seed_policy})"
        )
        print(
            f"    released value  {np.array2string(rel.value, precision=6)}  "
            f"(distance to the Fréchet mean {float(S.dist(res.mean, rel.value)):.4f})"
        )
        print(
            f"    diagnostics     max R-hat {max(rep.rhat.values()):.4f}, "
            f"min bulk ESS {min(rep.ess_bulk.values()):.0f}, "
            f"min tail ESS {min(rep.ess_tail.values()):.0f}, "
            f"divergences {rep.divergences}: {'passed' if rep.passed else rep.failures}"
        )
        print(f"    delta           {rel.notes[0]}")


def _demo_point(M, rng):
    if isinstance(M, pmd.Sphere):
        return np.array([0.0, 0.0, 1.0])
    if isinstance(M, pmd.SPD):
        return np.diag([1.0, 2.0, 4.0])
    if isinstance(M, pmd.KendallShape):
        t = np.linspace(0, 2 * np.pi, M.k_landmarks, endpoint=False)
        return np.stack([np.cos(t), 0.6 * np.sin(t)], -1)  # an ellipse
    return np.zeros(M.dim)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pymc-manidp",
        description="Differentially private releases on Riemannian manifolds.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="run the demo on built-in data")
    p_demo.add_argument("--seed", type=int, default=20211206, help="random seed")
    p_rep = sub.add_parser(
        "reproduce",
        help="reproduce the papers' figures (PNG) and tables (CSV/JSON)",
        description="Reproduce a figure of the papers, or all of them: writes PNG figures, "
        "CSV tables of every plotted number and a JSON summary into OUT/<experiment>/.",
    )
    p_rep.add_argument(
        "experiment",
        help="laplace2021_fig1, kng2022_fig1, kng2022_shapes, theorems, or all",
    )
    p_rep.add_argument("--quick", action="store_true", help="scaled-down settings (minutes)")
    p_rep.add_argument(
        "--replicates", type=int, default=None, help="replicates per sample size (>= 2)"
    )
    p_rep.add_argument(
        "--out", default="reproduction", help="output folder (default: reproduction)"
    )
    p_rep.add_argument("--seed", type=int, default=20211206, help="random seed")
    return parser


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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            return demo(args.seed)
        if args.command == "reproduce":
            return reproduce(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"pymc-manidp: error: {err}", file=sys.stderr)
        return 2
    return 0  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
