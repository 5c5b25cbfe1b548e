"""One posture check under a plan's own rules, shared by `plan check` and the run's pre-flight: the CoP of an
identification ellipsoid's centre, the load-share bound, the worst case over the ϑ_b ball and the stored values;
the executor's default path between postures without a stored transition checked by `plan check`; a resumed
finished run, SIGTERM and the twin's truth of a posture run."""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from design.verify import check_plan, posture_balance
from drivers.config import load_config
from drivers.setpoints import check_run
from formats.plan import Placement, Plan, Posture, save_plan
from poise.cli import main
from robots.plan_rules import plan_base_model
from robots.registry import get_model
from robots.stance import balance, default_base, other_pose, random_double_support

FAST = ["--robot", "sim", "--boards", "sim", "--physics", "kinematic", "--no-noise", "--time-scale", "20", "--yes"]  # fmt: skip


@pytest.fixture(scope="module")
def posture(tulip):
    return random_double_support(tulip, 1, np.random.default_rng(5), margin=0.03)[0]


def _plan(model, q, **settings) -> Plan:
    """A one-posture plan of q with its stored CoP and margin (the design parameters') and these settings."""
    b = balance(model, q)
    pose = tuple(float(v) for v in other_pose(model, q))
    p = Posture(0, 0, q, 1.0, 2.0, (float(b.cop[0]), float(b.cop[1])), float(b.margin))
    return Plan(
        model.name, default_base(model), model.joint_names, [Placement(0, pose)], [p], settings=settings
    )


def _verdicts(model, plan) -> tuple[list[str], list[str]]:
    """The posture problems of `plan check` and of the run's pre-flight (prefix "posture 0: " dropped)."""
    checked = check_plan(model, plan).postures[0].issues
    run = [m.removeprefix("posture 0: ") for m in check_run(plan, model, load_config(None)).problems]
    return checked, run


def _ellipsoid(model, q, shift_m: float) -> dict:
    """An identification ellipsoid (tiny covariance) whose centre moves the predicted CoP by `shift_m` along the
    direction that changes the margin most."""
    bm = plan_base_model(model, default_base(model))
    R = bm.regressor(q)[:2, :]
    base_theta = bm.values("sim")
    m0 = balance(model, q).margin
    best = None
    for d in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        theta = base_theta + np.linalg.pinv(R) @ (shift_m * np.array(d, float))
        cop = R @ theta
        plan = _plan(model, q, ellipsoid=_ell_dict(bm, theta))
        gain = abs(posture_balance(model, plan, q)[1] - m0)
        if best is None or gain > best[0]:
            best = (gain, _ell_dict(bm, theta), cop)
    return best[1]


def _ell_dict(bm, theta) -> dict:
    return {"source": "test", "sigma": 1.0, "symbols": list(bm.symbols), "theta_m": [float(v) for v in theta],
            "cov_m2": (1e-12 * np.eye(bm.n)).tolist()}  # fmt: skip


def test_ellipsoid_centre_decides_the_cop_for_both(tulip, posture):
    """Required margin between the design parameters' margin and the ellipsoid centre's: both checks judge the
    CoP of the centre (the run refused what `plan check` passed before)."""
    ell = _ellipsoid(tulip, posture, 0.01)
    plan = _plan(tulip, posture, ellipsoid=ell)
    m_params, m_centre = balance(tulip, posture).margin, posture_balance(tulip, plan, posture)[1]
    assert abs(m_params - m_centre) > 1e-3
    plan = replace(plan, settings={**plan.settings, "required_margin": (m_params + m_centre) / 2})
    plan = replace(plan, postures=[replace(plan.postures[0], predicted_cop=None, margin=None)])
    checked, run = _verdicts(tulip, plan)
    assert (not checked) is (m_centre > m_params)
    assert checked == run


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"load_share": 0.49}, "load share"),
        ({"uncertainty": 0.05, "required_margin": 0.01}, "worst-case CoP margin"),
    ],
)
def test_share_and_worst_case_refused_by_both(tulip, posture, settings, words):
    checked, run = _verdicts(tulip, _plan(tulip, posture, **settings))
    assert any(words in m for m in checked)
    assert checked == run


def test_stale_stored_cop_refused_by_both(tulip, posture):
    plan = _plan(tulip, posture)
    x, y = plan.postures[0].predicted_cop
    plan = replace(plan, postures=[replace(plan.postures[0], predicted_cop=(x + 0.01, y))])
    checked, run = _verdicts(tulip, plan)
    assert any("stored predicted_cop" in m for m in checked)
    assert checked == run


