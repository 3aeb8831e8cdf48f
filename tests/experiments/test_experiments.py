"""The reproduction experiments: CLI end to end, determinism, and oracles for their numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pymc_manidp.cli import main
from pymc_manidp.experiments import (
    EXPERIMENTS,
    kng2022_fig1,
    local_linear_smooth,
    run,
    self_intersects,
    theorems,
)
from pymc_manidp.experiments._common import child_seeds

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """``pymc-manidp reproduce laplace2021_fig1 --quick --replicates 4``, in this process.

    ``--scheduler sync``: the files and numbers do not depend on the scheduler (the
    worker-independence test below runs the local processes), and two worker processes
    cost this fixture about half its CPU (``docs/benchmarks.md``, "The default test
    tier's cost").
    """
    out = tmp_path_factory.mktemp("repro")
    argv = ["reproduce", "laplace2021_fig1", "--quick", "--replicates", "4", "--out", str(out)]
    code = main([*argv, "--scheduler", "sync"])
    return code, out / "laplace2021_fig1"


def test_cli_reproduce_writes_figure_and_tables(quick_run):
    code, path = quick_run
    assert code == 0
    png = (path / "laplace2021_fig1.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 20_000
    table = pd.read_csv(path / "table.csv")
    assert list(table.columns) == [
        "panel",
        "space",
        "method",
        "epsilon",
        "n",
        "mean",
        "se",
        "count",
    ]
    assert set(table.panel) == {"sensitivity", "utility", "non_pd_share", "reduction"}
    assert set(table.space) == {"SPD(2)", "S2"}
    util = table[table.panel == "utility"]
    assert (util["count"] == 4).all() and np.isfinite(util["mean"]).all()
    pairs = pd.read_csv(path / "sensitivity_pairs.csv")
    assert len(pairs) == 2 * 6 * 20  # spaces x quick grid x quick pairs
    summary = json.loads((path / "summary.json").read_text())
    assert summary["settings"]["replicates"] == 4 and summary["statements"]


def test_theorem2_bound_dominates_empirical_sensitivity(quick_run):
    """Oracle: every neighbouring pair's ρ(x̄, x̄') is below Theorem 2's bound."""
    table = pd.read_csv(quick_run[1] / "table.csv")
    s = table[table.panel == "sensitivity"]
    for space in ("SPD(2)", "S2"):
        worst = s[(s.space == space) & (s.method == "empirical max")].set_index("n")["mean"]
        bound = s[(s.space == space) & (s.method == "Theorem 2 bound")].set_index("n")["mean"]
        assert (worst <= bound.loc[worst.index]).all()
        # and the bound is not vacuous: within a factor 20 of the worst observed pair
        assert (worst > bound.loc[worst.index] / 20).all()


def test_non_pd_share_is_a_proportion(quick_run):
    table = pd.read_csv(quick_run[1] / "table.csv")
    share = table[table.panel == "non_pd_share"]
    assert len(share) == 2 * 3 * 6  # (ambient, Fréchet) x epsilon (0.5, 1, 2) x quick grid
    assert set(share.epsilon) == {0.5, 1.0, 2.0}
    assert share["mean"].between(0, 1).all()
    for (_, eps), g in share.groupby(["method", "epsilon"]):
        g = g.sort_values("n")
        # sigma = 2 r_E / (n eps): many non-PD releases at n = 10 and eps = 0.5, none at
        # n = 1000
        assert g["mean"].iloc[-1] == 0.0
        if eps == 0.5:
            assert g["mean"].iloc[0] > 0.2


def test_seeded_runs_are_reproducible_and_worker_independent():
    kw = dict(quick=True, replicates=3, seed=11)
    one = kng2022_fig1.kng2022_fig1(workers=1, **kw)
    two = kng2022_fig1.kng2022_fig1(workers=2, **kw)
    again = kng2022_fig1.kng2022_fig1(workers=1, **kw)
    pd.testing.assert_frame_equal(one, two)
    pd.testing.assert_frame_equal(one, again)
    other = kng2022_fig1.kng2022_fig1(workers=1, quick=True, replicates=3, seed=12)
    assert not np.allclose(one["mean"], other["mean"])


def test_child_seeds_do_not_depend_on_the_count():
    a = [s.generate_state(2) for s in child_seeds(5, 1, 2, count=4)]
    b = [s.generate_state(2) for s in child_seeds(5, 1, 2, count=9)[:4]]
    np.testing.assert_array_equal(a, b)


