"""The main job: a private mean location of the built-in European cities on S^2.

:func:`run_demo` releases the mean with the manifold Laplace mechanism and KNG, first
with the exact samplers (pure ε-DP), then with NUTS through the diagnostics gate
(approximately DP), prints every release with its diagnostics, and writes a map
(``demo_map.png``) and the curator's trace and rank plots of each NUTS run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pymc_manidp.datasets.cities import ATTRIBUTION, latlon_to_unit, load_cities, unit_to_latlon
from pymc_manidp.geometry.sphere import Sphere
from pymc_manidp.mechanisms.kng import KNGMechanism
from pymc_manidp.mechanisms.laplace import LaplaceMechanism
from pymc_manidp.privacy.diagnostics import report
from pymc_manidp.stats.frechet import frechet_mean

__all__ = ["DEMO_BALL", "DemoResult", "run_demo"]

EARTH_KM = 6371.0
# The public ball: fixed before looking at the data (center 50N 10E, about 2,200 km).
DEMO_BALL = {"latitude": 50.0, "longitude": 10.0, "radius": 0.35}


@dataclass
class DemoResult:
    """What the demo computed (for tests and notebooks)."""

    data: np.ndarray
    frechet: np.ndarray
    releases: dict  # (mechanism, sampler) -> Release
    reports: dict  # mechanism -> CuratorReport of the NUTS run
    files: list


def _km(S, a, b) -> float:
    return float(S.dist(a, b)) * EARTH_KM


def run_demo(*, seed=20211206, epsilon=1.0, out="demo", status=print, nuts=True):
    """Release a private mean location of the European cities; print and plot it.

    Parameters
    ----------
    seed : int
        Seeds every release (fixed seeds make the demo reproducible; a real release
        leaves ``random_seed=None`` so the noise comes from OS entropy).
    epsilon : float
    out : str or Path
        Folder for the figures.
    status : callable
        Receives each printed line.
    nuts : bool
        Also release through NUTS (slower: compilation and sampling).

    Returns
    -------
    DemoResult
    """
    S = Sphere(dim=2)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    center = latlon_to_unit(DEMO_BALL["latitude"], DEMO_BALL["longitude"])
    radius = DEMO_BALL["radius"]
    cities = load_cities()
    # the dataset: every city of the built-in table inside the public region
    data = cities.points[S.dist(center, cities.points) <= radius]
    fm = frechet_mean(S, data)
    lat, lon = unit_to_latlon(fm.mean)
    status(f"pymc-manidp demo: a private mean location of {len(data)} European cities (S^2)")
    status(f"  data: {ATTRIBUTION}")
    status(
        f"  public ball: center {DEMO_BALL['latitude']:g}N {DEMO_BALL['longitude']:g}E, "
        f"radius {radius} rad ({radius * EARTH_KM:,.0f} km), fixed before seeing the data"
    )
    status(
        f"  Fréchet mean (NOT private): {lat:.3f}N {lon:.3f}E "
        f"({fm.iterations} steps, |grad F| = {fm.grad_norm:.1e})"
    )
    mechs = {
        "Laplace": LaplaceMechanism(S, epsilon=epsilon, center=center, radius=radius),
        "KNG": KNGMechanism(S, epsilon=epsilon, center=center, radius=radius),
    }
    rng = np.random.default_rng(seed)
    samplers = ("exact", "nuts") if nuts else ("exact",)
    releases, reports, files = {}, {}, []
    status("")
    status(
        f"  {'mechanism':<10}{'sampler':<9}{'eps':>5}{'delta':>7}{'sigma':>10}"
        f"{'released (lat, lon)':>24}{'km from mean':>14}"
    )
    for sampler in samplers:
        for name, mech in mechs.items():
            # NUTS with MCMCSettings' defaults, 4 x 1,000 draws: ESS well above 400
            rel = mech.release(data, sampler=sampler, random_seed=int(rng.integers(2**31)))
            releases[name, sampler] = rel
            la, lo = unit_to_latlon(rel.value)
            delta = "0" if rel.delta == 0 else "n/a"
            status(
                f"  {name:<10}{sampler:<9}{rel.epsilon:>5g}{delta:>7}{rel.sigma:>10.5f}"
                f"{f'{la:.3f}N {lo:.3f}E':>24}{_km(S, fm.mean, rel.value):>14.1f}"
            )
    status("")
    status("  exact: pure eps-DP (delta = 0); " + _acceptance(releases))
    if nuts:
        status("  NUTS: approximately DP (delta not bounded); diagnostics for the curator:")
        for name in mechs:
            rel = releases[name, "nuts"]
            rep = report(rel, footpoint=fm.mean, manifold=S, out=out / f"{name.lower()}_nuts")
            reports[name] = rep
            files.extend(rep.files)
            v = rep.verdict
            status(
                f"    {name:<8} max R-hat {max(v.rhat.values()):.4f}, min bulk ESS "
                f"{min(v.ess_bulk.values()):.0f}, min tail ESS {min(v.ess_tail.values()):.0f}, "
                f"divergences {v.divergences}: {'passed' if v.passed else v.failures}"
            )
            rep.close()
    files.append(_map(S, data, center, radius, fm.mean, mechs, releases, rng, out))
    status("")
    for f in files:
        status(f"  wrote {f}")
    return DemoResult(data, fm.mean, releases, reports, files)


def _acceptance(releases) -> str:
    parts = []
    for (name, sampler), rel in releases.items():
        info = rel.sampler_info or {}
        if sampler == "exact" and "proposals" in info:
            parts.append(f"{name} took {info['proposals']} proposal(s)")
    return ", ".join(parts) if parts else "no rejection step"


def _circle(S, center, radius, m=200):
    t = np.linspace(0, 2 * np.pi, m)
    return S.exp_coords(center, radius * np.stack([np.cos(t), np.sin(t)], -1))


def _map(S, data, center, radius, mean, mechs, releases, rng, out) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2), layout="constrained")
    for ax, (name, mech) in zip(axes, mechs.items(), strict=True):
        # the mechanism's law around this data (many draws: an illustration, not a release)
        cloud = mech.sample(data, 1000, random_seed=rng)
        la, lo = unit_to_latlon(_circle(S, center, radius))
        ax.plot(lo, la, color="0.3", lw=1, ls="--", label="public ball")
        la, lo = unit_to_latlon(data)
        ax.scatter(lo, la, s=8, c="0.6", label=f"cities (n = {len(data)})")
        la, lo = unit_to_latlon(cloud)
        ax.scatter(lo, la, s=3, alpha=0.35, c="tab:blue", label="1,000 exact draws of the law")
        la, lo = unit_to_latlon(mean)
        ax.scatter(lo, la, marker="x", s=90, c="k", lw=2, label="Fréchet mean (not private)")
        for (mname, sampler), rel in releases.items():
            if mname != name:
                continue
            la, lo = unit_to_latlon(rel.value)
            marker, color = ("*", "tab:red") if sampler == "exact" else ("P", "tab:green")
            ax.scatter(lo, la, marker=marker, s=160, c=color, edgecolor="k",
                       label=f"release ({sampler})")  # fmt: skip
        ax.set_title(f"{name}, ε = {mech.epsilon:g}, σ = {mech.sigma(len(data)):.4f}")
        ax.set_xlabel("longitude (°E)")
        ax.set_ylabel("latitude (°N)")
        ax.set_aspect(1 / np.cos(np.deg2rad(50.0)))
        ax.legend(loc="lower left", fontsize=8)
    fig.suptitle("Private mean location of European cities on S²")
    path = out / "demo_map.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
