"""Issue 13's TUlip acceptance, end to end on the MuJoCo physics twin: a double-support excitation designed by
the planner (κ of the identifiable simplified ZMP base parameters, column-scaled, ≤ 741 = the thesis's 74 131 / 100),
its ZMP checked independently (MuJoCo's inverse dynamics, a shapely polygon of the two soles), streamed through the
real servo and board drivers to the twin (`poise run --physics mujoco --time-scale`), and identified from the
boards' wrench with `identify dynamic` against the twin's saved truth."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from conftest import TEST_DESIGN
from shapely.geometry import MultiPoint, Point

from drivers.emulators.mujoco_arm import physical_truth, standing_wrench
from formats.dynamic_recording import read_dynamic_recording
from formats.trajectory_plan import load_trajectory_plan, save_trajectory_plan
from identify.dynamic import DynamicEstimator
from identify.forecast import filtered_autocorrelation, forecast_dynamic
from poise.cli import main
from poise.workflows.plan_forecast import forecast_plans
from robots.kinematics import site_pose
from robots.params_io import resolve_params
from trajectories.balance_excitation import optimise_balance
from trajectories.excitation import ExcitationSettings
from trajectories.plan import make_plan, plan_trajectory
from trajectories.verify import sample_grid

pytestmark = pytest.mark.slow

THESIS_KAPPA = 74_131.0
MARGIN = 0.06  # m: the servo-driven closed chain sways; 20 mm lets a sole tip onto its toe on the twin
SHARE = 0.25  # each sole carries ≥ 25 % by the lever rule: a nearly unloaded sole rocks on a corner
# the design minimises the parameters' summed log variances (each scale-free; D-optimality's stage first) with 7
# harmonics of a 10 s period (0.7 Hz band); the former design (κ, 3 harmonics) is the stored TEST_DESIGN
SETTINGS = ExcitationSettings(
    period=10.0, duration=10.0, harmonics=7, samples=64, max_iter=200, simplified=True, criterion="logvar",
    scaling="none", motion="double-support", zmp_margin=MARGIN, load_share=SHARE,
    velocity_fraction=0.3,  # executor: 1 rad/s
)  # fmt: skip
# the next experiment, designed for this one: `poise plan trajectory tulip` with SETTINGS' options, --seed 4 and
# --prior the design below (stored: a design takes two minutes); it stands in the same placement
NEXT_DESIGN = TEST_DESIGN.parent / "tulip_double_support_10s_next.json"
WELL = 15.0  # % relative SE
SE_SPREAD = 1.6  # fit SE / forecast SE reached 1.51 over five twin runs


@pytest.fixture(scope="module")
def design(tulip, tmp_path_factory):
    res = optimise_balance(tulip, SETTINGS, seed=3, zmp_margin=MARGIN)
    path = tmp_path_factory.mktemp("ds") / "traj.json"
    save_trajectory_plan(make_plan("tulip", tulip, res, SETTINGS, 3, 100.0), path)
    return res, path


def _run(plan, out, *extra: str) -> None:
    """The plan on the twin as a double-support experiment is run: with the gravity feed-forward, which keeps the
    legs' internal moments off the soles (without it they rocked on three corners 12–51 % of the ticks and biased
    the estimates beyond 3 SE over 30 runs; see README). `--time-scale 1` only caps the twin's speed: the drivers
    keep to its clock, so a loaded machine runs it slower (0.55× measured), with the same ticks."""
    args = ["run", str(plan), "--robot", "sim", "--boards", "sim", "--physics", "mujoco", "--gravity-comp",
            "--time-scale", "1", "--no-noise", "--out", str(out), "--yes", "--json", *extra]  # fmt: skip
    assert main(args) == 0


@pytest.fixture(scope="module")
def run_dir(design, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    _run(design[1], out, "--twin-trace")  # the physics' own record: how the soles moved
    return out


@pytest.fixture(scope="module")
def slow_run_dir(tmp_path_factory):
    """A run of the former, slower design (κ criterion, 3 harmonics): least squares biased the torso's Ixz there."""
    out = tmp_path_factory.mktemp("run") / "slow"
    _run(TEST_DESIGN, out)
    return out