# two postures of one placement of a designed plan (`plan postures tulip --postures 15 --placements 3 --seed 3
# --load-share 0.25`, postures 8 and 9) between which the executor's default cosine path cannot stay on the ground
PAIR = [
    [-0.6252095483400011, -0.33151289352354646, 0.24731250297252902, 0.9122713138435549, -0.6632251141513222,
     0.04522789899053424, -0.03826010217959342, 0.42427470983431115, 0.5061454813382859, 0.7454828115532595,
     -0.6632251126454257, -0.2967059724993321],
    [-0.7853981525730793, 0.14128089214820108, 0.32021541924629593, 3.6182231849508303e-09, -0.16804440575960683,
     0.04009613729240323, 0.14006217482943184, 0.5235987740293916, 0.05194458832571651, 0.2737867074345492,
     -0.3797583428225469, -0.29232360353336556],
]  # fmt: skip
PAIR_POSE = (-0.21268683670309366, 0.1112217603284951, 0.8961351106902515)


def _pair_plan(model) -> Plan:
    postures = [Posture(i, 0, np.array(q), 3.0, 3.0) for i, q in enumerate(PAIR)]
    return Plan(model.name, "right", model.joint_names, [Placement(0, PAIR_POSE)], postures, params="sim",
                settings={"required_margin": 0.08})  # fmt: skip


def test_plan_check_checks_the_path_the_run_takes_without_a_transition(tulip):
    """No stored transition: `plan check` checks the executor's default path and fails where the run would have
    to lift the robot (it warned, plan check said OK)."""
    plan = _pair_plan(tulip)
    ex = load_config(None).executor
    report = check_plan(tulip, plan, executor=(ex.velocity_limit, ex.rate_hz))
    run = check_run(plan, tulip, load_config(None))
    assert report.default_paths == 1 and report.to_dict()["default_paths_checked"] == 1
    assert not any(p.issues for p in report.postures)
    assert run.warnings and report.transitions
    assert report.transitions[0].startswith("move 0->1 (no stored transition: the run's cosine path)")
    assert run.warnings[0].startswith(report.transitions[0])  # one format: the run names the move alike


def test_plan_check_cli_says_how_many_default_paths_it_checked(tulip, tmp_path, capsys):
    path = tmp_path / "pair.json"
    save_plan(_pair_plan(tulip), path)
    assert main(["plan", "check", str(path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["default_paths_checked"] == 1 and any("no stored transition" in m for m in doc["problems"])


def _posture_plan(path: Path, n: int) -> Path:
    from drivers.emulators.testplan import random_plan

    save_plan(random_plan(get_model("tulip"), n, seed=4, move_s=1.0, hold_s=2.0), path)
    return path


def test_resume_of_a_finished_run_has_nothing_to_run(tmp_path, capsys, tulip):
    """--resume of a finished run: one line saying nothing is left, exit 0, run.json untouched; the first run kept
    the emulated robot's truth in truth.json, which `identify static --reference` reads."""
    from drivers.emulators.sim_robot import twin_truth
    from robots.params_io import resolve_params

    plan = _posture_plan(tmp_path / "plan.json", 1)
    out = tmp_path / "run"
    assert main(["run", str(plan), *FAST, "--out", str(out)]) == 0
    before = (out / "run.json").read_bytes()
    capsys.readouterr()
    assert main(["run", str(plan), *FAST, "--resume", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "nothing left to run" in said and "\n" not in said.strip()
    assert (out / "run.json").read_bytes() == before
    truth = resolve_params(str(out / "truth.json"), tulip)
    assert truth.mass == twin_truth(tulip).mass


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path, capsys, monkeypatch):
    """SIGTERM during the second posture's hold: the first posture kept, run.json says stopped, one line."""
    from drivers.executor import Executor

    plan = _posture_plan(tmp_path / "plan.json", 2)
    hold = Executor._hold

    def terminated(self, *a, **k):
        if self.result.completed:  # the first posture recorded: kill during the next hold
            signal.raise_signal(signal.SIGTERM)
        return hold(self, *a, **k)

    monkeypatch.setattr(Executor, "_hold", terminated)
    out = tmp_path / "run"
    previous = signal.getsignal(signal.SIGTERM)
    capsys.readouterr()
    assert main(["run", str(plan), *FAST, "--json", "--out", str(out)]) == 143
    got = capsys.readouterr()
    assert json.loads(got.out)["postures_kept"] == 1
    assert (
        got.err.count("\n") == 1
        and "terminated (SIGTERM)" in got.err
        and "1 completed posture(s) kept" in got.err
    )
    assert json.loads((out / "run.json").read_text())["status"].startswith("stopped: Terminated")
    assert signal.getsignal(signal.SIGTERM) is previous
