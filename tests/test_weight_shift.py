"""The start of a single-support run from double support (`trajectories.weight_shift`) on TUlip: both soles flat
and fixed while the weight shifts, the CoM inside the base sole by the margin when it has, the free sole lifted by
the plan's lift at the plan's start, every tick through the shared checks, smooth rest-to-rest timing at the
executor's rate; and a margin no posture can keep refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from formats.errors import DataError
from robots.kinematics import com_position
from robots.one_sole import one_sole, sole_polygon
from robots.stance import flat_residual, other_pose, signed_margin
from trajectories.excitation import ExcitationSettings
from trajectories.single_support import nominal_posture
from trajectories.verify import double_support_balance
from trajectories.weight_shift import (
    SPEED_SHARE,
    _posture,
    check_weight_shift,
    part_slice,
    plan_weight_shift,
    reverse,
)

MARGIN, LIFT, RATE, VLIM = 0.03, 0.02, 100.0, 1.0


@pytest.fixture(scope="module")
def start(tulip):
    """A single-support start posture as the planner makes them: at rest on the right sole, CoM inside it."""
    settings = ExcitationSettings(base="right", zmp_margin=MARGIN, lift=LIFT)
    return nominal_posture(tulip, "right", "sim", settings)


@pytest.fixture(scope="module")
def shift(tulip, start):
    return plan_weight_shift(tulip, "right", "sim", start, LIFT, MARGIN, VLIM, RATE)


def test_both_soles_stay_flat_and_fixed_while_the_weight_shifts(tulip, start, shift):
    pose = other_pose(tulip, start, "sim", "right")
    assert np.allclose(shift.pose, pose)  # the free sole's ground pose: under where the start holds it
    for q in np.vstack([shift.stand[None], shift.shift.q]):
        assert np.abs(flat_residual(tulip, q, "sim", "right")).max() < 1e-8
        x, y, yaw = other_pose(tulip, q, "sim", "right")
        assert np.hypot(x - pose[0], y - pose[1]) < 1e-8 and abs(yaw - pose[2]) < 1e-8
    assert np.allclose(shift.shift.q[0], shift.stand)
    # standing, the weight is shared; shifted, the CoM (the ZMP at rest) is inside the base sole by the margin
    assert shift.share[0] == pytest.approx(0.5, abs=1e-6)
    com = com_position(tulip, shift.shift.q[-1], "sim", "right")[:2]
    assert signed_margin(sole_polygon(tulip, "right"), com[None])[0] >= MARGIN


def test_the_free_sole_is_lifted_to_the_start(tulip, start, shift):
    lf = shift.lift
    assert np.allclose(lf.q[0], shift.shift.q[-1]) and np.allclose(lf.q[-1], start)
    s = one_sole(tulip, lf.q, lf.qd, lf.qdd, "right", shift.other, "sim")
    assert s.lowest[0] == pytest.approx(0.0, abs=1e-8)  # on the ground when it starts
    assert s.lowest[-1] >= LIFT and shift.lift_end_m == pytest.approx(s.lowest[-1])
    assert s.lowest.min() >= -1e-4  # never into the ground
    # first straight up by the lift: the sole flat, over its ground pose, only its height changes
    k = int(np.argmax(s.lowest >= LIFT - 1e-9))
    for q in lf.q[: k + 1]:
        x, y, yaw = other_pose(tulip, q, "sim", "right")
        assert np.hypot(x - shift.pose[0], y - shift.pose[1]) < 1e-8 and abs(yaw - shift.pose[2]) < 1e-8
        assert np.abs(flat_residual(tulip, q, "sim", "right")[1:]).max() < 1e-8


def test_every_tick_passes_the_shared_checks(tulip, shift):
    assert check_weight_shift(tulip, shift, "sim", MARGIN) == []
    s = shift.shift
    problems: list[str] = []
    margin, drift, _ = double_support_balance(tulip, shift.chain, s.q, s.qd, s.qdd, "sim", problems, MARGIN)
    assert problems == [] and margin >= MARGIN - 1e-4 and drift < 1e-6
    lf = shift.lift
    one = one_sole(tulip, lf.q, lf.qd, lf.qdd, "right", shift.other, "sim")
    assert one.fz.min() > 0 and one.margin.min() >= MARGIN and shift.single_margin_m == one.margin.min()


def test_timed_rest_to_rest_at_the_rate_within_the_speed_share(tulip, shift):
    vmax = SPEED_SHARE * np.minimum(tulip.velocity_limit, VLIM)
    for part in (shift.shift, shift.lift):
        assert np.allclose(np.diff(part.t), 1 / RATE)
        for end in (0, -1):
            assert np.abs(part.qd[end]).max() < 1e-9 and np.abs(part.qdd[end]).max() < 1e-9
        assert (np.abs(part.qd) <= vmax * (1 + 1e-6)).all()
        assert (np.abs(np.diff(part.q, axis=0)) * RATE <= vmax * (1 + 1e-3)).all()
    assert shift.duration_s == pytest.approx(shift.shift.t[-1] + shift.lift.t[-1])


def test_a_margin_no_shifted_posture_keeps_is_refused_in_one_line(tulip, start):
    with pytest.raises(DataError) as exc:
        plan_weight_shift(tulip, "right", "sim", start, LIFT, 0.08, VLIM, RATE)
    msg = str(exc.value)
    assert msg.startswith("no weight shift onto the right sole: ") and "\n" not in msg
    assert "puts the CoM 85 mm inside the right sole" in msg, msg


def test_played_backwards_it_puts_the_sole_down_and_passes_the_same_checks(tulip, shift):
    """The run's end (a plan ending where it starts): the lift and the shift reversed, the same ZMP at every tick."""
    for part in (shift.shift, shift.lift):
        back = reverse(part)
        assert np.allclose(back.q[0], part.q[-1]) and np.allclose(back.q[-1], part.q[0])
        assert np.abs(back.qd[[0, -1]]).max() < 1e-9 and np.allclose(back.t, part.t)
    lf, back = shift.lift, reverse(shift.lift)
    a = one_sole(tulip, lf.q, lf.qd, lf.qdd, "right", shift.other, "sim")
    b = one_sole(tulip, back.q, back.qd, back.qdd, "right", shift.other, "sim")
    assert np.allclose(a.margin[::-1], b.margin) and np.allclose(a.lowest[::-1], b.lowest)
    s = reverse(shift.shift)
    problems: list[str] = []
    double_support_balance(tulip, shift.chain, s.q, s.qd, s.qdd, "sim", problems, MARGIN)
    assert problems == []
    up = part_slice(lf, 0, shift.raise_ticks)  # the straight-up part: what is put down last, flat
    assert np.abs(flat_residual(tulip, up.q, "sim", "right")[:, 1:]).max() < 1e-8


