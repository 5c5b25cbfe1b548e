"""Designing the next experiment given data already taken as recordings (`plan trajectory --prior rec.csv`): a
dynamic recording is differentiated as `identify dynamic` does it (its default cut-off, the filter's edges
dropped), resampled on the design's grid step, and its base-regressor rows join the prior plans'; in double support
the next design stands at the recording's foot placement, or the prior plans' if the recording keeps it within the
tolerance identify fits recordings together with."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_DESIGN, design_wrench

from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan, load_trajectory_plan
from poise.cli import main
from poise.cmd_plan_trajectory import _prior_experiments, _recorded_motions
from robots.stance import PLACEMENT_TOL_M, other_pose
from trajectories.closed_chain import ClosedChainTrajectory
from trajectories.excitation import ExcitationSettings, Prior, criterion_value, optimise, with_prior
from trajectories.fourier import FourierTrajectory
from trajectories.plan import plan_recording, plan_trajectory, prior_experiments
from trajectories.single_support import SingleSupportTrajectory
from trajectories.verify import stacked_base_regressor

RATE = 100.0
MOMENT_Z = -0.053  # the boards' cells below the soles, as `poise run` records
SETTINGS = ExcitationSettings(
    period=10.0, duration=10.0, harmonics=3, samples=32, max_iter=15, simplified=True, criterion="logvar",
    scaling="none", motion="double-support", zmp_margin=0.02,
)  # fmt: skip
DT = SETTINGS.period / SETTINGS.samples


def _board_recording(t, q, w, **meta) -> DynamicRecording:
    wrench = np.zeros((len(t), 6))
    wrench[:, 2:5] = w
    names = [f"theta{i}" for i in range(1, 13)]
    meta = {"motion_band_hz": "0.3", "moment_z_m": str(MOMENT_Z)} | meta  # the stored design's, as run writes
    return DynamicRecording(meta.pop("robot", "tulip"), "right", names, t, q, wrench=wrench, meta=meta)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The stored double-support design (10 s, simplified) recorded as `poise run` would at 100 Hz: its angles and
    the model's own board wrench; written to a CSV file."""
    d = tmp_path_factory.mktemp("recprior")
    tulip, t, q, w = design_wrench(1, RATE, MOMENT_Z)
    path = d / "rec.csv"
    write_dynamic_recording(_board_recording(t, q, w), path)
    plan = load_trajectory_plan(TEST_DESIGN)
    return tulip, plan, plan_trajectory(plan, tulip), str(path), d


def _motions(path: str):
    return _recorded_motions(read_dynamic_recording(path), path)


def _plan_rows_at(prior: Prior, times: np.ndarray, rows: int = 3) -> np.ndarray:
    """The rows of a plan's own prior (one period on the design grid, by sample) at grid times `times`."""
    k = np.rint(times / DT).astype(int)
    return prior.rows.reshape(SETTINGS.samples, rows, -1)[k].reshape(-1, prior.rows.shape[1])