def _slope(sigma_of_n, n_grid=(50, 200, 800), reps=60):
    """Slope of log E ρ² on log n for the manifold Laplace on S² at rate sigma_of_n(n)."""
    from pymc_manidp import Sphere, frechet_mean
    from pymc_manidp.datasets import sphere_cap
    from pymc_manidp.laws import exact

    S = Sphere(dim=2)
    means, ses = [], []
    for i, n in enumerate(n_grid):
        rho2 = []
        for ss in child_seeds(7, i, count=reps):
            rng = np.random.default_rng(ss)
            fm = frechet_mean(S, sphere_cap(n, random_seed=rng)).mean
            x = exact.sample_laplace(S, fm, sigma_of_n(n), 1, rng).points[0]
            rho2.append(float(S.dist(fm, x)) ** 2)
        means.append(np.mean(rho2))
        ses.append(np.std(rho2, ddof=1) / np.sqrt(reps))
    return theorems.fit_slope(n_grid, means, ses)


def test_rate_slope_is_minus_two_and_a_wrong_rate_is_rejected():
    """Thm 3: E ρ² ∝ n⁻². 3 sizes x 60 replicates; accept |slope + 2| < 0.35 (> 3 SE).

    The wrong variant keeps sigma fixed at its n = 50 value (a calibration that forgot
    n): its slope is about 0 and the same criterion rejects it.
    """
    mech = theorems._setup("S2", 1.0)[2][theorems.METHODS[0]]
    slope, se = _slope(mech.sigma)
    assert abs(slope + 2.0) < 0.35 and se < 0.12
    wrong, _ = _slope(lambda n: mech.sigma(50))
    assert abs(wrong + 2.0) > 0.35


def test_theorem4_inflation_matches_its_closed_form():
    """E‖P x̃_D − x̄‖² = σ² d (D + 1) (2021 Thm 4's proof): d = 2, D = 5, 1500 replicates.

    Accept within 4 SE; the unprojected ambient error (σ² D(D+1), a wrong variant of
    the projection) fails the same test.
    """
    d, D, n, r = 2, 5, 100, 1.0
    rows = theorems._inflation_chunk(d, D, n, r, 1.0, list(enumerate(child_seeds(3, count=1500))))
    sigma2 = (2 * r / n) ** 2
    proj = np.array([x["projected"] for x in rows]) / sigma2
    amb = np.array([x["ambient"] for x in rows]) / sigma2
    intr = np.array([x["intrinsic"] for x in rows]) / sigma2
    for values, theory, ok in ((proj, d * (D + 1), True), (amb, d * (D + 1), False)):
        z = abs(values.mean() - theory) / (values.std(ddof=1) / np.sqrt(len(values)))
        assert (z < 4) == ok
    # the intrinsic Laplace on R^d: E|x|² = σ² d (d + 1)
    assert abs(intr.mean() - d * (d + 1)) < 4 * intr.std(ddof=1) / np.sqrt(len(intr))


def test_local_linear_smoother_is_equivariant_and_keeps_lines():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3, 10, 2))
    s = local_linear_smooth(z, 1.3)
    rot = np.array([[0.6, -0.8], [0.8, 0.6]])
    shift = np.array([2.0, -1.0])
    # a linear smoother with weights summing to one commutes with similarity maps
    np.testing.assert_allclose(local_linear_smooth(z @ rot.T + shift, 1.3), s @ rot.T + shift)
    # local linear regression reproduces a locally linear sequence exactly (narrow kernel,
    # away from the wrap-around)
    t = np.arange(40.0)
    line = np.stack([3 * t, -t + 2], -1)
    np.testing.assert_allclose(local_linear_smooth(line, 1.0)[10:30], line[10:30], atol=1e-9)
    with pytest.raises(ValueError):
        local_linear_smooth(z, 0.0)


def test_self_intersection_detects_a_figure_eight():
    t = np.linspace(0, 2 * np.pi, 30, endpoint=False)
    ellipse = np.stack([np.cos(t), 0.5 * np.sin(t)], -1)
    eight = np.stack([np.sin(t), np.sin(2 * t)], -1)
    assert self_intersects(np.stack([ellipse, eight])).tolist() == [False, True]


