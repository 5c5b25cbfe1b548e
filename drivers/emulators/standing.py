"""Static standing on the physics twin in simulated time (deterministic, independent of the machine's load):
a posture is commanded in the air, the robot set on the boards, optionally the goals offset by the gravity
feed-forward, and what a static identification would see is measured after it comes to rest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from drivers.config import RobotConfig
from drivers.emulators.mujoco_twin import ServoModel, Twin, TwinOptions
from drivers.emulators.sim_robot import true_parameters
from drivers.executor import FEEDFORWARD_RAMP_S
from drivers.gravity import goal_offsets
from drivers.wbb.geometry import MIN_COP_KG, CopResult, board_poses_for, cells_in_base, cop
from formats.plan import Plan
from robots.kinematics import com_position
from robots.tree import ParameterSet, RobotModel

FAILURES = (
    "fall",
    "edge",
    "lift",
    "slip",
    "feet-contact",
    "touch-down",
)  # what a bench operator would call not standing
AIR_S = 1.0  # simulated s the servos reach the posture in the air
LANDING_S = 0.01  # simulated s on the boards before the feed-forward is applied (place → first settle tick)
FROZEN_CLOCK = (
    1e-9  # time scale: the wall clock never advances the physics between device calls; settle_sim does
)


@dataclass
class Standing:
    """What one posture looks like at rest on the twin (lengths in mm, angles in deg)."""

    posture: int
    base_tilt_deg: float  # the base sole's tilt from flat
    other_tilt_deg: float
    slide_mm: float  # largest sole slide from where it was set down
    hold_error_deg: float  # largest |encoder − commanded posture|
    cop_vs_com_mm: float  # boards' CoP vs the twin's true CoM projection
    model_cop_mm: (
        float  # boards' CoP vs the true model's CoM at the measured angles (what identification fits)
    )
    model_cop_cmd_mm: float  # ... at the commanded angles
    other_kg: float  # load on the other sole's board
    events: list[str]
    q_measured: np.ndarray  # encoder readings (rad), whole ticks
    cop: np.ndarray  # boards' CoP (m, base frame)

    @property
    def kinds(self) -> list[str]:
        return sorted({e.split(":")[0] for e in self.events})

    @property
    def stands(self) -> bool:
        return not set(self.kinds) & set(FAILURES)

    def summary(self) -> dict:
        """Plain numbers for JSON."""
        keys = ("posture", "base_tilt_deg", "other_tilt_deg", "slide_mm", "hold_error_deg", "cop_vs_com_mm",
                "model_cop_mm", "model_cop_cmd_mm", "other_kg", "events")  # fmt: skip
        return {**{k: getattr(self, k) for k in keys}, "stands": self.stands}


def _tilt_deg(tw: Twin, site: str) -> float:
    return float(np.degrees(np.arccos(min(1.0, float(tw.d.site_xmat[tw.site_ids[site]][8])))))


def stand(
    model: RobotModel,
    plan: Plan,
    index: int,
    config: RobotConfig,
    feedforward: bool,
    p_gain: float = 6000.0,
    seconds: float = 4.0,
    ramp_s: float = FEEDFORWARD_RAMP_S,
    truth: ParameterSet | None = None,
    board_error: np.ndarray | None = None,
) -> Standing:
    """Stand posture `index` of `plan` on a fresh twin (`truth`, default the simulated robot's; P-only servos
    with `p_gain`) for `seconds` of simulated time, with or without the executor's gravity feed-forward
    (computed, as the executor does, from the plan's parameters and `config`, and ramped in over `ramp_s`;
    0 = one step). `board_error` (2 × (dx, dy, dψ)): where the boards really are, off the configuration's poses."""
    p = next(x for x in plan.postures if x.index == index)
    truth = truth if truth is not None else true_parameters(model)
    opts = TwinOptions(servo=ServoModel(p_gain=p_gain), time_scale=FROZEN_CLOCK)
    tw = Twin(model, truth, opts, base=plan.base)
    for k in range(model.nq):
        tw.set_torque(k, True)
        tw.set_goal(k, p.q[k])
    tw.settle_sim(AIR_S)
    poses = board_poses_for(
        np.array(plan.placement(p.placement).other_foot), *config.board_offsets(p.placement)
    )
    if board_error is not None:
        poses = [q + e for q, e in zip(poses, np.asarray(board_error, float), strict=True)]
    tw.place(poses)
    tw.settle_sim(LANDING_S)
    if (
        feedforward
    ):  # ramped in at the executor's tick rate, as the executor does after setting the robot down
        offset = goal_offsets(model, config, p.q, plan.params, plan.base)
        n = max(1, round(ramp_s * config.executor.rate_hz))
        for i in range(1, n + 1):
            goal = p.q + offset * i / n
            for k in range(model.nq):
                tw.set_goal(k, goal[k])
            tw.settle_sim(ramp_s / n)
    tw.settle_sim(seconds)
    try:
        return measure(tw, model, plan, index, poses, truth)
    finally:
        tw.close()