def test_a_recording_of_a_plan_gives_the_plans_prior_rows_within_the_filters_error(recorded):
    """At the default cut-off (4 × the 0.3 Hz band, raised to 2 Hz so the 2/f_c s edges stay within 10 % of 10 s)
    the recording keeps 1…9 s: the grid's 25 samples from 1.25 s to 8.75 s, each the plan's own row there. They agree
    to the filter's error: the closed chain's dependent knee joints carry q̈ content above the cut-off (7 % of
    θ10's q̈ energy above 1 Hz, a sharp turn at 1.86 s where the filtered q̈ misses by 0.2 rad/s², 8 % of its
    peak), so the rows miss by 0.15 % overall and 0.72 % at the worst sample (bounds 0.5 % and 1.5 %); a
    band-limited motion's rows agree to 3e-6 (below). Mixed with the plan, the plan's closed chain is kept."""
    tulip, plan, traj, path, _ = recorded
    motions, cutoff = _motions(path)
    assert cutoff == pytest.approx(2.0) and len(motions) == 1
    m = motions[0]
    assert (m.t[0], m.t[-1]) == pytest.approx((1.0, 9.0))
    own = prior_experiments(tulip, SETTINGS, [plan])
    rec = prior_experiments(tulip, SETTINGS, motions)
    times = m.grid(DT)
    assert times == pytest.approx(np.arange(4, 29) * DT)
    P, R = _plan_rows_at(own, times), rec.rows
    assert R.shape == P.shape
    assert np.linalg.norm(R - P) / np.linalg.norm(P) < 0.005
    per_sample = np.linalg.norm((R - P).reshape(len(times), -1), axis=1)
    assert (per_sample / np.linalg.norm(P.reshape(len(times), -1), axis=1)).max() < 0.015
    # the next design's chain, built at the recording's placement from its first posture, is the plan's placement
    for a, b in ((rec.chain.target_p, traj.chain.target_p), (rec.chain.target_R, traj.chain.target_R)):
        assert a == pytest.approx(b, abs=1e-9)
    assert rec.chain.dependent == traj.chain.dependent and rec.chain.base == "right"
    assert rec.chain.nominal[list(rec.chain.independent)] == pytest.approx(
        traj.sample([0.0])[0][0][:6], abs=1e-9
    )
    # mixed: the plan's chain (its nominal posture, not the recording's first), rows in the given order
    both = prior_experiments(tulip, SETTINGS, [*motions, plan])
    assert both.chain.nominal == pytest.approx(traj.chain.nominal, abs=0)
    assert both.rows == pytest.approx(np.vstack([R, own.rows]), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("motion", ["free", "single-support"])
def test_a_band_limited_recording_gives_its_plans_rows_to_the_filters_passband(motion):
    """A fixed-base (joint torques) and a single-support (one board) recording of Fourier motions of 0.3 Hz: the
    filter passes them within its passband ripple, so the rows agree to 3e-6 (measured 1–3e-6); single support's
    in the design's order (by component)."""
    from robots.registry import get_model

    tulip = get_model("tulip")
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (12, 3)) * 0.03 for _ in range(2))
    a -= a.mean(axis=1, keepdims=True)
    b -= np.outer(b @ [1, 2, 3], [1, 2, 3]) / 14
    fourier = FourierTrajectory(10.0, 10.0, np.zeros(12), a, b)
    traj = fourier if motion == "free" else SingleSupportTrajectory(fourier, "right", "sole_l", 0.02)
    base = tulip.root if motion == "free" else "right"
    plan = TrajectoryPlan("tulip", base, list(tulip.joint_names), traj.to_json(), params="sim",
                          settings={"motion": motion, "simplified": True})  # fmt: skip
    t = np.arange(1001) / RATE
    q = traj.sample(t)[0]
    meta = {"motion_band_hz": "0.3"} | ({"motion": "single-support"} if motion != "free" else {})
    effort = {"tau": np.zeros_like(q)} if motion == "free" else {"wrench": np.zeros((len(t), 6))}
    rec = DynamicRecording("tulip", base, list(tulip.joint_names), t, q, meta=meta, **effort)
    motions, _ = _recorded_motions(rec, "rec.csv")
    s = replace(SETTINGS, motion=motion)
    own, got = prior_experiments(tulip, s, [plan]), prior_experiments(tulip, s, motions)
    rows = tulip.nq if motion == "free" else 3
    times = motions[0].grid(DT)

    def by_sample(M: np.ndarray) -> np.ndarray:  # single support's rows are by component
        return M if motion == "free" else M.reshape(3, -1, M.shape[1]).transpose(1, 0, 2).reshape(M.shape)

    P = Prior(by_sample(own.rows))
    R = by_sample(got.rows)
    assert R == pytest.approx(_plan_rows_at(P, times, rows), rel=3e-6, abs=3e-6 * np.abs(P.rows).max())


