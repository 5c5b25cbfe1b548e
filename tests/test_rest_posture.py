"""A fixed-base design that starts and ends at rest in a posture the user names: the linear equality q(0) = rest
kept by IPOPT, verified on the fine grid by the same check `plan check` runs, refused where it cannot hold."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import UR5

from formats.errors import DataError
from poise.cli import main
from robots.registry import get_model
from trajectories.excitation import ExcitationSettings, linear_limit_rows, optimise, random_start
from trajectories.verify import REST_TOL_RAD

QUICK = ExcitationSettings(period=5.0, duration=10.0, harmonics=3, samples=24, max_iter=40, sharpness=(8.0,),
                           self_collision=False)  # fmt: skip


@pytest.fixture(scope="module")
def ur5():
    return get_model(str(UR5))


def _rest(model) -> np.ndarray:
    """A posture away from the middle of the ranges (so the design would not start there by itself)."""
    lo, hi = model.lower + 0.05, model.upper - 0.05
    return lo + (hi - lo) * np.linspace(0.3, 0.7, model.nq)


def test_the_design_starts_and_ends_at_rest_in_the_posture(ur5):
    rest = _rest(ur5)
    s = replace(QUICK, rest_posture=tuple(rest))
    r = optimise(ur5, s, seed=2)
    q, qd, qdd = r.trajectory.sample([0.0, s.duration])
    assert np.abs(q - rest).max() < REST_TOL_RAD
    assert np.abs(qd).max() < 1e-9 and np.abs(qdd).max() < 1e-9
    assert r.verification["ok"], r.verification["problems"]
    free = optimise(ur5, QUICK, seed=2)  # without it, the same start goes elsewhere
    assert np.abs(free.trajectory.sample([0.0])[0][0] - rest).max() > 0.1


def test_the_random_start_and_the_linear_rows_hold_the_rest_posture(ur5):
    rest = _rest(ur5)
    s = replace(QUICK, rest_posture=tuple(rest))
    x0 = random_start(ur5, s, np.random.default_rng(0))
    G, lbg, ubg = linear_limit_rows(ur5, s)
    lb, ub = np.concatenate(lbg), np.concatenate(ubg)
    fixed = np.flatnonzero(lb == ub)
    g = G @ x0
    assert np.allclose(g[fixed], lb[fixed], atol=1e-12)  # rest at t = 0 and the posture itself
    assert len(fixed) == 3 * ur5.nq  # q̇(0) = 0, q̈(0) = 0, q(0) = rest per joint


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m, r: r[:-1], "has 5 angles"),
        (lambda m, r: np.where(np.arange(m.nq) == 1, m.upper[1] + 0.01, r), "outside the joint ranges"),
    ],
)
def test_a_rest_posture_that_cannot_hold_is_refused(ur5, change, message):
    s = replace(QUICK, rest_posture=tuple(change(ur5, _rest(ur5))))
    with pytest.raises(DataError, match=message):
        linear_limit_rows(ur5, s)


def test_a_standing_motion_refuses_a_rest_posture():
    with pytest.raises(DataError, match="fixed-base"):
        ExcitationSettings(motion="double-support", rest_posture=(0.0,)).validate()


def test_cli_rest_posture_recorded_and_checked(tmp_path, capsys, ur5):
    rest = _rest(ur5)
    out = tmp_path / "traj.json"
    argv = ["plan", "trajectory", str(UR5), "--out", str(out), "--duration", "5", "--period", "5",
            "--harmonics", "3", "--samples", "24", "--max-iter", "40", "--json",
            "--rest-posture=" + ",".join(f"{v:.6f}" for v in rest)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    assert np.allclose(doc["settings"]["rest_posture"], np.round(rest, 6))
    assert main(["plan", "check", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    # the plan's trajectory moved off its rest posture: plan check says so
    doc["trajectory"]["q0"] = (np.asarray(doc["trajectory"]["q0"]) + 0.01).tolist()
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc))
    assert main(["plan", "check", str(moved), "--json"]) == 1
    assert any("rest posture" in p for p in json.loads(capsys.readouterr().out)["problems"])
    # a malformed option is a one-line error, not a traceback
    assert main(argv[:-1] + ["--rest-posture=0,abc"]) != 0
    assert "rad" in capsys.readouterr().err