def stand_each(
    model: RobotModel,
    plan: Plan,
    config: RobotConfig,
    truth: ParameterSet | None = None,
    feedforward: bool = False,
    placement_error: tuple[float, float] = (0.0, 0.0),
    seed: int = 0,
    progress: Callable[[Standing], None] | None = None,
) -> list[Standing]:
    """Every posture of `plan` stood on its own (`stand`), the boards placed with a random error of σ
    `placement_error` (m, rad) unknown to the configuration — the thesis lost 24 of 50 postures on its bench."""
    rng = np.random.default_rng(seed)
    s_xy, s_psi = placement_error
    out = []
    for p in plan.postures:
        err = np.column_stack([rng.normal(0, s_xy, (2, 2)), rng.normal(0, s_psi, 2)])
        out.append(stand(model, plan, p.index, config, feedforward, config.executor.position_p_gain,
                         truth=truth, board_error=err))  # fmt: skip
        if progress is not None:
            progress(out[-1])
    return out


def measure(
    tw: Twin, model: RobotModel, plan: Plan, index: int, poses, truth: ParameterSet | None = None
) -> Standing:
    """The standing measures of the twin as it is now (posture `index` commanded, boards at `poses`)."""
    p = next(x for x in plan.postures if x.index == index)
    truth = truth if truth is not None else true_parameters(model)
    loads = tw.cell_loads()
    if loads.sum() < MIN_COP_KG:  # fallen off the boards: no CoP
        c = CopResult(np.full(2, np.nan), float(loads.sum()), np.array([loads[:4].sum(), loads[4:].sum()]))
    else:
        c = cop(loads, cells_in_base(poses))
    q_meas = tw.measured()
    base, other = (tw.base_site, next(s for s in tw.soles if s != tw.base_site))
    slide = max(np.linalg.norm(tw.d.site_xpos[tw.site_ids[s]][:2] - tw._placed_at[s][:2]) for s in tw.soles)
    model_meas = com_position(model, q_meas, truth, plan.base)[:2]
    model_cmd = com_position(model, p.q, truth, plan.base)[:2]
    return Standing(
        posture=index,
        base_tilt_deg=_tilt_deg(tw, base),
        other_tilt_deg=_tilt_deg(tw, other),
        slide_mm=1000 * float(slide),
        hold_error_deg=float(np.degrees(np.abs(q_meas - p.q).max())),
        cop_vs_com_mm=1000 * float(np.linalg.norm(c.cop - tw.com_xy())),
        model_cop_mm=1000 * float(np.linalg.norm(c.cop - model_meas)),
        model_cop_cmd_mm=1000 * float(np.linalg.norm(c.cop - model_cmd)),
        other_kg=float(c.per_board_kg[1]),
        events=[f"{e.kind}: {e.detail}" for e in tw.events],
        q_measured=q_meas,
        cop=np.asarray(c.cop, dtype=float),
    )