def test_the_next_design_after_a_recording_scores_as_after_its_plan(recorded):
    """The next design with the recording as prior: its criterion (Σ log var of [prior; new]) with the plan's own
    rows at the recording's grid times instead is within 0.05 of its own (measured 0.007 — the rows' filter
    error); the plan's whole period, edges included, would give 3.6 less: the 2 s the filter's edges drop."""
    tulip, plan, _, path, _ = recorded
    motions, _ = _motions(path)
    prior = prior_experiments(tulip, SETTINGS, motions)
    # 60 iterations: after 15 the design's dependent coordinates missed the closed chain enough that its objective
    # (79.50) was 0.35 from its plan's exact rows' (79.86); after 60 0.03 (43.14 against 43.17)
    result = optimise(tulip, replace(SETTINGS, max_iter=60), seed=5, prior=prior)
    W = stacked_base_regressor(tulip, result.trajectory, "right", True, np.arange(SETTINGS.samples) * DT)
    own = prior_experiments(tulip, SETTINGS, [plan])
    plan_rows = Prior(_plan_rows_at(own, motions[0].grid(DT)), own.chain)
    after_recording = criterion_value(with_prior(W, SETTINGS, prior), SETTINGS, 1.0)[0]
    after_plan = criterion_value(with_prior(W, SETTINGS, plan_rows), SETTINGS, 1.0)[0]
    assert result.objective == pytest.approx(
        after_recording, abs=0.05
    )  # (the design's chain to IPOPT's tol.)
    assert after_plan == pytest.approx(after_recording, abs=0.05)
    assert result.trajectory.chain.target_p == pytest.approx(prior.chain.target_p, abs=1e-12)