def test_design_is_100x_better_conditioned_than_the_thesis(tulip, design, capsys):
    res, path = design
    assert res.kappa_scaled <= THESIS_KAPPA / 100, res.kappa_scaled
    lo, hi = res.verification["load_share_range"]
    assert SHARE - 1e-3 <= lo and hi <= 1 - SHARE + 1e-3
    assert main(["plan", "check", str(path), "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert check["kappa_scaled"] == pytest.approx(res.kappa_scaled, rel=0.2)


def test_every_sample_keeps_the_zmp_inside_by_the_margin(tulip, design):
    """ZMP from MuJoCo's inverse dynamics (not poise's RNEA) with the guessed parameters, polygon from the two
    soles' corners by shapely, on a 5 ms grid."""
    plan = load_trajectory_plan(design[1])
    traj = plan_trajectory(plan, tulip)
    t = sample_grid(traj, 0.005)
    q, qd, qdd = traj.sample(t)
    w = standing_wrench(tulip, physical_truth(tulip.parameter_set(plan.params)), "right", q, qd, qdd)
    zmp = np.stack([-w[:, 4] / w[:, 2], w[:, 3] / w[:, 2]], axis=1)
    corners = []
    for site in tulip.sites:
        if site.rect is None:
            continue
        x0, x1, y0, y1 = site.rect
        R, p = site_pose(tulip, q[0], plan.params, site.name, "right")
        corners += [(p + R @ np.array([x, y, 0.0]))[:2] for x in (x0, x1) for y in (y0, y1)]
    polygon = MultiPoint(corners).convex_hull
    inside = [polygon.contains(Point(z)) for z in zmp]
    depth = np.array([polygon.exterior.distance(Point(z)) for z in zmp])
    assert all(inside) and depth.min() >= MARGIN - 1e-3, depth.min()


@pytest.fixture(scope="module")
def next_run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "next"
    _run(NEXT_DESIGN, out)
    return out


def test_the_twin_executes_it_standing(tulip, run_dir):
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "completed" and meta["ticks_streamed"] == meta["ticks_planned"]
    assert meta["gravity_compensation"] is True
    kinds = {e["kind"] for e in meta["twin_events"]}
    assert not kinds & {"fall", "lift", "slip", "edge"}, meta["twin_events"]
    rec = read_dynamic_recording(run_dir / "recording.csv")
    assert float(rec.meta["moment_z_m"]) < 0  # the cells' plane, below the soles
    # the executor's tally from each board (its sole's own CoP beyond the region that keeps four corners down)
    # against the physics: how often a corner of that sole was off its plate over the recording
    from bench.twin_misfit import _offset, _sole_paths, twin_model

    tr = dict(np.load(run_dir / "twin_trace.npz"))
    t, keep = np.unique(tr["t"], return_index=True)
    off = _offset(rec.t, rec.q, t, tr["q"][keep])  # the recording's start in simulated time
    truth = resolve_params(str(run_dir / "truth.json"), tulip)
    grid = np.arange(off, off + rec.t[-1], 0.001)
    physics = _sole_paths(twin_model(tulip, truth), tulip, t, tr["qpos"][keep], grid, 2.8)
    for site, tally in meta["soles"].items():
        assert tally["ticks"] >= 0.9 * meta["ticks_streamed"]
        assert tally["rocked_share"] == pytest.approx(physics[site]["corner_off_share"], abs=0.08), (
            site,
            tally,
        )
    assert rec.t[-1] == pytest.approx(
        SETTINGS.duration, abs=0.05
    )  # trajectory time, not the slowed wall clock


def test_the_runs_measured_cop_stays_inside_the_support_polygon(tulip, run_dir):
    """The acceptance's ZMP check on the executed run, not only on the plan: the boards' own measure of the centre
    of pressure (their vertical loads, about the cells' plane: the ZMP but for Fx, Fy × 53 mm, a few mm here),
    every 10 ms tick, against the soles' corners at the start by shapely. It keeps the plan's margin but for the
    twin's truth (not the guessed parameters the plan balanced) and the servos' tracking: 6.6 mm short on the
    stored 10 s design's run, noiseless, and on a noisy one (53.4, 53.1 mm deep against 60 mm)."""
    rec = read_dynamic_recording(run_dir / "recording.csv")
    plan = load_trajectory_plan(json.loads((run_dir / "run.json").read_text())["plan"])
    w = rec.wrench
    cop = np.stack([-w[:, 4] / w[:, 2], w[:, 3] / w[:, 2]], axis=1)
    corners = []
    for site in tulip.sites:
        if site.rect is not None:
            x0, x1, y0, y1 = site.rect
            R, p = site_pose(tulip, rec.q[0], plan.params, site.name, rec.base)
            corners += [(p + R @ np.array([x, y, 0.0]))[:2] for x in (x0, x1) for y in (y0, y1)]
    polygon = MultiPoint(corners).convex_hull
    assert all(polygon.contains(Point(c)) for c in cop)
    depth = min(polygon.exterior.distance(Point(c)) for c in cop)
    assert depth >= MARGIN - 0.015, depth


def test_identification_against_the_twins_truth(tulip, run_dir):
    rec = read_dynamic_recording(run_dir / "recording.csv")
    truth = resolve_params(str(run_dir / "truth.json"), tulip)
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench", essential_pct=WELL).fit(rec)
    fit, nb = est.fit_, est.dynamic_base_.rank
    ref = est.reference_values(truth)
    z = (fit.values[:nb] - ref) / fit.se[:nb]
    estimated = np.isfinite(z)
    # what this motion class cannot identify is named: standard parameters that never enter the boards' wrench
    # at this placement, and base parameters it does not determine to WELL % (held at the prior, with the reason)
    assert fit.unidentifiable and all("@" in n for n in fit.unidentifiable)
    assert set(fit.fixed) == {fit.symbols[i] for i in np.flatnonzero(~estimated)}
    assert all("rel. SE" in why for why in fit.fixed.values())
    assert np.all(fit.rel_se_pct[:nb][estimated] < WELL)
    # the total mass (the base parameter summing every link's mass) within 1.5 % of the twin's. Not "within 3 SE":
    # the residuals are mostly the twin's systematic misfit (sole creep, servo steps), which the SE does not bound:
    # runs measured |z| 0.06, 0.55 and, once in CI, 3.8 (0.9 % off) — the tests below hold what the run determines to it
    total = next(k for k, f in enumerate(fit.formulas[:nb]) if f.count("m@") == len(tulip.links))
    assert estimated[total] and fit.rel_se_pct[total] < 1.0
    assert fit.values[total] == pytest.approx(truth.total_mass, rel=0.015)


def test_the_plans_forecast_named_what_the_run_could_not_determine(tulip, design, run_dir):
    """`identify.forecast` from the plan (planned angles, guessed parameters) at white noise that the estimator's
    filter turns into the run's residual σ: what it names beyond 600 s of this motion, the run does not determine
    either, and what it names determined as planned with room to spare (SE_SPREAD), the run determines (one
    full run beside other jobs forecast ϑ16 at the edge and did not determine it). The twin's residual lies partly in the
    motion's band, so this white-noise equivalent overstates the SEs a little (measured / forecast median 0.78–0.90,
    range 0.34–1.51 over five runs of 10 and 30 s): a parameter named beyond 600 s forecasts
    > 15 % · √(600 s / 6 s fitted) = 150 % relative SE. The forecast's relative SEs are taken against the twin's
    truth: against the model's guess they are off by the guess's own error — the torso's forward first moment ϑ2
    is guessed −0.24 kg·m, the twin's is −0.106, so it was forecast at 7–9 % and one full test run left it at
    > 15 %; against the truth it forecasts 16–21 % (fits 9–12 %, determined in four of six runs)."""
    rec = read_dynamic_recording(run_dir / "recording.csv")
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench").fit(rec)
    fit = est.fit_
    traj = plan_trajectory(load_trajectory_plan(design[1]), tulip)
    t = sample_grid(traj, 1.0 / rec.rate_hz)
    white = fit.sigma / np.sqrt(filtered_autocorrelation(rec.rate_hz, est.cutoff_, 1, 0)[0])
    meta = {k: rec.meta[k] for k in ("motion_band_hz", "moment_z_m")}
    truth = resolve_params(str(run_dir / "truth.json"), tulip)
    fc = forecast_dynamic(est, t, traj.sample(t)[0], white, params=truth, meta=meta, reuse_base=True)
    assert fc.symbols == fit.symbols and fc.cutoff_hz == pytest.approx(est.cutoff_)
    now, longer, beyond = fc.determined(WELL, 600.0)
    determined = set(fit.determined(WELL)[0])
    assert beyond and not determined & set(beyond)
    # the forecast's promise, with the fit / forecast SE spread measured (up to 1.51) as margin: a parameter it
    # puts at the edge (e.g. ϑ16 at 10–15 %) may land either side of WELL in a run, one it puts within
    # WELL / SE_SPREAD may not (the total mass among them)
    sure = set(fc.determined(WELL / SE_SPREAD, 600.0)[0])
    assert sure <= set(now) and sure <= determined, (sure, determined)
    total = next(fit.symbols[k] for k, f in enumerate(fit.formulas) if f.count("m@") == len(tulip.links))
    assert total in sure


def _identify(run_dir, capsys, *extra: str) -> dict:
    """`identify dynamic` of the run at its default cut-off, all base parameters estimated: its JSON."""
    capsys.readouterr()
    argv = ["identify", "dynamic", str(run_dir / "recording.csv"), "--simplified", "--no-friction",
            "--reference", str(run_dir / "truth.json"), "--json", *extra]  # fmt: skip
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _json_of(argv: list[str]) -> dict:
    """`poise ARGV --json` run once for the tests of a module fixture (no capsys there): its JSON."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def iv_fit(design, run_dir) -> dict:
    """`identify dynamic` of the run with its plan as instruments (IV): four tests hold the same fit to their
    figures, so it is computed once."""
    return _json_of(["identify", "dynamic", str(run_dir / "recording.csv"), "--simplified", "--no-friction",
                     "--reference", str(run_dir / "truth.json"), "--json", "--instruments", str(design[1])])  # fmt: skip


def test_identify_names_what_this_motion_determines(tulip, run_dir, capsys):
    """The recording declares the plan's 0.7 Hz band; the default cut-off is 4× it, 2.8 Hz. All 37 base parameters
    are estimated (none held at a prior: a prior that is not the truth biases the others), and the output names
    those this motion determines to 15 % relative SE and those it does not, with the length this motion repeated
    would need for each (noise alone) and those beyond 600 s. Measured over six runs (standard-order numbering):
    ϑ1 (total mass) and ϑ3 in all, ϑ2, ϑ16, ϑ30 in four, ϑ34, ϑ20, ϑ24 in some — 8, 6, 7, 5, 2, 2 in all (the
    last two with ticks up to 220 ms late on a loaded machine); the former design (κ, 3 harmonics) determined
    only ϑ1 in ten stored runs."""
    out = _identify(run_dir, capsys)
    assert out["cutoff_hz"] == pytest.approx(2.8, rel=0.01)
    # the plan's forecast at the fit's noise agrees with the fit's SEs (median ratio 0.78–0.90 measured): no
    # warning that they lean on motion the plan lacks (as on one sole, tests/test_single_support_twin.py)
    assert not out["se_against_plan"]["optimistic"], out["se_against_plan"]
    assert out["reference"]["estimated"] == 37 and not out["fixed"]
    params = out["parameters"][:37]
    total = next(p["symbol"] for p in params if p["formula"].count("m@") == len(tulip.links))
    assert total in out["determined"] and out["well_pct"] == WELL
    assert sorted(out["determined"] + out["not_determined"]) == sorted(p["symbol"] for p in params)
    assert all((p["rel_se_pct"] < WELL) == (p["symbol"] in out["determined"]) for p in params)
    assert sorted(out["needed_s"]) == sorted(out["not_determined"])
    # a parameter whose estimate lies within 2 SE of zero gets no time (`scale_unresolved`, null)
    assert {s for s, t in out["needed_s"].items() if t is None} == set(out["scale_unresolved"])
    assert set(out["beyond_practical"]) == {
        s for s, t in out["needed_s"].items() if t is not None and t > out["practical_s"]
    }


def test_instruments_take_the_encoders_bias_off_the_torsos_ixz(slow_run_dir, capsys):
    """On the former design, least squares puts the torso's Ixz 1.7–2.4 SE below the twin's truth (the encoders'
    quantisation, differentiated twice, in the regressor: refitted with the twin's exact angles it moves to
    −0.8…−1.6), and in full test runs beyond 3 SE; with the planned angles as instruments (IDIM-IV) it came out
    within 0.3 SE in five stored runs of that design."""
    run_dir = slow_run_dir
    ls, iv = _identify(run_dir, capsys), _identify(run_dir, capsys, "--instruments", str(TEST_DESIGN))
    assert iv["estimator"] == "iv"
    # without a plan: the one the run's run.json names (checked unchanged)
    assert _identify(run_dir, capsys, "--instruments")["parameters"] == iv["parameters"]
    k = next(i for i, p in enumerate(iv["parameters"]) if p["formula"] == "Ixz@torso")
    z_ls, z_iv = ls["reference"]["z"][k], iv["reference"]["z"][k]
    assert abs(z_iv) < 1.5 and z_iv > z_ls, (z_ls, z_iv)


def _forecast(*plans) -> dict:
    """What `plan forecast PLANS --noise 0.49 1.42 1.29 --json` prints of the plans' runs fitted together, at the
    twin's white-noise equivalent (`forecast_plans`, the command's own forecast, without the fine-grid `plan check`
    of each plan behind its warnings, which this test does not read: two of them per call)."""
    pf = forecast_plans([load_trajectory_plan(p) for p in plans], [str(p) for p in plans], (0.49, 1.42, 1.29))
    return pf.forecast.to_dict(WELL, pf.practical_s)


def _median_rel_se(forecast: dict) -> float:
    return float(np.median([p["rel_se_pct"] for p in forecast["parameters"] if p["rel_se_pct"] is not None]))


@pytest.fixture(scope="module")
def pair_fit(design, run_dir, next_run_dir) -> dict:
    """`identify dynamic` of the two runs together, each with its own plan as instruments: its JSON (two tests
    hold the same fit to their figures)."""
    return _json_of(["identify", "dynamic", str(run_dir / "recording.csv"), str(next_run_dir / "recording.csv"),
                     "--simplified", "--no-friction", "--reference", str(run_dir / "truth.json"), "--json",
                     "--instruments", str(design[1]), str(NEXT_DESIGN)])  # fmt: skip


# At `--time-scale 1` the lockstep makes the runs of one plan nearly the same realisation (no sensor noise; what
# the residuals hold is the model's misfit to the twin): measured 2026-11-29 over the design of the acceptance
# settings (κ scaled 224.4) and the stored second design, 12 runs of the first and 6 of the second at 0.49–0.55×
# real time, three of each three at a time beside a CPU burner: among the determined max |z| 0.57–1.46 for the
# first, 0.74–1.94 for the second, 0.57–2.26 for the 6 pairs; all 37 within 3 SE in every fit. At 0.25 (the former
# scale) single runs of the second design left ϑ3 or ϑ16 at 3.5–3.8 SE in 3 of 6; at 4, of three runs of each, one
# first 3.01 and one pair 3.67. See README, Time scale.


def test_what_it_determines_lies_within_3_se_of_the_truth(iv_fit):
    """Every base parameter the run determines to 15 % relative SE (IV, the planned angles as instruments) lies
    within 3 SE of the twin's truth."""
    out = iv_fit
    params, z = out["parameters"][:37], np.array(out["reference"]["z"][:37], dtype=float)
    det = [k for k, p in enumerate(params) if p["symbol"] in out["determined"]]
    assert np.all(np.abs(z[det]) <= 3), {params[k]["symbol"]: round(z[k], 2) for k in det}


def test_it_determines_the_total_mass_and_the_torsos_lateral_moment(tulip, iv_fit):
    """The total mass and the torso's lateral first moment (ϑ3, with the left leg's mass at the hip's offset) are
    determined to 15 % (IV) in every run and lie within 3 SE of the twin's truth (max |z| 2.09 and 2.07 over nine
    runs)."""
    out = iv_fit
    params, z = out["parameters"][:37], np.array(out["reference"]["z"][:37], dtype=float)
    total = next(k for k, p in enumerate(params) if p["formula"].count("m@") == len(tulip.links))
    for k in (total, next(k for k, p in enumerate(params) if p["symbol"] == "ϑ3")):
        assert params[k]["symbol"] in out["determined"] and abs(z[k]) <= 3, (params[k]["symbol"], z[k])


def test_a_run_designed_for_the_first_adds_what_it_lacked(design, iv_fit, pair_fit):
    """Two 10 s runs fitted together, the second designed for the first (`--prior`): each run's own plan as its
    instruments, their samples fitted as independent recordings. Together they determine at least as many base
    parameters as the first alone and shrink the SEs (within 3 SE: the test below). Measured with the designs in
    identification's basis (2026-11-28, one set of runs beside a 2-worker design job): the first alone 7 (37/37
    within 3 SE, max |z| 1.75), with the second 7 (37/37, 2.59; ϑ10 at 18 %, ϑ24 at 15.2 %), with a third designed
    for both (seed 5) 8: ϑ1–ϑ3, ϑ16, ϑ20, ϑ24, ϑ30, ϑ34 (37/37, 2.77; among the determined 1.65) — the 8 a forecast
    of the three against the twin's truth names. Before, in the pivoted basis: 5, 7 (2.45), with a repeat of the
    first 6 (34/37, 3.17), three 8 (1.98) — where one 30 s run of the first lost the criterion (34/37, 31/37): each
    short run starts with its soles where they were put."""
    forecast, repeat = _forecast(design[1], NEXT_DESIGN), _forecast(design[1], design[1])
    # forecast, the designed pair beats a repeat of the first: as many determined (8 and 8: the repeat already
    # takes ϑ4, ϑ20, ϑ34 to 13–14 %), and the median relative SE 250 % against 342 %
    assert len(forecast["determined"]) >= len(repeat["determined"])
    assert _median_rel_se(forecast) < 0.85 * _median_rel_se(repeat)
    first, both = iv_fit, pair_fit
    assert both["estimator"] == "iv" and not both["gaps"]
    assert len(both["determined"]) >= len(first["determined"]), (both["determined"], first["determined"])
    # the SEs shrink (their ratio, not the relative SEs: those divide by estimates, which move between fits — one
    # pair measured 101 % → 106 % median relative SE while every SE shrank, median ratio 0.46, largest 0.90)
    se = [np.array([p["se"] for p in out["parameters"][:37]]) for out in (first, both)]
    assert np.median(se[1] / se[0]) < 1, se[1] / se[0]


def test_what_the_pair_determines_lies_within_3_se_of_the_truth(pair_fit):
    """The two runs fitted together (IV): every base parameter they determine within 3 SE of the truth (measured
    with the first run at max |z| 0.98 among the determined: 2.45, 37/37; with it at 3.63: 4.03). With the boards
    tared side by side (the runs starting 1 s earlier) ϑ3 and ϑ16 went to 3.0–4.0 in 4 of 4 fits: see README."""
    out = pair_fit
    params, z = out["parameters"][:37], np.array(out["reference"]["z"][:37], dtype=float)
    det = [k for k, p in enumerate(params) if p["symbol"] in out["determined"]]
    assert np.all(np.abs(z[det]) <= 3), {params[k]["symbol"]: round(z[k], 2) for k in det}


@pytest.mark.xfail(
    reason="all 37 within 3 SE is met in most runs only: even exact SEs exceed 3 for one of 37 in ~10 % of "
    "realisations (the determined ones, above, are held to 3 SE). Measured at --time-scale 1 (above): 37/37 in "
    "every one of 12 runs, max |z| 2.07. At 0.25, with the planned angles as instruments (IDIM-IV), "
    "the design's six 10 s runs kept 37/37 within 3 SE (max |z| 2.13, 2.25, 2.96, 2.37, 1.57, 1.27; least squares "
    "37, 37, 37, 37, 34, 37 of 37); the former design's five 37/37 (max 1.18–2.48), 30 s runs of it 36 and 37, a "
    "60 s run whose sole slid 5 mm 34/37. Even exact SEs exceed 3 for one of 37 in ~10 % of runs, and the model "
    "misses the twin: the base sole creeps and tilts on its pads (in the band 0.1–0.3 N·m, all of the model's "
    "misfit at the exact angles) and the boards lag the encoders by ~1 ms. No SE from residuals shows such a misfit within the motion's band; see README",
    strict=False,
)
def test_every_base_parameter_within_3_se_of_the_truth(iv_fit):
    """Each of the 37 base parameters, estimated together at the default cut-off (IV, the planned angles as
    instruments), within 3 SE of the twin's truth."""
    z = np.array(iv_fit["reference"]["z"], dtype=float)
    assert len(z) == 37 and np.all(np.isfinite(z))
    assert np.all(np.abs(z) <= 3), np.round(z, 1)


def test_the_boards_lag_the_encoders_by_at_most_a_few_ms(design, run_dir, next_run_dir, capsys):
    """`--delay auto` on the twin: one lag for both runs, estimated with the parameters, small, and the fit at it
    leaves no more residual than without. The plates' contact forces lag the angles by 0.4 ms (the pads'
    compliance; `bench.twin_misfit` on a traced run) and the recorded wrench by about 1 ms: 1.1–1.3 ms over 30 runs
    of 10 s, 0.9–1.8 from one, −0.1 from this pair (two runs do not pin a lag this small down). Before the twin
    paired each step's forces with the state they act at, the lag was 2.7 ms over 23 runs, and ignoring it moved
    the torso's Ixz by 5.9 SE over 15."""
    capsys.readouterr()
    argv = ["identify", "dynamic", str(run_dir / "recording.csv"), str(next_run_dir / "recording.csv"),
            "--simplified", "--no-friction", "--json"]  # fmt: skip
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--delay", "auto"]) == 0
    lagged = json.loads(capsys.readouterr().out)
    assert lagged["delay_estimated"] and plain["delays_ms"] == []
    ms = lagged["delays_ms"]
    assert len(ms) == 2 and ms[0] == ms[1] and abs(ms[0]) <= 3.0, ms  # the search spans ±50 ms
    weighted = [np.sum((np.array(o["sigma_nm"]) / np.array(plain["sigma_nm"])) ** 2) for o in (plain, lagged)]
    assert weighted[1] <= weighted[0] * 1.001, weighted  # the profile scans 0 ms too


def test_moments_about_the_cells_plane_match_mujoco(tulip):
    """RegressorSpec.moment_z: the base-wrench moments about a point below the sole equal MuJoCo's ground wrench
    moved there (n' = n − p × f), the horizontal forces' lever included."""
    from robots import dynamics as dyn
    from robots.base_params import RegressorSpec, evaluate
    from robots.motion_class import held_sole_states
    from trajectories.closed_chain import make_chain

    truth = physical_truth(tulip.parameter_set("sim"))
    chain = make_chain(tulip, "right", "sim", np.random.default_rng(3), candidates=5)
    q, qd, qdd = held_sole_states(tulip, "right", chain.nominal, 5, np.random.default_rng(1), spread=0.3)
    w = standing_wrench(tulip, truth, "right", q, qd, qdd)
    z = -0.053
    moved = w[:, 3:] - np.cross(np.array([0.0, 0.0, z]), w[:, :3])
    spec = RegressorSpec("base-wrench", "right", None, ("fz", "mx", "my"), moment_z=z)
    pred = evaluate(tulip, spec, q, qd, qdd) @ dyn.standard_parameters(tulip, truth)
    assert np.abs(pred[:, 1:] - moved[:, :2]).max() < 1e-8 * np.abs(moved).max()
    assert np.abs(moved[:, :2] - w[:, 3:5]).max() > 1e-3  # the lever matters in these states
