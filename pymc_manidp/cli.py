"""Command line: ``pymc-manidp demo`` (more subcommands arrive with the mechanisms).

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
    """Geometry demo: constants of each space and a check of its exact maps.

    For each manifold: draw 1,000 tangent vectors inside the radius ``r*`` that the
    privacy guarantees need, map them with ``exp`` and back with ``log``, and report
    the worst round-trip error and the volume-density range of the chart.
    """
    rng = np.random.default_rng(seed)
    print("pymc-manidp geometry demo (the private-release demo arrives with the mechanisms)")
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
    """Footpoint and scale a private mean direction would use (no release yet)."""
    from pymc_manidp.stats import DataDomain, sensitivity

    S = pmd.Sphere(dim=2)
    # the 2021 supplement's generator: polar angle uniform on [0, pi/8] around the pole
    th, ph = rng.uniform(0, np.pi / 8, n), rng.uniform(0, 2 * np.pi, n)
    data = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
    dom = DataDomain(S, center=[0.0, 0.0, 1.0], radius=np.pi / 8)
    data = dom.check(data)
    res = pmd.frechet_mean(S, data)
    delta_l = dom.laplace_sensitivity(n, grad_tol=1e-10)
    delta_k = dom.kng_sensitivity(n)
    print(f"\nmean direction of {n} points in the public ball B_(pi/8)(north pole):")
    print(
        f"  Fréchet mean {np.array2string(res.mean, precision=6)}, {res.iterations} steps, "
        f"|grad F| = {res.grad_norm:.1e}, converged = {res.converged}"
    )
    print(f"  curvature factor H = {dom.curvature_factor:.6f}")
    print(
        f"  Laplace: sensitivity {delta_l:.6f}, rate sigma = 2*Delta/eps = "
        f"{sensitivity.rate(delta_l, epsilon):.6f} at eps = {epsilon}"
    )
    print(
        f"  KNG:     sensitivity {delta_k:.6f}, rate sigma = 2*Delta/eps = "
        f"{sensitivity.rate(delta_k, epsilon):.6f} at eps = {epsilon}"
    )


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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            return demo(args.seed)
    except (ValueError, TypeError, OSError) as err:
        print(f"pymc-manidp: error: {err}", file=sys.stderr)
        return 2
    return 0  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