def test_cli_designs_after_a_recording_where_it_stood(recorded, tmp_path, capsys):
    """`--prior rec.csv`: the plan records the recording (path, sha256 of the file, its cut-off) and stands at
    the recording's foot placement."""
    tulip, _, _, path, _ = recorded
    out = tmp_path / "next.json"
    argv = ["plan", "trajectory", "tulip", "--double-support", "--simplified", "--duration", "10", "--period", "10",
            "--harmonics", "2", "--samples", "16", "--max-iter", "2", "--out", str(out), "--json", "--prior", path]  # fmt: skip
    assert main(argv) in (0, 1)  # few iterations
    assert json.loads(capsys.readouterr().out)["kappa_with_prior_scaled"] is not None
    plan = load_trajectory_plan(out)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert plan.design["prior"] == [{"recording": path, "sha256": digest, "cutoff_hz": pytest.approx(2.0)}]
    traj = plan_trajectory(plan, tulip)
    q = read_dynamic_recording(path).q
    where = other_pose(tulip, q[len(q) // 2], "sim", "right")
    assert traj.chain.ground_pose() == pytest.approx(where, abs=1e-9)
    assert plan_recording(plan, traj).base == "right"


def test_a_prior_recording_of_a_stopped_run_is_taken_with_a_warning(recorded, tmp_path, capsys):
    """A recording whose run.json says the run stopped is what was taken (it is used as recorded) but not what its
    plan promised: a warning, and the plan's prior record says so; a completed run's recording gets neither."""
    tulip, _, _, path, _ = recorded
    run = tmp_path / "run"
    run.mkdir()
    rec = str(run / "recording.csv")
    Path(rec).write_bytes(Path(path).read_bytes())
    meta = {"status": "stopped: KeyboardInterrupt", "ticks_streamed": 800, "ticks_planned": 1001}
    (run / "run.json").write_text(json.dumps(meta))
    _, records = _prior_experiments([rec], tulip)
    assert records[0]["partial_run"] == "stopped: KeyboardInterrupt after 800 of 1001 ticks"
    said = "".join(capsys.readouterr().err.split())  # a long path wraps anywhere
    assert "".join(f"--prior {rec} is a partial run (stopped: KeyboardInterrupt after 800".split()) in said
    (run / "run.json").write_text(json.dumps(meta | {"status": "completed"}))
    _, records = _prior_experiments([rec], tulip)
    assert "partial_run" not in records[0] and "partial run" not in capsys.readouterr().err


def _moved(recorded, dy: float) -> str:
    """The stored design with the other sole `dy` m further out, recorded (4 s at 100 Hz), with the unmoved
    recording's wrench (the robot's weight, its CoP inside the wider polygon: a plausible board recording)."""
    tulip, _, traj, rec_path, d = recorded
    chain = replace(traj.chain, target_p=traj.chain.target_p + [0.0, dy, 0.0])
    t = np.arange(401) / RATE
    q = ClosedChainTrajectory(tulip, chain, traj.independent).sample(t)[0]
    path = d / f"moved_{dy}.csv"
    w = read_dynamic_recording(rec_path).wrench[: len(t), 2:5]
    write_dynamic_recording(_board_recording(t, q, w), path)
    return str(path)


def test_a_recording_within_the_placement_tolerance_joins_the_plans_chain(recorded):
    """15 mm off the plan's placement (within identify's 20 mm): the plan's chain is kept; 25 mm: refused."""
    tulip, plan, traj, _, _ = recorded
    near, _ = _motions(_moved(recorded, 0.015))
    assert prior_experiments(tulip, SETTINGS, [plan, *near]).chain.nominal == pytest.approx(
        traj.chain.nominal, abs=0
    )
    far, _ = _motions(_moved(recorded, PLACEMENT_TOL_M + 0.005))
    with pytest.raises(
        DataError, match=r"other sole stands 25\.0 mm / 0\.00° from the prior plans' placement"
    ):
        prior_experiments(tulip, SETTINGS, [plan, *far])


def test_a_recordings_first_posture_must_be_a_balanced_nominal(recorded):
    """Recordings only: the next design's nominal posture is the recording's first, which must pass the static
    posture check at the design's ZMP margin (here 0.2 m: no posture of TUlip's soles keeps it)."""
    tulip, _, _, path, _ = recorded
    motions, _ = _motions(path)
    with pytest.raises(DataError, match=r"its first posture cannot be the next design's nominal standing posture "
                                        r"\(CoP margin [\d.]+ mm < required 200\.0 mm\)"):  # fmt: skip
        prior_experiments(tulip, replace(SETTINGS, zmp_margin=0.2), motions)


def _edited(recorded, name: str, edit) -> str:
    """The recording file with its text edited."""
    _, _, _, path, d = recorded
    out = d / name
    out.write_text(edit(Path(path).read_text()))
    return str(out)


def _single_support(recorded) -> str:
    """A single-support recording of the stored single-support plan (the twin's inverse dynamics, 100 Hz)."""
    path = recorded[4] / "ss.csv"
    if not path.exists():
        plan = TEST_DESIGN.parent / "tulip_single_support_6s.json"
        assert main(["simulate", "trajectory", str(plan), "--out", str(path), "--rate-hz", "100"]) == 0
    return str(path)


@pytest.mark.parametrize(
    "case, message",
    [
        ("robot", "prior recording {p} is of 'ur5'; the design of 'tulip'"),
        (
            "single",
            "prior recording {p} is a single-support board recording; the design is double-support: their "
            "base parameters differ",
        ),
        (
            "placement",
            "prior recording {p}'s other sole stands 30.0 mm / 0.00° from the prior plans' placement (at "
            "most 20 mm / 3°): another foot placement identifies other base parameters — design after "
            "one placement's experiments",
        ),
        (
            "short",
            "prior recording {p}: too short for a 5 Hz cut-off: it (0.6 s) leaves fewer than 4 samples after "
            "dropping 0.4 s at each end (the filter's transients)",
        ),
        ("neither", "--prior {p}: neither a trajectory plan (JSON) nor a dynamic recording (CSV)"),
    ],
    ids=["robot", "single", "placement", "short", "neither"],
)
def test_cli_refuses_recordings_the_design_cannot_take(recorded, case, message, tmp_path, capsys):
    """Another robot, a single-support recording for a double-support design, a placement beyond identify's
    tolerance from the prior plan's, a recording too short for its filter, a file of neither kind: exit 2, one
    line, nothing designed or written."""
    lines = Path(recorded[3]).read_text().splitlines(keepends=True)
    head = sum(x.startswith("#") for x in lines)  # then the column names and 61 samples: 0.6 s
    path = {
        "robot": lambda: _edited(recorded, "ur5.csv", lambda s: s.replace("# robot: tulip", "# robot: ur5")),
        "single": lambda: _single_support(recorded),
        "placement": lambda: _moved(recorded, 0.03),
        # 0.6 s of a recording without its band: the 5 Hz default drops 0.4 s at each end
        "short": lambda: _edited(
            recorded,
            "short.csv",
            lambda s: "".join(x for x in lines[: head + 62] if "motion_band_hz" not in x),
        ),
        "neither": lambda: _edited(
            recorded, "neither.csv", lambda s: s.replace("# poise dynamic recording v1", "#")
        ),
    }[case]()
    prior = [str(TEST_DESIGN), path] if case == "placement" else [path]
    out = tmp_path / "next.json"
    code = main(["plan", "trajectory", "tulip", "--double-support", "--simplified", "--out", str(out), "--prior",
                 *prior])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not out.exists(), err
    assert [line for line in err.splitlines() if line.strip()] == ["poise: error: " + message.format(p=path)]