def test_registry_and_unknown_names():
    assert set(EXPERIMENTS) == {
        "laplace2021_sensitivity",
        "laplace2021_fig1",
        "kng2022_fig1",
        "kng2022_shapes",
        "theorems",
        "median_robustness",
        "geodesic_regression",
        "tangent_mechanisms",
    }
    with pytest.raises(ValueError, match="unknown experiment"):
        run("fig9", out=None)
    with pytest.raises(ValueError, match="replicates"):
        run("theorems", replicates=1, out=None)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["reproduce", "fig9"], "unknown experiment 'fig9'"),
        (["reproduce", "theorems", "--replicates", "1"], "replicates must be an integer >= 2"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["reproduce", "theorems", "--quick", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pymc-manidp reproduce: error:") and "is a file" in err
    assert len(err.strip().splitlines()) == 1


# --- 2021 Example 1 and supplement Fig. 1 (laplace2021_sensitivity) --------------------


def test_circle_frechet_means_match_a_brute_force_grid():
    """The exact piecewise-quadratic minimizer against a 200,000-point grid search."""
    from pymc_manidp.experiments.laplace2021_sensitivity import circle_frechet_means

    rng = np.random.default_rng(4)
    grid = np.linspace(0, 2 * np.pi, 200_000, endpoint=False)
    for n in (2, 5, 9):
        x = rng.uniform(0, 2 * np.pi, n)
        d = np.abs((grid[:, None] - x[None, :] + np.pi) % (2 * np.pi) - np.pi)
        f = np.sum(d**2, axis=1)
        means, f_min = circle_frechet_means(x)
        assert f_min <= f.min() + 1e-12 and f_min > f.min() - 1e-3
        gap = np.abs((means[:, None] - grid[np.argmin(f)] + np.pi) % (2 * np.pi) - np.pi)
        assert gap.min() < 1e-4


@pytest.mark.parametrize("n", [4, 6, 12])
def test_example1_sensitivity_does_not_decrease_with_n(n):
    """2021 Example 1: for even n the mean is the copied point, so one record moves it
    by the largest gap of the n - 1 equally spaced points, π(n - 2)/(n - 1) -> π."""
    from pymc_manidp.experiments.laplace2021_sensitivity import example1

    e = example1(n)
    assert e["unique_mean"] and e["mean_is_the_copy"]
    assert np.isclose(e["sensitivity"], np.pi * (n - 2) / (n - 1), atol=1e-9)
    odd = example1(n + 1)  # antipodal pairs: the mean is not unique
    assert not odd["unique_mean"] and np.isnan(odd["sensitivity"])


def test_supplement_fig1_ordering_and_its_table(tmp_path):
    """2r < empirical spread < 2r(2 - H) at every radius (2021 supplement §2.1)."""
    from pymc_manidp.experiments import laplace2021_sensitivity as L

    table = L.laplace2021_sensitivity(quick=True, out=tmp_path)
    s = table[table.check == "supplement_fig1"].pivot(index="x", columns="quantity", values="value")
    assert ((s[L.LOWER] < s[L.SPREAD]) & (s[L.SPREAD] < s[L.UPPER])).all()
    assert (tmp_path / "laplace2021_sensitivity" / "supplement_fig1.png").read_bytes()[:8] == (
        PNG_MAGIC
    )


# --- Theorem 3 in d and epsilon ----------------------------------------------------------


@pytest.mark.parametrize("space, eps", [("S4", 1.0), ("S2", 0.5)])
def test_laplace_error_scales_as_sigma2_d_d_plus_1(space, eps):
    """E ρ² = σ² d(d+1) for the restricted Laplace as σ -> 0 (ρ ~ Gamma(d, σ)):
    n = 1000, 800 draws for one dataset, accept within 4 SE. The wrong constant σ² d²
    (d = 4: off by 25%) is rejected by the same test; on S² at ε = 0.5, σ² d(d+1)
    with the ε of another setting (σ halved) is rejected too."""
    from pymc_manidp import frechet_mean

    M, gen, mechs = theorems._setup(space, eps)
    mech = mechs[theorems.METHODS[0]]
    rng = np.random.default_rng(21)
    x = gen(1000, rng)
    fm = frechet_mean(M, x, tol=1e-12).mean
    rho2 = M.dist(fm, mech.sample(x, 800, random_seed=rng)) ** 2
    se = rho2.std(ddof=1) / np.sqrt(len(rho2))
    d, sigma = M.dim, mech.sigma(1000)
    assert abs(rho2.mean() - sigma**2 * d * (d + 1)) < 4 * se
    wrong = sigma**2 * d**2 if d > 2 else (sigma / 2) ** 2 * d * (d + 1)
    assert abs(rho2.mean() - wrong) > 4 * se


# --- the document's renderers (experiments.report) on small runs ---------------------


def test_report_renders_the_2021_numbers_from_the_table(quick_run):
    """The rendered block shows the table's own numbers (here from a tiny run)."""
    from pymc_manidp.experiments import laplace2021_fig1 as L
    from pymc_manidp.experiments import report

    path = quick_run[1]
    table = pd.read_csv(path / "table.csv")
    summary = json.loads((path / "summary.json").read_text())
    block = report._fig2021((table, summary))
    share = table[
        (table.panel == "non_pd_share")
        & (table.method == L.NON_PD_FRECHET)
        & (table.epsilon == 0.5)
        & (table.n == 20)
    ]["mean"].iloc[0]
    row = next(line for line in block.splitlines() if line.startswith("| 20 |"))
    assert row.split(" | ")[1] == f"{100 * share:.1f}%"
    assert "25% over n = 20–40 is reached" in block and "largest pair / bound" in block


def test_report_renders_the_2022_orderings():
    from pymc_manidp.experiments import report

    table = kng2022_fig1.kng2022_fig1(workers=1, quick=True, replicates=2, seed=5)
    block = report._fig2022((table, {"seed": 5}))
    kng = table[(table.space == "S2") & (table.method == kng2022_fig1.KNG) & (table.n == 10)]
    assert f"{10 * kng['mean'].iloc[0]:.3f}" in block
    assert block.count(" < ") >= 4 and kng2022_fig1.PROJECTED_PAPER in block


def test_median_robustness_replicate_contaminates_and_scores_every_mechanism():
    from pymc_manidp.experiments import median_robustness as mr

    ss = child_seeds(1, 0, count=1)[0]
    rows = mr._chunk("S2", 50, 0.1, 1.0, [(0, ss)])
    assert [r["method"] for r in rows] == [mr.LAPLACE, mr.KNG_MEAN, mr.KNG_MEDIAN]
    assert all(np.isfinite(r["dist"]) and 0 <= r["dist"] <= 2 * np.pi / 8 for r in rows)
    M, _, mechs, outlier = mr._setup("S2", 1.0)
    # the outlier cluster sits at the ball's edge, in the ball
    assert 0.99 * np.pi / 8 < float(M.dist(outlier, mechs[mr.LAPLACE].domain.center)) < np.pi / 8
    assert mechs[mr.KNG_MEDIAN].statistic == "median"


def test_geodesic_regression_replicate_releases_and_scores_against_the_fit():
    from pymc_manidp.experiments import geodesic_regression as G

    joint, seq = G._chunk(20, 1.0, [(0, np.random.SeedSequence(0))])
    assert (joint["method"], seq["method"]) == (G.JOINT, G.SEQUENTIAL)
    # n eps = 20: above the joint's proved failure bound (17.0; drawn by sample(), an
    # exact release is refused), below the sequential's (42.5)
    assert (joint["status"], seq["status"]) == (G.LAW_ONLY, "released")
    mech = G.mechanism(1.0)
    # the public bound is the mechanism's, the paper's is 2 tau_hat / n
    assert joint["delta_p"] == mech.sensitivities(20)[0]
    assert joint["paper_delta_p"] == pytest.approx(2 * joint["tau_hat"] / 20)
    assert joint["delta_p"] > 10 * joint["paper_delta_p"]
    # the joint release's footpoint lies in B_R(m), the sequential one's in B_r(m); the
    # fit within the noise of m
    assert 0.0 <= joint["dist_p"] <= G.FOOTPOINT_RADIUS + 0.05
    assert 0.0 <= seq["dist_p"] <= G.RADIUS + 0.05
    for row in (joint, seq):
        assert 0.0 <= row["dist_v"] <= 2 * G.SLOPE_BOUND


def test_geodesic_regression_refuses_cells_beyond_the_exact_sampler_before_drawing():
    from pymc_manidp.experiments import geodesic_regression as G

    joint, seq = G._chunk(1000, 1.0, [(0, np.random.SeedSequence(0))])
    assert joint["status"] == G.BEYOND and np.isnan(joint["dist_p"]) and np.isnan(joint["dist_v"])
    assert seq["status"] == G.LAW_ONLY and np.isfinite(seq["dist_v"])  # n eps <= 2000
    joint, _ = G._chunk(500, 1.0, [(0, np.random.SeedSequence(0))])  # n eps = 500: drawn
    assert joint["status"] == G.LAW_ONLY and np.isfinite(joint["dist_p"])
    joint, _ = G._chunk(20, 0.5, [(0, np.random.SeedSequence(0))])  # inside the proof
    assert joint["status"] == "released"


def test_geodesic_regression_proved_caps_are_the_mechanisms_and_refuse_releases_beyond():
    from pymc_manidp.experiments import geodesic_regression as G

    for space, D in G.DESIGNS.items():
        for method in G.METHODS:
            ne = D.proved_n_epsilon[method]
            assert ne == G.mechanism(1.0, space, method).largest_n_epsilon()
            assert 5 < ne < D.max_n_epsilon[method]
            with pytest.raises(ValueError, match="largest n epsilon proved"):
                G.mechanism(1.0, space, method).check_exact_failure(int(ne) + 1)


@pytest.mark.parametrize("space", ["SPD(2)", "Kendall(3)"])
def test_geodesic_regression_other_spaces_release_inside_their_public_domains(space):
    from pymc_manidp.experiments import geodesic_regression as G

    D = G.DESIGNS[space]
    M = D.manifold
    _, y = G.design(20, np.random.default_rng(2), space)
    assert np.all(M.dist(D.footpoint, y) < D.radius)  # the design fits its public ball
    joint, seq = G._chunk(20, 1.0, [(0, np.random.SeedSequence(1))], space)
    assert {joint["status"], seq["status"]} <= {"released", G.LAW_ONLY}
    assert joint["delta_p"] == G.mechanism(1.0, space).sensitivities(20)[0]
    assert 0 <= joint["dist_p"] <= D.footpoint_radius + 0.2  # the fit is near m
    assert 0 <= seq["dist_p"] <= D.radius + 0.2
    for row in (joint, seq):
        assert 0 <= row["dist_v"] <= 2 * D.slope_bound + 0.5


def test_geodesic_regression_slope_error_aligns_representatives_of_a_shape():
    # a Kendall shape and its slope rotated in the plane are the same (p, v): error 0;
    # without the alignment the rotation alone would show as an error
    from pymc_manidp.experiments import geodesic_regression as G

    D = G.DESIGNS["Kendall(3)"]
    M = D.manifold
    p, v = D.footpoint, D.slope
    c, s = np.cos(0.7), np.sin(0.7)
    rot = np.array([[c, -s], [s, c]])
    assert G._slope_error(M, p, v, p @ rot, v @ rot, quotient=True) == pytest.approx(0, abs=1e-9)
    assert G._slope_error(M, p, v, p @ rot, v @ rot, quotient=False) > 0.1
    w = 0.1 * M.tangent_basis(p)[1]
    assert G._slope_error(M, p, v + w, p, v, quotient=True) == pytest.approx(0.1, rel=1e-9)


def test_geodesic_regression_design_and_projection_onto_the_ball():
    import pymc_manidp as pmd
    from pymc_manidp.experiments import geodesic_regression as G

    S = pmd.Sphere(dim=2)
    x, y = G.design(200, np.random.default_rng(1))
    assert x[0] == -1.0 and x[-1] < 1.0 and np.allclose(np.diff(x), 0.01)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0)
    z, moved = G.project_onto_ball(y)
    d0, d1 = S.dist(G.FOOTPOINT, y), S.dist(G.FOOTPOINT, z)
    far = d0 > G.RADIUS
    assert moved == far.sum() > 0  # the design leaves a ball below r* = pi/4
    assert np.all(d1 <= G.RADIUS)
    np.testing.assert_array_equal(z[~far], y[~far])
    # moved along the geodesic from the center: the direction of log_m is kept
    u0 = S.log(np.broadcast_to(G.FOOTPOINT, y[far].shape), y[far])
    u1 = S.log(np.broadcast_to(G.FOOTPOINT, z[far].shape), z[far])
    np.testing.assert_allclose(u1 / d1[far, None], u0 / d0[far, None], atol=1e-9)


# --- issue 39 item 5 (tangent_mechanisms) ----------------------------------------------


def test_tangent_budget_shares_are_the_largest_plans_the_ledger_admits():
    """Oracles: the Gaussian plan's total μ is gaussian_mu(1, 1e-6) (GDP composes as
    √k μ); each share fits the budget and 1% more does not (maximal); the pure share is
    never below ε/k and beats it once the PLD pays off (k = 16)."""
    from pymc_manidp.experiments import tangent_mechanisms as T
    from pymc_manidp.privacy.budget import PrivacyBudget
    from pymc_manidp.stats.gaussian import gaussian_mu

    for k in (4, 16):
        s = T.budget_shares(k)
        assert s["mu_total"] == pytest.approx(gaussian_mu(1.0, 1e-6), rel=1e-5)
        assert s["planned_epsilon"] <= 1.0 and s["gauss_delta"] == 1e-6 / k
        g = lambda e, d=1e-6 / k: (e, d, gaussian_mu(e, d))  # noqa: E731
        PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[g(s["gauss_epsilon"])] * k)
        with pytest.raises(ValueError, match="more than the budget"):
            PrivacyBudget(1.0, 1e-6, composition="optimal", plan=[g(1.01 * s["gauss_epsilon"])] * k)
        assert s["pure_epsilon"] >= 1.0 / k
        if s["pure_rule"] != "basic (ε/k)":
            plan = [(1.01 * s["pure_epsilon"], 0.0)] * k
            with pytest.raises(ValueError, match="more than the budget"):
                PrivacyBudget(1.0, 1e-6, composition="optimal", plan=plan)
    assert T.budget_shares(16)["pure_epsilon"] > 1 / 16


