"""KNG exact sampler: acceptance rate of the shell-wise envelope (docs/exact.md).

Run: PYTHONPATH=. .venv/bin/python docs/benchmarks/kng_acceptance.py
Data: uniform in the public ball's cap (sphere) or Gaussian in normal coordinates at the
center with scale r/3, clipped into the ball (Kendall); 2,000 draws per case.
"""

import numpy as np

import pymc_manidp as pmd


def cap(M, m0, r, n, rng):
    c = rng.normal(size=(n, M.dim))
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    c *= r * rng.uniform(0, 1, (n, 1)) ** (1 / M.dim)
    return M.exp_coords(m0, c)


rng = np.random.default_rng(0)
S2, north = pmd.Sphere(dim=2), np.array([0, 0, 1.0])
square = np.array([[0, 0], [1, 0], [1, 1], [0, 1.0]])
octagon = np.stack([np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)], -1)
cases = [
    ("S2, r = pi/8", S2, north, np.pi / 8, "cap"),
    ("S2, r = 0.99 r*", S2, north, 0.99 * np.pi / 4, "cap"),
    ("Kendall(4), r = 0.35", pmd.KendallShape(k_landmarks=4), square, 0.35, "gauss"),
    ("Kendall(4), r = 0.99 r*", pmd.KendallShape(k_landmarks=4), square, 0.99 * np.pi / 8, "gauss"),
    ("Kendall(8), r = 0.2", pmd.KendallShape(k_landmarks=8), octagon, 0.2, "gauss"),
]
print("| case | H | n·ε = 20 | 200 | 2,000 | 2e5 | 2e9 |")
print("|---|---|---|---|---|---|---|")
for label, M, m0, r, kind in cases:
    dom = pmd.DataDomain(M, m0, r)
    row = []
    for n, eps in [(20, 1.0), (200, 1.0), (2000, 1.0), (2000, 100.0), (2000, 1e6)]:
        if kind == "cap":
            data = cap(M, dom.center, r, n, rng)
        else:
            data = M.exp_coords(dom.center, rng.normal(size=(n, M.dim)) * r / 3)
        data = dom.check(data, clip=True)
        mech = pmd.KNGMechanism(M, epsilon=eps, center=m0, radius=r)
        _, info = mech.sample(data, 2000, random_seed=1, return_info=True)
        row.append(f"{info['acceptance_rate']:.2f}")
    print(f"| {label} | {dom.curvature_factor:.3f} | " + " | ".join(row) + " |")