def test_standing_postures_pressed_against_a_joint_limit_stay_within_it(tulip, shift):
    """A posture asked for beyond a joint's limit comes back on the limit, not past it: IPOPT's default bound
    relaxation returned 4–9e-9 rad past it, which the shared limit check refuses (theta5 = −38.00° "outside")."""
    polygon = sole_polygon(tulip, "right")
    for j in (4, 11):  # theta5 (seen past its lower limit), theta12
        for side in (tulip.lower, tulip.upper):
            near = shift.stand.copy()
            near[j] = side[j] + np.sign(side[j] - near[j]) * 0.3
            q = _posture(tulip, shift.chain, near, polygon, MARGIN, None)
            assert q is not None
            assert np.all(q <= tulip.upper) and np.all(q >= tulip.lower)
            assert not tulip.limit_violations(q, 0.0)


def test_joint_torques_of_every_tick_are_bounded_by_the_plans_torque_fraction(tulip, start, shift):
    """The shift's and the lift's joint torques (double support: the split of the load that needs least) stay
    within the efforts × the plan's torque fraction, or there is no weight shift: a lift that needed 98 % of a
    knee's effort passed every other check and tripped the twin's servo (15° tracking error while lifting)."""
    from robots import dynamics as dyn
    from trajectories.verify import double_support_split

    lf, s = shift.lift, shift.shift
    lift = np.abs(dyn.rnea(tulip, lf.q, lf.qd, lf.qdd, "sim", "right")) / tulip.effort_limit
    split = double_support_split(tulip, shift.chain, s.q, s.qd, s.qdd, "sim", tulip.effort_limit)
    peak = max(lift.max(), (np.abs(split.tau) / tulip.effort_limit).max())
    assert 0 < peak < 1 and shift.torque_ratio == pytest.approx(peak)
    assert shift.summary()["peak_torque_ratio"] == pytest.approx(peak)
    # allowed just above the peak it passes with the same ticks; just below it is refused, naming joint and share
    above = plan_weight_shift(
        tulip, "right", "sim", start, LIFT, MARGIN, VLIM, RATE, torque_fraction=peak + 1e-3
    )
    assert above.problems == [] and len(above.lift.t) == len(lf.t)
    with pytest.raises(DataError) as exc:
        plan_weight_shift(tulip, "right", "sim", start, LIFT, MARGIN, VLIM, RATE, torque_fraction=peak - 1e-3)
    msg = str(exc.value)
    assert msg.startswith("no weight shift onto the right sole: ") and "\n" not in msg
    assert "% of its effort limit at t = " in msg and f"(the plan allows {100 * (peak - 1e-3):.0f} %)" in msg