def test_tangent_chunk_scores_every_cell_on_the_same_data():
    from pymc_manidp.experiments import tangent_mechanisms as T

    ss = child_seeds(1, 0, count=1)[0]
    cells = [(m, {"k": 1, "r": 1.5, "epsilon": 1.0}, (1.0, 1e-6)) for m in (T.TLAP, T.TGAUSS)]
    rows = T._chunk("pure", "H2", 200, cells, 3, [(0, ss)])
    assert [r["method"] for r in rows] == [T.TLAP, T.TGAUSS]
    assert all(np.isfinite(r["dist"]) and 0 < r["dist"] < 1.0 for r in rows)
    # the two-stage part puts the data 0.8 r from the center, where its mean is
    cells = [(T.TWO, {"k": 1, "r": 1.0, "epsilon": 1.0}, (1.0, 1e-6, 1.0, 0.2))]
    (row,) = T._chunk("two_stage", "H2", 100, cells, 2, [(0, ss)])
    assert row["method"] == T.TWO and 0 < row["dist"] < 1.0


def test_tangent_a_failing_cell_leaves_the_other_cells_draws_unchanged(monkeypatch):
    """A cell with no exact draw is tried once per process, then skipped: whether it is
    tried (consuming random numbers before it fails) or skipped must not change the other
    cells' rows, or the table would depend on how replicates fall on workers."""
    from pymc_manidp.experiments import tangent_mechanisms as T

    real = T._errors

    def errors(mech, M, x, target, draws, rng, **kw):
        if isinstance(mech, T._mech("H2", T.LAP, 1.0, 1e-6).__class__):
            rng.random(7)  # a sampler that gives up after drawing
            raise ValueError("no exact draw")
        return real(mech, M, x, target, draws, rng, **kw)

    monkeypatch.setattr(T, "_errors", errors)
    monkeypatch.setattr(T, "_NO_EXACT", {})
    ss = child_seeds(3, 0, count=1)[0]
    cells = [(m, {"k": 1, "r": 1.5, "epsilon": 1.0}, (1.0, 1e-6)) for m in (T.LAP, T.TLAP)]
    tried = T._chunk("pure", "H2", 60, cells, 3, [(0, ss)])
    skipped = T._chunk("pure", "H2", 60, cells, 3, [(0, ss)])  # now cached as failing
    assert np.isnan(tried[0]["dist"]) and np.isnan(skipped[0]["dist"])
    assert tried[1]["dist"] == skipped[1]["dist"]


def test_gdp_epsilon_pure_is_the_largest_pure_epsilon_implying_mu_gdp():
    """Oracle: the ε-DP trade-off function max(0, 1 − e^ε α, e^−ε (1 − α)) lies above
    G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) on a grid at ε(μ), and not at 1.01 ε(μ); the math
    note's values (μ = 0.1, 0.5, 1, 2: ε = 0.080, 0.400, 0.807, 1.668)."""
    from scipy.stats import norm

    from pymc_manidp.experiments import tangent_mechanisms as T

    alpha = np.linspace(0, 1, 20001)
    for mu, note in ((0.1, 0.080), (0.5, 0.400), (1.0, 0.807), (2.0, 1.668)):
        e = T.gdp_epsilon_pure(mu)
        assert round(e, 3) == note
        g = norm.cdf(norm.ppf(1 - alpha) - mu)

        def f(eps):
            return np.maximum.reduce(
                [0 * alpha, 1 - np.exp(eps) * alpha, np.exp(-eps) * (1 - alpha)]
            )

        assert np.all(f(e) >= g - 1e-12)
        assert np.any(f(1.01 * e) < g - 1e-6)


@pytest.mark.parametrize("d, sigma", [(2, 0.2), (3, 0.375)])
def test_ball_laplace_draws_match_the_package_restricted_sampler(d, sigma):
    """The experiment's sampler of the restricted Laplace on H^d (polar at m0) against
    the package's exact one (polar at the footpoint), where both draw: two-sample KS
    of ρ(η, y) and ρ(m0, y), α = 0.01, 2,000 draws each, seed fixed; 1.5 σ is caught."""
    from scipy import stats

    from pymc_manidp.experiments import tangent_mechanisms as T
    from pymc_manidp.laws.exact.laplace import sample_laplace
    from pymc_manidp.stats.domain import DataDomain

    rng = np.random.default_rng(5)
    M = __import__("pymc_manidp").Hyperbolic(dim=d)
    c = np.eye(d + 1)[0]
    eta = M.exp_coords(c, np.r_[0.4, np.zeros(d - 1)])
    ours = T.ball_laplace_draws(M, c, 1.5, eta, sigma, 2000, rng)
    ref = sample_laplace(M, eta, sigma, 2000, rng, domain=DataDomain(M, c, 1.5)).points
    wrong = T.ball_laplace_draws(M, c, 1.5, eta, 1.5 * sigma, 2000, rng)
    assert np.all(M.dist(c, ours) <= 1.5)
    for ref_point in (eta, c):
        assert stats.ks_2samp(M.dist(ref_point, ours), M.dist(ref_point, ref)).pvalue > 0.01
    assert stats.ks_2samp(M.dist(eta, wrong), M.dist(eta, ref)).pvalue < 0.01


def test_rg_sigma_for_mu_gives_the_estimated_mu_asked_for():
    """(S³, n = 100, μ = 1: the jiang cell the next test draws, so the cached σ is shared.)"""
    from pymc_manidp.experiments import tangent_mechanisms as T
    from pymc_manidp.mechanisms.riemannian_gaussian import estimated_mu

    sens = T._mech("S3", T.RG_EST, 1.0, 1e-6).sensitivity(100)
    sigma = T.rg_sigma_for_mu(3, sens, 1.0)
    assert estimated_mu(3, sigma, sens) <= 1.0 < estimated_mu(3, sigma * (1 - 2e-4), sens)


def test_tangent_gdp_parts_score_every_method_with_its_mu():
    """The iclr_gdp and jiang cells: a row per method with its μ, all drawn (the
    restricted Laplace on H^15 at μ = 0.1 too, where the package's sampler is stuck)."""
    from pymc_manidp.experiments import tangent_mechanisms as T

    ss = child_seeds(2, 0, count=1)[0]
    for part, space, n, mu in (("iclr_gdp", "H15", 40, 0.1), ("jiang", "S3", 100, 1.0)):
        e = T.gdp_epsilon_pure(mu)
        cells = [
            (m, {"k": 1, "r": 1.0, "epsilon": e, "mu": mu},
             (1.0, 1e-6) if m in (T.TGAUSS, T.RG_EST) else (e, 1e-6))
            for m in T.GDP_METHODS[part]
        ]  # fmt: skip
        rows = T._chunk(part, space, n, cells, 2, [(0, ss)])
        assert [r["method"] for r in rows] == list(T.GDP_METHODS[part])
        assert all(r["mu"] == mu for r in rows)
        drawn = {r["method"]: r["dist"] for r in rows if np.isfinite(r["dist"])}
        assert T.TGAUSS in drawn and T.TLAP in drawn
        if part == "iclr_gdp":
            assert T.RLAP in drawn and 0 < drawn[T.RLAP] <= 3.0
            assert T.LAP not in drawn  # the unrestricted law is not normalizable there
        else:
            assert set(drawn) == set(T.GDP_METHODS[part])
