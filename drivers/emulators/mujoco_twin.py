"""MuJoCo physics twin of a legged robot standing on two balance boards, behind the emulated servo bus and boards.

The robot is built from its URDF with the *true* parameters (`MjSpec`), on a free base, with box soles from the
description's contact rectangles — or, for a fixed-base arm (`TwinOptions.fixed_base`), bolted to the world with
its servos alone, their efforts the arm's motor currents (`Twin.effort`). Each joint has a position servo with the torque limit of the URDF's `effort`,
proportional gain from the Dynamixel X-series position loop (P gain in e-Manual units), back-EMF damping
(effort / velocity limit) and rotor inertia; goals and readings are encoder ticks. The boards are mocap bodies
(rigid top plates) on four load cells: a plate on four equally stiff cells at the corners of a rectangle carries
the load the contacts put on it with the minimum-norm split, so each cell reads that share of the contact wrench
MuJoCo computes. Simulated time runs `time_scale` times faster than the wall clock (in a physics thread, or
lazily whenever a device is read or written), so the servo and board time constants scale with it. A machine too
slow for the scale runs the physics slower than asked; the drivers then follow it through `TwinClock`
(drivers/emulators/twin_clock.py), the bench clock that reads simulated time.

Events the physics shows and a real bench would (a fall, a sole tipping onto its edge or lifting, the feet
touching, a sole slipping on its board, a sole set down in the air touching down) are logged with their simulated time in `events`.
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from drivers.wbb.geometry import CELL_SPAN_X, CELL_SPAN_Y, cell_positions
from formats.errors import DataError, DeviceError
from formats.parameter_set import ParameterSet
from formats.units import STANDARD_GRAVITY
from robots.description import placeholder_limits
from robots.kinematics import _offset
from robots.physical import inertia_matrix, nearest_consistent
from robots.stance_spec import default_base
from robots.tree import RobotModel
from robots.urdf_write import model_to_urdf

BOARD_SIZE = (0.511, 0.316, 0.053)  # Wii Balance Board top plate (x, y) and height (m)
SOLE_THICKNESS = 0.004  # m, the box below each contact rectangle
# the soles stand on a pad at each corner of their rectangle (spheres whose bottoms are the sole's plane): a box
# on a box makes 4–8 contacts whose number flips as the load shifts, and the solver's force split jumps with it,
# while four pads keep four contacts. 5 ms (the box's default: 20 ms) makes the sole's rocking stiffness 16×
# higher: the base sole's tilt at rest drops from 0.09° to 0.013° (mean over the demo's plan), and the CoM the
# model computes from the planned sole pose misses the boards' CoP by 0.44 mm instead of 1.1 mm
PAD_RADIUS = 0.003  # m
PAD_SOLREF = (0.005, 1.0)  # s, damping ratio (≥ 2 physics steps)
PADS = tuple(f"pad{k}" for k in range(4))
PWM_LIMIT = 885  # X-series PWM limit (100 %), e-Manual
TICKS_PER_REV = 4096
INTEGRAL_LIMIT = math.radians(2.0)  # anti-windup: the I action shifts a servo's target by at most this
FALL_TILT_DEG = 10.0  # a sole this far from flat, or the root below half its placed height: fallen
SLIP_REPORT = 0.005  # m a sole may settle sideways under load before it is reported as slipping
MAX_QUEUED_CONVERSIONS = 1000  # a board's conversions kept for its reports
THREAD_CHUNK = 5  # physics steps per locked chunk of the physics thread
MAX_STEPS_PER_CALL = 100  # physics steps one device call may run (time_scale is then an upper bound)
# drivers on the twin's clock: the physics runs at most this far (simulated s) past the time they last waited for,
# so a driver late with its tick (a loaded machine) holds the robot instead of letting it move on without the
# setpoint (measured before: up to 164 ms late at --time-scale 0.5 under load, the residuals doubled) — the
# lockstep of a simulator's use_sim_time. One physics step: with a robot-rate tick (10 ms) of lead, a driver slow
# to wake let the physics run on and its setpoints landed up to 5 ms late (8 of 1001 ticks in a loaded run of the
# twin test's 10 s double-support plan, the torso's lateral first moment then 3.2 SE off)
DRIVER_LEAD_S = 0.001
# ... unless the physics has waited this long for them (wall s, counted in its own waits, so a stall of the whole
# process — a loaded machine descheduling it — is not mistaken for drivers gone elsewhere): then they wait on
# something else (a host-clock timeout, an operator) and the physics runs free until they wait for it again
FREE_AFTER_S = 0.25
# ... or this long for a fixed-base arm's: its bench has no boards, and its bus answers from the physics' state at
# once, so no driver waits on simulated time elsewhere; a driver thread stalled past FREE_AFTER_S (a loaded
# machine) let the arm's physics run on without it, and the stream's next setpoints met an arm that had stopped
FREE_AFTER_S_FIXED_BASE = 2.0
# a servo of stiffness kp on a joint of inertia I is a spring the physics step integrates explicitly: stable only
# while ω·dt = √(kp/I)·dt stays below about 2 (semi-implicit Euler's bound); above it the twin blows up
STABLE_OMEGA_DT = 2.0


class TwinDiverged(DeviceError):
    """The physics twin's simulation blew up (NaN, Inf or huge accelerations): it stopped, and says why."""


@dataclass(frozen=True)
class ServoModel:
    """Position servo of every joint. `p_gain` in Dynamixel units (PWM = P/128 · error ticks, saturating at
    PWM_LIMIT at the URDF effort): kp = effort / (PWM_LIMIT · 128 / P ticks). No torque input: a gravity
    feed-forward reaches it, as on a real servo, as a goal offset τ / kp (`drivers.gravity`, the executor)."""

    p_gain: float = 800.0
    integral_time_s: float = 0.0  # position I action (Dynamixel Position I Gain ≠ 0); 0 = P only (X default)
    armature: float = 0.02  # kg·m², rotor inertia seen at the joint
    coulomb: float = 0.3  # N·m, joint dry friction (frictionloss)
    damping_from_limits: bool = True  # back-EMF damping = effort / velocity limit
    # the firmware's P action sees whole encoder ticks: no force while the present position reads the goal tick
    # (a ±½-tick deadband), kp·error from one tick off, rising continuously in between — the mean of its
    # staircase, which in the simulation chatters at the step rate where the real motor's inductance and gears
    # smooth it. False: kp·error at any error (cheaper)
    deadband: bool = True

    def kp(self, effort: float, p_gain: float | None = None) -> float:
        """N·m/rad at `p_gain` (default this model's): linear in the gain, 0 at P = 0."""
        p = self.p_gain if p_gain is None else p_gain
        return effort * p / (PWM_LIMIT * 128.0 * (2 * math.pi / TICKS_PER_REV))


@dataclass(frozen=True)
class TwinOptions:
    time_scale: float = 1.0
    timestep: float = 0.001  # s (simulated)
    servo: ServoModel = field(default_factory=ServoModel)
    friction: float = 0.9  # sole-board friction coefficient
    encoder_noise_rad: float = 0.0
    # the boards integrate their load over fixed windows of `board_conversion_s` simulated seconds (their own
    # clock, as a real board's converter runs), each window one conversion, reported once (`Twin.board_conversions`)
    # — not the load at one instant: the servos' force steps at the tick rate then do not alias into the band a
    # dynamic identification uses. Costs a contact-force evaluation per physics step while standing.
    board_averaging: bool = False
    board_conversion_s: float = 0.0125
    # soles strapped to the boards once the robot stands (a dynamic double-support experiment's fixture: the
    # model's "both feet fixed on the boards" made true); welds as stiff as the 1 ms step allows
    clamp_soles: bool = False
    # record every physics step while standing (`Twin.trace_arrays`): time, whole-body CoM, the plates' wrench on
    # the robot about the floor origin and the joint angles — the physics itself, to tell a model's misfit from
    # the boards' sampling (`bench/twin_misfit.py`)
    trace: bool = False
    # at most this many physics steps per wall-clock second in the physics thread (None: as fast as the scale
    # asks): emulates a machine too slow for `time_scale`, so tests can show the drivers keep to simulated time
    max_steps_per_s: float | None = None
    # the robot's root bolted to the world (a fixed-base arm on its stand): no free base, soles, boards or hoist;
    # the servos' efforts (`Twin.effort`) are what the arm's motor currents measure
    fixed_base: bool = False


CLAMP_SOLREF = (
    0.002,
    1.0,
)  # s, damping ratio: the stiffest stable weld at a 1 ms step (time constant ≥ 2 dt)
CLAMP_AFTER_S = 0.3  # simulated s the robot stands free before the straps are tightened


@dataclass
class TwinEvent:
    t_sim: float
    kind: str  # fall, edge, lift, feet-contact, slip, touch-down
    detail: str


def _quat(R: np.ndarray) -> np.ndarray:
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.asarray(R, dtype=float).ravel())
    return q


def _rpy_matrix(rpy) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def root_pose_for(
    m, d, root: int, site: int, R_des: np.ndarray, p_des: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Position and quaternion of body `root` (a free base) that put site `site` at (R_des, p_des), the joints as
    `d.qpos` has them (runs mj_kinematics on d)."""
    import mujoco

    mujoco.mj_kinematics(m, d)
    Rs, ps = d.site_xmat[site].reshape(3, 3), d.site_xpos[site]
    Rr, pr = d.xmat[root].reshape(3, 3), d.xpos[root]
    R_rel, p_rel = Rs.T @ Rr, Rs.T @ (pr - ps)  # root in the site frame
    return p_des + R_des @ p_rel, _quat(R_des @ R_rel)


def _limit(values, j: int) -> float:
    v = float(np.asarray(values, dtype=float)[j]) if values is not None else 0.0
    return v if math.isfinite(v) else 0.0


def physical_truth(model: RobotModel, truth: ParameterSet, eps: float = 1e-7) -> ParameterSet:
    """The truth with every inertia made physically consistent (nearest set, then eps·I so MuJoCo's strict
    triangle check passes): only the inertias of links that violate it change; masses and CoMs never do."""
    names = [lk.name for lk in model.links]
    ps, _ = nearest_consistent(truth, names, dict(truth.mass))
    inertia = {}
    for n, v in ps.inertia.items():
        I = inertia_matrix(v) + eps * np.eye(3)
        inertia[n] = tuple(float(I[r, c]) for r, c in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)))
    return replace(ps, name=truth.name, inertia=inertia)


def build_spec(model: RobotModel, truth: ParameterSet, opts: TwinOptions):
    """The MuJoCo spec: robot on a free base, box soles, two mocap boards, a hoist, position servos."""
    import mujoco

    text = model_to_urdf(model, physical_truth(model, truth))
    text = re.sub(
        r"(<robot\b[^>]*>)",
        r'\1<mujoco><compiler discardvisual="true" fusestatic="false" balanceinertia="false"/></mujoco>',
        text,
        count=1,
    )
    try:
        spec = mujoco.MjSpec.from_string(text)
    except ValueError as exc:
        raise DataError(f"MuJoCo cannot load {model.name!r}: {exc}") from None
    spec.option.timestep = opts.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0  # stiff tangential contact: quasi-static standing without creep
    spec.option.tolerance = 1e-10
    spec.option.iterations = 100
    spec.option.noslip_iterations = 10  # no creep of soft contacts: a standing sole stays where it was put
    world = spec.worldbody
    root = spec.body(model.root)
    if opts.fixed_base:
        _add_servos(spec, model, opts)
        return spec
    root.add_freejoint(name="base")
    lengths = truth.lengths
    for site in model.sites:
        body = spec.body(site.link)
        R = _rpy_matrix(site.rpy)
        p = _offset(site.offset, lengths)
        body.add_site(name=site.name, pos=p, quat=_quat(R))
        if site.rect is None:
            continue
        x0, x1, y0, y1 = site.rect
        centre = p + R @ np.array([(x0 + x1) / 2, (y0 + y1) / 2, SOLE_THICKNESS / 2])  # bottom face = sole
        body.add_geom(
            name=f"{site.name}_box",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[(x1 - x0) / 2, (y1 - y0) / 2, SOLE_THICKNESS / 2],
            pos=centre,
            quat=_quat(R),
            friction=[opts.friction, 0.005, 0.0001],
            mass=0.0,
            density=0.0,
        )  # meets only the other sole's box (`Twin._own_boards`): the feet touching
        for k, (x, y) in enumerate(((x0, y0), (x0, y1), (x1, y0), (x1, y1))):
            body.add_geom(
                name=f"{site.name}_pad{k}",
                type=mujoco.mjtGeom.mjGEOM_SPHERE,
                size=[PAD_RADIUS, 0.0, 0.0],
                pos=p + R @ np.array([x, y, PAD_RADIUS]),
                friction=[opts.friction, 0.005, 0.0001],
                solref=list(PAD_SOLREF),
                priority=1,  # its contacts take its solref and friction, whatever they meet
                mass=0.0,
                density=0.0,
            )
    for i in range(2):
        b = world.add_body(name=f"board{i}", mocap=True, pos=[0.0, 3.0 + i, 0.0])
        b.add_geom(
            name=f"board{i}_top",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[BOARD_SIZE[0] / 2, BOARD_SIZE[1] / 2, BOARD_SIZE[2] / 2],
            pos=[0.0, 0.0, -BOARD_SIZE[2] / 2],
            friction=[opts.friction, 0.005, 0.0001],
        )
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], pos=[0, 0, 0])
    hoist = world.add_body(name="hoist", mocap=True, pos=[0, 0, 1.0])
    eq = spec.add_equality(
        type=mujoco.mjtEq.mjEQ_WELD, name1=model.root, name2=hoist.name, objtype=mujoco.mjtObj.mjOBJ_BODY
    )
    eq.data[3:11] = [0, 0, 0, 1, 0, 0, 0, 1]  # the root held exactly at the hoist's pose
    for (
        site
    ) in model.sites:  # straps: inactive until `Twin.clamp` tightens them at the pose the sole rests in
        if site.rect is None:
            continue
        for i in range(2):
            strap = spec.add_equality(
                type=mujoco.mjtEq.mjEQ_WELD, name=f"strap_{site.name}_{i}", name1=site.link, name2=f"board{i}",
                objtype=mujoco.mjtObj.mjOBJ_BODY,
            )  # fmt: skip
            strap.active = False
            strap.solref = list(CLAMP_SOLREF)
    _add_servos(spec, model, opts)
    return spec


def _add_servos(spec, model: RobotModel, opts: TwinOptions) -> None:
    """A position servo on every joint: rotor inertia, dry friction, back-EMF damping, P action to the effort limit."""
    import mujoco

    placeholders = placeholder_limits(model).get("effort", {})
    for j, name in enumerate(model.joint_names):
        effort, vel = _limit(model.effort_limit, j), _limit(model.velocity_limit, j)
        if not effort > 0:
            raise DataError(f"{model.name!r}: joint {name!r} has no effort limit; the twin's servos need one")
        if name in placeholders:  # its servo's stiffness and torque would follow it: the physics blows up
            raise DataError(f"{model.name!r}: joint {name!r}: its effort limit {effort:g} N·m is the URDF's "
                            "placeholder, and the twin's servo stiffness follows it; set the joint's real one "
                            f"([joint_limits.{name}] effort in the robot description)")  # fmt: skip
        jt = spec.joint(name)
        jt.armature = opts.servo.armature
        jt.frictionloss = opts.servo.coulomb
        if opts.servo.damping_from_limits and vel > 0:
            jt.damping = [effort / vel, 0.0, 0.0]
        kp = opts.servo.kp(effort)
        a = spec.add_actuator(name=f"servo_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        a.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        a.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        a.gainprm[0] = kp
        a.biasprm[1] = -kp
        a.forcelimited = True
        a.forcerange = [-effort, effort]


class Twin:
    """The simulated bench. Implements the joint-plant interface the servo emulators drive (`q`, `goal`,
    `torque`, `step`, `measured`, `set_goal`, `set_torque`, `set_p_gain`) and the board-load interface of the
    board emulators (`board_load(i)`), with the operator's `lift` / `place`. Each joint's servo starts with
    `opts.servo.p_gain`; the bus emulator sets it per joint as its servo's Position P Gain register is written.
    Thread-safe; simulated time = wall time × scale."""

    def __init__(
        self,
        model: RobotModel,
        truth: ParameterSet,
        opts: TwinOptions | None = None,
        q0: np.ndarray | None = None,
        base: str | None = None,
        seed: int = 0,
    ) -> None:
        import mujoco

        self.mj = mujoco
        self.opts = opts = opts or TwinOptions()
        if not (math.isfinite(opts.time_scale) and opts.time_scale > 0):
            raise DataError(f"time scale {opts.time_scale!r} must be a positive finite number")
        cap = opts.max_steps_per_s
        if cap is not None and not (math.isfinite(cap) and cap > 0):
            raise DataError(f"max_steps_per_s {cap!r} must be a positive finite number (or None: no cap)")
        self.model, self.truth = model, truth
        self.fixed = opts.fixed_base
        if self.fixed and (opts.board_averaging or opts.clamp_soles or opts.trace):
            raise DataError(
                "a fixed-base twin has no boards: board averaging, clamped soles and the trace need them"
            )
        self.base_site = None if self.fixed else model.base_site(base or default_base(model)).name
        self.m = build_spec(model, truth, opts).compile()
        self.d = mujoco.MjData(self.m)
        self.rng = np.random.default_rng(seed)
        jid = [mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in model.joint_names]
        self.qadr = np.array([self.m.jnt_qposadr[j] for j in jid])
        self.vadr = np.array([self.m.jnt_dofadr[j] for j in jid])
        self.root = mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_BODY, model.root)

        def body(name: str) -> int:
            return mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_BODY, name)

        boards = [] if self.fixed else range(2)
        self.board_geoms = [
            mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_GEOM, f"board{i}_top") for i in boards
        ]
        self.board_bodies = [int(self.m.geom_bodyid[g]) for g in self.board_geoms]
        self.board_mocap = [self.m.body_mocapid[body(f"board{i}")] for i in boards]
        self.hoist = None if self.fixed else self.m.body_mocapid[body("hoist")]
        self.soles = [] if self.fixed else [s.name for s in model.sites if s.rect is not None]
        self.sole_geoms = {  # each sole's box, then its four pads
            s: [mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_GEOM, f"{s}_{g}") for g in ("box", *PADS)]
            for s in self.soles
        }
        self.site_ids = (
            {}
            if self.fixed
            else {s.name: mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_SITE, s.name) for s in model.sites}
        )
        if not self.fixed:
            self._own_boards()
        self.ticks_per_rad = TICKS_PER_REV / (2 * math.pi)
        self.torque = np.zeros(model.nq, dtype=bool)
        self.goal = np.zeros(model.nq) if q0 is None else np.array(q0, dtype=float)
        # time-based goal profiles (Dynamixel Drive Mode bit 2): each joint's servo moves its target from where it
        # was to a new goal linearly over profile_s (0: at once), starting when the goal arrives
        self.profile_s = np.zeros(model.nq)
        self._ramp_from, self._ramp_t0 = self.goal.copy(), np.zeros(model.nq)
        self.lock = threading.RLock()
        self.events: list[TwinEvent] = []
        self.placed = False
        self.board_poses: list[np.ndarray] = []
        self._placed_at: dict[str, np.ndarray] = {}
        self._t_wall = time.monotonic()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._cache = (-1.0, np.zeros(8))
        self._ext_sum, self._ext_n = np.zeros((2, 6)), np.zeros(2, dtype=int)
        self._ext_last: list[np.ndarray | None] = [None, None]  # each board's last reported mean plate wrench
        self._window: int | None = None  # the conversion window the sums belong to (board_conversion_s)
        self._conversions: list[list[np.ndarray]] = [[], []]  # completed conversions not yet reported
        self.trace: list[np.ndarray] = []  # per physics step while standing, when opts.trace
        self._kp = self.m.actuator_gainprm[:, 0].copy()
        self._effort = np.array([_limit(model.effort_limit, j) for j in range(model.nq)])
        self.p_gain = np.full(model.nq, float(opts.servo.p_gain))  # each servo's Position P Gain now
        self._integral = np.zeros(model.nq)
        self.lost_s = (
            0.0  # simulated seconds the physics could not run in time (machine too slow for the scale)
        )
        self._wall0 = time.monotonic()
        self.straps = {
            (s, i): mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_EQUALITY, f"strap_{s}_{i}")
            for s in self.soles
            for i in range(2)
        }
        self._clamp_at: float | None = None
        # notified after every run of physics steps: TwinClock waits on it
        self._stepped = threading.Condition()
        self.clocked = False  # set by TwinClock: the drivers pace themselves by simulated time
        self._driver_t: float | None = None  # the latest simulated time the drivers waited for (wait_until)
        # wall s the physics has waited for them since they last asked (the sum of its waits' timeouts)
        self._waited_s = 0.0
        self._free_after_s = FREE_AFTER_S_FIXED_BASE if opts.fixed_base else FREE_AFTER_S
        self._driver_asked = threading.Event()  # set when they wait for a later time: a held physics goes on
        self.held_s = 0.0  # wall s the physics waited for late drivers
        # why the physics blew up and stopped (TwinDiverged); None while it is sound
        self.diverged: str | None = None
        # simulated times the physics stopped waiting for drivers gone elsewhere
        self.freed_at: list[float] = []
        self.d.qpos[self.qadr] = self.goal
        self._apply()
        if self.fixed:
            mujoco.mj_forward(self.m, self.d)
        else:
            self.lift()

    def _own_boards(self) -> None:
        """Each sole's pads meet the floor and its own board's plate only (the base sole board 0, the other board
        1), its box only the other sole's box. Real boards cannot overlap; the twin's plates, placed from the
        configuration, do where the feet are closer than a board is wide, and a sole over both plates would split
        its load between them — the executor's per-board checks read each board as its own sole's."""
        floor, bit, feet = 1, [2, 4], 8
        for i, g in enumerate(self.board_geoms):
            self.m.geom_contype[g] = self.m.geom_conaffinity[g] = bit[i]
        others = [s for s in self.soles if s != self.base_site]
        for i, s in enumerate([self.base_site, *others][:2]):
            box, *pads = self.sole_geoms[s]
            self.m.geom_contype[box] = self.m.geom_conaffinity[box] = feet
            self.m.geom_contype[pads] = self.m.geom_conaffinity[pads] = floor | bit[i]

    # ---------------------------------------------------------------- time
    @property
    def t_sim(self) -> float:
        return float(self.d.time)

    def _advance(self) -> None:
        """Catch simulated time up with the wall clock (only when no physics thread runs it)."""
        if self._thread is not None:
            return
        now = time.monotonic()
        n = int((now - self._t_wall) * self.opts.time_scale / self.opts.timestep)
        if n <= 0:
            return
        if n > MAX_STEPS_PER_CALL:  # the physics cannot keep up: simulated time runs slower, never jumps
            self.lost_s += (now - self._t_wall) * self.opts.time_scale - n * self.opts.timestep
            n, self._t_wall = MAX_STEPS_PER_CALL, now
        else:
            self._t_wall += n * self.opts.timestep / self.opts.time_scale
        self.run_steps(n)

    def start(self) -> None:
        """Run the physics in its own thread, paced to wall time × time_scale, in short locked chunks so the
        device emulators (bus, boards) answer on time."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._t_wall = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="twin-physics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def _loop(self) -> None:
        chunk = THREAD_CHUNK
        cap = self.opts.max_steps_per_s
        next_allowed = time.monotonic()  # the step cap's schedule (max_steps_per_s)
        while not self._stop.is_set():
            allowed = self._steps_for_drivers()
            if allowed == 0:
                continue
            behind = (time.monotonic() - self._t_wall) * self.opts.time_scale / self.opts.timestep
            if behind < chunk:
                time.sleep(chunk * self.opts.timestep / self.opts.time_scale)
                continue
            if cap is not None:
                wait = next_allowed - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                next_allowed = max(next_allowed, time.monotonic() - 0.1) + chunk / cap
            n = chunk if allowed is None else min(chunk, allowed)
            try:
                with self.lock:
                    self.run_steps(n)
            except TwinDiverged:
                return  # the physics is gone: wait_until tells the drivers why
            self._t_wall += n * self.opts.timestep / self.opts.time_scale
            lag = time.monotonic() - self._t_wall
            if lag > 0.1:  # more than 100 ms behind: slow down rather than run a burst
                self._t_wall += lag
                self.lost_s += lag * self.opts.time_scale
            time.sleep(0)  # let the device threads in

    def _steps_for_drivers(self) -> int | None:
        """Physics steps allowed before the physics is DRIVER_LEAD_S past the time the drivers on the twin's clock
        last waited for (None: no limit — not followed, or they have waited on something else for FREE_AFTER_S;
        an arm's FREE_AFTER_S_FIXED_BASE). 0: the physics waited for them to ask for a later time, at most that
        long (pacing restarts then)."""
        t = self._driver_t
        if not self.clocked or t is None or self._waited_s >= self._free_after_s:
            return None
        n = math.floor((t + DRIVER_LEAD_S - self.d.time) / self.opts.timestep + 1e-6)
        if n > 0:
            return n
        t0 = time.monotonic()
        self._driver_asked.clear()
        if (
            self._driver_t == t
        ):  # no newer time since it was read: sleep until one comes, not in a polling loop
            wait = min(0.05, self._free_after_s - self._waited_s + 0.001)
            if not self._driver_asked.wait(wait):
                self._waited_s += wait
                if self._waited_s >= self._free_after_s:
                    self.freed_at.append(float(self.d.time))
        self.held_s += time.monotonic() - t0
        self._t_wall = time.monotonic()  # no burst to catch up afterwards
        return 0

    def run_steps(self, n: int) -> None:
        """Advance the physics by n steps (checking for falls and tipping every 10 ms of simulated time)."""
        chunk = max(1, int(round(0.01 / self.opts.timestep)))
        with self.lock:
            while n > 0:
                if self.diverged is not None:
                    raise TwinDiverged(self.diverged)
                t_chunk = float(self.d.time)
                k = min(n, chunk)
                averaging = self.placed and self.opts.board_averaging
                tracing = self.placed and self.opts.trace
                profiling = bool(self.profile_s.any())
                if averaging or tracing or self.opts.servo.deadband or profiling:
                    for _ in range(k):
                        if profiling:
                            self._goal_ticks = self._ticks(self._commanded())
                            self.d.ctrl[:] = self._goal_ticks + self._integral
                        if self.opts.servo.deadband:
                            self._tick_error()
                        # the step's forces belong to the state it starts from (mj_step integrates after them)
                        t0 = float(self.d.time)
                        state = (self.d.qpos.copy(), self.d.qvel.copy()) if tracing else None
                        self.mj.mj_step(self.m, self.d)
                        if averaging or tracing:
                            self.mj.mj_rnePostConstraint(self.m, self.d)
                        if averaging:
                            self._convert(t0)
                        if tracing:
                            self._trace_step(t0, *state)
                else:
                    self.mj.mj_step(self.m, self.d, nstep=k)
                self._check_divergence(t_chunk)
                if self.opts.board_averaging and not averaging:  # lifted: the boards go on converting, empty
                    self._idle_conversions()
                n -= k
                Ti = self.opts.servo.integral_time_s
                if Ti > 0:  # integral action on the encoder error, per 10 ms
                    e = (
                        self._goal_ticks
                        - np.round(self.d.qpos[self.qadr] * self.ticks_per_rad) / self.ticks_per_rad
                    )
                    self._integral = np.where(
                        self.torque, self._integral + e * k * self.opts.timestep / Ti, 0.0
                    )
                    self._integral = np.clip(self._integral, -INTEGRAL_LIMIT, INTEGRAL_LIMIT)
                    if self.opts.servo.deadband:
                        self._tick_error()
                    else:
                        self.d.ctrl[:] = self._goal_ticks + self._integral
                if self.placed:
                    self._watch()
                    if self._clamp_at is not None and self.d.time >= self._clamp_at:
                        self._clamp()
        with self._stepped:
            self._stepped.notify_all()

    def _check_divergence(self, t0: float) -> None:
        """Stop the twin (TwinDiverged) if the steps since `t0` blew up: MuJoCo's bad acceleration, velocity or position
        warning (it then resets the state to the model's home, rewinding time, and would blow up again) or NaNs."""
        w = self.mj.mjtWarning
        bad = [self.d.warning[k] for k in (w.mjWARN_BADQACC, w.mjWARN_BADQVEL, w.mjWARN_BADQPOS)]
        fired = [b for b in bad if b.number > 0]
        if not fired and np.isfinite(self.d.qpos).all() and np.isfinite(self.d.qvel).all():
            return
        self.d.time = t0  # the reset rewound it: the physics stopped here
        self.diverged = self._divergence_cause(t0, int(fired[0].lastinfo) if fired else None)
        self.events.append(TwinEvent(t0, "diverged", self.diverged))
        raise TwinDiverged(self.diverged)

    def _divergence_cause(self, t0: float, dof: int | None) -> str:
        """One line: where the physics blew up and the likely cause — the stiffest servo's ω·dt on its joint's
        inertia at the home pose (MuJoCo's dof_M0, armature included) against the step's stability bound."""
        names = self.model.joint_names
        at = [n for n, v in zip(names, self.vadr, strict=True) if v == dof]
        where = f" (MuJoCo: NaN, Inf or huge value at joint {at[0]!r})" if at else ""
        dt = self.opts.timestep
        omega_dt = np.sqrt(self._kp / self.m.dof_M0[self.vadr]) * dt
        j = int(np.argmax(omega_dt))
        head = f"the physics twin diverged after t = {t0:.3f} s (simulated){where} and stopped"
        if omega_dt[j] < STABLE_OMEGA_DT:
            return (f"{head}; its servos are within the {1000 * dt:g} ms step's stability bound (largest "
                    f"ω·dt {omega_dt[j]:.2f} < {STABLE_OMEGA_DT:g}, joint {names[j]!r}): check the robot's "
                    "link inertias and masses")  # fmt: skip
        return (f"{head}: its servos are too stiff for the links' inertias at the {1000 * dt:g} ms step — joint "
                f"{names[j]!r}: kp {self._kp[j]:.3g} N·m/rad (effort limit {self._effort[j]:g} N·m at Position "
                f"P Gain {self.p_gain[j]:g}) on {self.m.dof_M0[self.vadr[j]]:.3g} kg·m² gives ω·dt "
                f"{omega_dt[j]:.2f} (stable below {STABLE_OMEGA_DT:g}); give the robot description realistic "
                "effort limits or lower the config's position_p_gain")  # fmt: skip

    def wait_until(self, t_sim: float, poll_s: float = 0.05) -> None:
        """Block until simulated time reaches `t_sim` (s). With the physics thread running this waits for it;
        without, the physics is run here. Raises DeviceError if the physics thread has stopped."""
        if self._thread is None:
            with self.lock:
                n = math.ceil((t_sim - self.d.time) / self.opts.timestep - 1e-9)
                if n > 0:
                    self.run_steps(n)
                    self._t_wall = time.monotonic()
            return
        self._driver_t = t_sim if self._driver_t is None else max(self._driver_t, t_sim)
        self._waited_s = 0.0
        self._driver_asked.set()
        with self._stepped:
            while self.d.time < t_sim - 1e-9:
                thread = self._thread
                if self.diverged is not None:
                    raise TwinDiverged(self.diverged)
                if thread is None or not thread.is_alive():
                    raise DeviceError(
                        f"the physics twin stopped at t = {self.d.time:.3f} s (simulated) while the drivers "
                        f"waited for t = {t_sim:.3f} s"
                    )
                self._stepped.wait(poll_s)

    def settle_sim(self, seconds: float) -> None:
        """Advance simulated time without waiting for the wall clock (tests, initial placement)."""
        with self.lock:
            self.run_steps(int(round(seconds / self.opts.timestep)))
            self._t_wall = time.monotonic()

    # ---------------------------------------------------------------- plant interface
    @property
    def q(self) -> np.ndarray:
        return self.d.qpos[self.qadr].copy()

    def step(self) -> np.ndarray:
        with self.lock:
            self._advance()
            return self.d.qpos[self.qadr].copy()

    def measured(self) -> np.ndarray:
        """Encoder readings: the true angle to whole ticks (plus optional noise)."""
        q = self.step()
        if self.opts.encoder_noise_rad > 0:
            q = q + self.rng.normal(0.0, self.opts.encoder_noise_rad, q.shape)
        return np.round(q * self.ticks_per_rad) / self.ticks_per_rad

    def _tick_error(self) -> None:
        """Servo targets such that the affine actuator's kp·(target − q) is kp times the deadband's error: 0
        within ½ tick of the goal, 2|e| − ½ ticks… up to |e| at one tick, e beyond (e in ticks, sign kept)."""
        q = self.d.qpos[self.qadr]
        # in rad: the ticks' arithmetic scaled by one tick (this runs every physics step)
        e = self._goal_ticks - q
        a = np.abs(e)
        seen = np.minimum(np.maximum(2.0 * a - 1.0 / self.ticks_per_rad, 0.0), a)
        self.d.ctrl[:] = q + np.copysign(seen, e) + self._integral

    def _ticks(self, q: np.ndarray) -> np.ndarray:
        """Angles to whole encoder ticks (rad): goals are ticks."""
        return np.round(q * self.ticks_per_rad) / self.ticks_per_rad

    def _commanded(self) -> np.ndarray:
        """The servos' targets now: each goal, or where its time-based profile has carried the target so far."""
        T = self.profile_s
        if not T.any():
            return self.goal
        frac = np.clip((self.d.time - self._ramp_t0) / np.where(T > 0, T, 1.0), 0.0, 1.0)
        return np.where(T > 0, self._ramp_from + frac * (self.goal - self._ramp_from), self.goal)

    def _apply(self) -> None:
        self._goal_ticks = self._ticks(self._commanded())
        self.d.ctrl[:] = self._goal_ticks + self._integral
        kp = np.where(self.torque, self._kp, 0.0)  # torque off: no servo force (back-EMF damping stays)
        self.m.actuator_gainprm[:, 0] = kp
        self.m.actuator_biasprm[:, 1] = -kp

    def set_goal(self, idx: int, value: float) -> None:
        with self.lock:
            self._advance()
            self._ramp_from[idx], self._ramp_t0[idx] = self._commanded()[idx], self.d.time
            self.goal[idx] = value
            self._apply()

    def set_torque(self, idx: int, on: bool) -> None:
        with self.lock:
            self._advance()
            self.torque[idx] = on
            if on:
                self.goal[idx] = self._ramp_from[idx] = self.d.qpos[self.qadr[idx]]
            self._apply()

    def set_p_gain(self, idx: int, gain: float) -> None:
        """Joint `idx`'s servo now holds with Position P Gain `gain` (Dynamixel units): its stiffness follows."""
        with self.lock:
            self._advance()
            self.p_gain[idx] = float(gain)
            self._kp[idx] = self.opts.servo.kp(float(self._effort[idx]), float(gain))
            self._apply()

    def set_profile(self, idx: int, seconds: float) -> None:
        """Joint `idx`'s servo moves to each new goal over `seconds` (time-based profile; 0: at once)."""
        with self.lock:
            self._advance()
            self._ramp_from[idx], self._ramp_t0[idx] = self._commanded()[idx], self.d.time
            self.profile_s[idx] = max(0.0, float(seconds))
            self._apply()

    def effort(self) -> np.ndarray:
        """Each servo's effort on its joint (N·m, or N on a prismatic joint) over the last physics step: MuJoCo's
        actuator force, all a motor supplies — the joint's rotor inertia, damping and dry friction included."""
        with self.lock:
            self._advance()
            return self.d.actuator_force.copy()

    def joint_truth(self) -> dict[str, dict[str, float]]:
        """What the twin's joints add to the rigid bodies, by joint: rotor inertia (`armature`, kg·m²), viscous
        damping (N·m·s/rad) and dry friction (N·m) — the truth for `identify dynamic`'s friction and --armature."""
        m = self.m
        return {
            name: {
                "armature": float(m.dof_armature[v]),
                "viscous": float(m.dof_damping[v]),
                "coulomb": float(m.dof_frictionloss[v]),
            }  # fmt: skip
            for name, v in zip(self.model.joint_names, self.vadr, strict=True)
        }

    def effort_limits(self) -> np.ndarray:
        """The servos' effort limits (the URDF's `effort`; N·m, or N)."""
        return self._effort.copy()

    # ---------------------------------------------------------------- operator
    def _root_pose_for(
        self, site: str, R_des: np.ndarray, p_des: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Root position and quaternion that put `site` at (R_des, p_des), the joints as they are."""
        return root_pose_for(self.m, self.d, self.root, self.site_ids[site], R_des, p_des)

    def _teleport(self, pos: np.ndarray, quat: np.ndarray) -> None:
        self.d.qpos[0:3], self.d.qpos[3:7] = pos, quat
        self.d.qvel[:] = 0.0
        self.d.mocap_pos[self.hoist], self.d.mocap_quat[self.hoist] = pos, quat
        self.mj.mj_forward(self.m, self.d)

    def _refuse_if_fixed(self, what: str) -> None:
        if self.fixed:
            raise DeviceError(
                f"the fixed-base twin of {self.model.name!r} is bolted to its stand: it cannot be {what}"
            )

    def lift(self) -> None:
        """Hang the robot from the hoist, clear of the boards (its joints keep moving under servo control)."""
        self._refuse_if_fixed("lifted")
        with self.lock:
            self._advance()
            pos, quat = self._root_pose_for(self.base_site, np.eye(3), np.array([0.0, 0.0, 0.35]))
            self._teleport(pos, quat)
            self.d.eq_active[0] = 1
            self.d.eq_active[list(self.straps.values())] = 0
            self._clamp_at = None
            self.placed = False
            self._integral[:] = 0.0
            self._cache = (-1.0, np.zeros(8))

    def place(self, board_poses: list[np.ndarray], lifted: bool = False) -> None:
        """Boards at their (x, y, yaw) poses in the base frame; the robot set down with its base sole on board
        0's top at the base frame's origin (the other sole lands where the posture puts it). `lifted`: a
        single-support start — the other sole is meant to stay in the air, and touching down is an event."""
        self._refuse_if_fixed("placed on boards")
        with self.lock:
            self._advance()
            for i, (x, y, psi) in enumerate(board_poses):
                self.d.mocap_pos[self.board_mocap[i]] = [x, y, BOARD_SIZE[2]]
                self.d.mocap_quat[self.board_mocap[i]] = [math.cos(psi / 2), 0.0, 0.0, math.sin(psi / 2)]
            self.board_poses = [np.asarray(p, dtype=float) for p in board_poses]
            # the operator sets the robot down with both soles flat: the legs as commanded, not as they sagged
            # in the air (the load then deflects them while the soles stay on the boards)
            self.d.qpos[self.qadr] = np.where(self.torque, self._goal_ticks, self.d.qpos[self.qadr])
            pos, quat = self._root_pose_for(self.base_site, np.eye(3), np.array([0.0, 0.0, BOARD_SIZE[2]]))
            self._teleport(pos, quat)
            lowest = min(self._sole_corners_z())
            pos = pos + np.array([0.0, 0.0, BOARD_SIZE[2] + 1e-3 - lowest])  # lowest sole corner 1 mm up
            self._teleport(pos, quat)
            self.d.eq_active[0] = 0  # let go: a 1 mm drop
            self.placed = True
            self._integral[:] = 0.0
            self._placed_at = {s: self.d.site_xpos[self.site_ids[s]].copy() for s in self.soles}
            self._root_z = float(self.d.xpos[self.root][2])
            self._active: set[str] = set()
            self._landed: set[str] = set()
            # a sole set down in the air (single support) must stay there: touching down is an event
            self._placed_lifted = {s for s in self.soles if s != self.base_site} if lifted else set()
            self._releasing: set[str] = set()
            self._putting_down: set[str] = set()  # lifted soles put back down: placed where they touch
            self._cache = (-1.0, np.zeros(8))
            self._ext_sum[:], self._ext_n[:] = 0.0, 0
            self._ext_last = [None, None]
            self._window, self._conversions = None, [[], []]
            self._clamp_at = self.d.time + CLAMP_AFTER_S if self.opts.clamp_soles else None

    def expect_sole(self, sole: str, lifted: bool) -> None:
        """The executor lifts `sole` off its board on purpose (`lifted`; a weight-shift start) — its leaving the
        board is no `lift` event and, once in the air, it counts as set down lifted (touching down is a
        `touch-down`) — or puts it back down (it may touch its board again; where it touches is where it was
        placed: a plan ending elsewhere puts it down elsewhere, no `slip`)."""
        with self.lock:
            if lifted:
                self._releasing.add(sole)
            else:
                self._releasing.discard(sole)
                self._placed_lifted.discard(sole)
                self._putting_down.add(sole)

    def _clamp(self) -> None:
        """Strap every sole resting on a board to it, flat on its top where it stands (its x, y and heading):
        the welds (see build_spec) are stiffer than the contact, so the sole no longer rocks or sinks."""
        self._clamp_at = None
        mj, m, d = self.mj, self.m, self.d
        mj.mj_kinematics(m, d)
        for s in self.soles:
            sid = self.site_ids[s]
            if float(d.site_xpos[sid][2]) - BOARD_SIZE[2] > 0.002:
                continue  # a lifted sole is not strapped
            xy = d.site_xpos[sid][:2]
            board = min(range(2), key=lambda i: float(np.linalg.norm(xy - self.board_poses[i][:2])))
            eq = self.straps[(s, board)]
            Rs = d.site_xmat[sid].reshape(3, 3)
            yaw = math.atan2(Rs[1, 0], Rs[0, 0])
            R_site = _rpy_matrix((0.0, 0.0, yaw))
            p_site = np.array([xy[0], xy[1], BOARD_SIZE[2]])  # the sole's face on the plate's top
            R_local = np.empty(9)
            mj.mju_quat2Mat(R_local, m.site_quat[sid])
            R_local = R_local.reshape(3, 3)
            R1 = R_site @ R_local.T  # the foot body flat, where it stands
            p1 = p_site - R1 @ m.site_pos[sid]
            b2 = int(m.eq_obj2id[eq])
            R2, p2 = d.xmat[b2].reshape(3, 3), d.xpos[b2]
            m.eq_data[eq, 0:3] = 0.0
            m.eq_data[eq, 3:6] = R1.T @ (p2 - p1)  # the board in the strapped foot's frame
            m.eq_data[eq, 6:10] = _quat(R1.T @ R2)
            m.eq_data[eq, 10] = 1.0
            d.eq_active[eq] = 1

    def _sole_corners_z(self) -> list[float]:
        out = []
        for site in self.model.sites:
            if site.rect is None:
                continue
            sid = self.site_ids[site.name]
            R, p = self.d.site_xmat[sid].reshape(3, 3), self.d.site_xpos[sid]
            x0, x1, y0, y1 = site.rect
            out += [float((p + R @ np.array([x, y, 0.0]))[2]) for x in (x0, x1) for y in (y0, y1)]
        return out

    # ---------------------------------------------------------------- boards
    def _board_wrench(self, i: int, ext: np.ndarray | None = None) -> np.ndarray:
        """Vertical reactions (4,) of board i's cells (N, ≥ 0 when pressed), order TR, BR, TL, BL, from the
        contact wrench on its plate: `ext` = MuJoCo's cfrc_ext of the plate body (torque about its centre of
        mass, force; world frame), the present one by default."""
        d, body = self.d, self.board_bodies[i]
        if ext is None:
            self.mj.mj_rnePostConstraint(self.m, d)
            ext = d.cfrc_ext[body]
        x, y, psi = self.board_poses[i]
        c, s = math.cos(psi), math.sin(psi)
        Rb = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        o = np.array([x, y, 0.0])  # the cells' plane: the board's feet on the floor
        F = Rb.T @ ext[3:]
        M = Rb.T @ (ext[:3] + np.cross(d.subtree_com[body] - o, ext[3:]))
        cells = cell_positions(CELL_SPAN_X, CELL_SPAN_Y)
        A = np.vstack([np.ones(4), cells[:, 1], cells[:, 0]])  # Σ R, Σ y R, Σ x R
        b = np.array([-F[2], -M[0], M[1]])
        return A.T @ np.linalg.solve(A @ A.T, b)  # equal cell stiffness: the minimum-norm split

    def cell_loads(self) -> np.ndarray:
        """Per-cell loads (8,) in kg: board 0's four cells, then board 1's."""
        with self.lock:
            self._advance()
            if self._cache[0] == self.d.time:
                return self._cache[1]
            loads = np.zeros(8)
            if self.placed:
                loads = np.concatenate([self._board_wrench(i) for i in range(2)]) / STANDARD_GRAVITY
            self._cache = (float(self.d.time), loads)
            return loads

    def board_load(self, board: int):
        if not self.opts.board_averaging:
            return lambda: self.cell_loads()[4 * board : 4 * board + 4]
        return lambda: self._mean_load(board)

    def _conversion_window(self, t: float | None = None) -> int:
        """The index of the boards' conversion window simulated time `t` (default: the present) lies in."""
        return math.floor((self.d.time if t is None else t) / self.opts.board_conversion_s + 1e-9)

    def _convert(self, t0: float) -> None:
        """After a physics step that started at simulated time t0: its wrench (the state at t0's) joins the
        sums of the window t0 lies in, and a window the step has completed becomes each board's next conversion
        (queued for its reports) at once — as a board's converter sends a window's result when it ends."""
        window = self._conversion_window(t0)
        if self._window is not None and window != self._window:
            self._flush()  # a window left unfinished (the robot set down mid-window)
        self._window = window
        self._ext_sum += self.d.cfrc_ext[self.board_bodies]
        self._ext_n += 1
        if self._conversion_window() != window:
            self._flush()
            self._window = self._conversion_window()

    def _flush(self) -> None:
        if self._ext_n[0] > 0:
            means = self._ext_sum / self._ext_n[:, None]
            for i in range(2):
                self._ext_last[i] = means[i]
                self._queue(i, self._board_wrench(i, means[i]) / STANDARD_GRAVITY)
        self._ext_sum[:], self._ext_n[:] = 0.0, 0

    def _queue(self, board: int, cells_kg: np.ndarray) -> None:
        q = self._conversions[board]
        q.append(cells_kg)
        if len(q) > MAX_QUEUED_CONVERSIONS:  # nobody reads this board: keep the latest
            del q[: len(q) - MAX_QUEUED_CONVERSIONS]

    def _idle_conversions(self) -> None:
        """Conversions of empty boards for the windows that ended while nothing stood on them."""
        window = self._conversion_window()
        if self._window is not None:
            for _ in range(min(window - self._window, MAX_QUEUED_CONVERSIONS)):
                for i in range(2):
                    self._queue(i, np.zeros(4))
        self._window = window
        self._ext_sum[:], self._ext_n[:] = 0.0, 0

    def board_conversions(self, board: int):
        """With `board_averaging`: a callable returning the conversions (each the four cells in kg) board `board`
        completed since it was last called, oldest first — one report each."""

        def pending() -> list[np.ndarray]:
            with self.lock:
                self._advance()
                out, self._conversions[board] = self._conversions[board], []
            return out

        return pending

    def _mean_load(self, board: int) -> np.ndarray:
        """Board `board`'s four cells (kg): its latest completed conversion, however often it is asked. Not the
        instant's load: that is sampled at the end of a physics chunk, in step with the servos' goal writes, where
        their tick-rate force steps peak — several N of motion-dependent bias that no low-pass removes. The
        instant's only before the first conversion after placing."""
        with self.lock:
            self._advance()
            if not self.placed or self._ext_last[board] is None:
                return self.cell_loads()[4 * board : 4 * board + 4]
            return self._board_wrench(board, self._ext_last[board]) / STANDARD_GRAVITY

    def _trace_step(self, t: float, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """One row of the trace: the state the step just taken started from (time t, qpos, qvel) with the
        CoM, contact forces and accelerations of that step's forward pass."""
        d = self.d
        ext = d.cfrc_ext[self.board_bodies]  # on each plate: torque about its subtree CoM, force (world)
        forces = -ext[:, 3:]  # each plate's force on the robot, and its moment about the floor origin
        moments = -(ext[:, :3] + np.cross(d.subtree_com[self.board_bodies], ext[:, 3:]))
        self.trace.append(
            np.concatenate(
                [[t], d.subtree_com[self.root], forces.sum(axis=0), moments.sum(axis=0), qpos[self.qadr], qpos,
                 qvel, d.qacc, forces.ravel(), moments.ravel()]
            )
        )  # fmt: skip

    def trace_arrays(self) -> dict[str, np.ndarray]:
        """The trace (`TwinOptions.trace`) as arrays: t (s, simulated), com (K, 3) m, force (K, 3) N and moment
        (K, 3) N·m of the plates on the robot about the floor origin (world frame: the base frame of the
        placement), q (K, n) rad; MuJoCo's whole state: qpos, qvel and qacc (free base first); and each plate's
        share: board_force, board_moment (K, 2, 3), boards in their order."""
        e = np.cumsum([10, self.model.nq, self.m.nq, self.m.nv, self.m.nv, 6, 6])  # each block's end column
        with self.lock:
            a = np.array(self.trace).reshape(-1, e[-1])
        return {"t": a[:, 0], "com": a[:, 1:4], "force": a[:, 4:7], "moment": a[:, 7:10], "q": a[:, e[0] : e[1]],
                "qpos": a[:, e[1] : e[2]], "qvel": a[:, e[2] : e[3]], "qacc": a[:, e[3] : e[4]],
                "board_force": a[:, e[4] : e[5]].reshape(-1, 2, 3),
                "board_moment": a[:, e[5] : e[6]].reshape(-1, 2, 3)}  # fmt: skip

    def com_xy(self) -> np.ndarray:
        """The twin's own whole-body CoM projection (base frame), from MuJoCo."""
        with self.lock:
            self._advance()
            self.mj.mj_kinematics(self.m, self.d)
            self.mj.mj_comPos(self.m, self.d)
            return self.d.subtree_com[self.root][:2].copy()

    # ---------------------------------------------------------------- watching
    def _event(self, kind: str, detail: str, key: str | None = None) -> None:
        key = key or kind
        if key not in self._active:
            self._active.add(key)
            self.events.append(TwinEvent(self.t_sim, kind, detail))

    def _watch(self) -> None:
        d = self.d
        z = float(d.xpos[self.root][2])
        soles_tilt = [
            math.degrees(math.acos(min(1.0, float(d.site_xmat[self.site_ids[s]].reshape(3, 3)[2, 2]))))
            for s in self.soles
            if s not in self._placed_lifted  # a sole set down in the air may point anywhere
        ]
        if z < 0.5 * self._root_z or max(soles_tilt) > FALL_TILT_DEG:
            self._event("fall", f"root at {1000 * z:.0f} mm, soles tilted {max(soles_tilt):.0f} deg")
        touching = {s: False for s in self.soles}
        for k in range(d.ncon):
            con = d.contact[k]
            gs = {con.geom1, con.geom2}
            soles = [s for s, g in self.sole_geoms.items() if gs.intersection(g)]
            if len(soles) == 2:
                self._event("feet-contact", "the soles touch each other")
            for s in soles:
                touching[s] = True
        for s in self.soles:
            sid = self.site_ids[s]
            Rz = d.site_xmat[sid].reshape(3, 3)[:, 2]
            sole_tilt = math.degrees(math.acos(min(1.0, float(Rz[2]))))
            if sole_tilt > 1.0 and touching[s]:
                self._event("edge", f"{s} tilted {sole_tilt:.1f} deg: standing on an edge", f"edge:{s}")
            if touching[s]:
                self._landed.add(s)
                if s in self._putting_down:
                    self._putting_down.discard(s)
                    self._placed_at[s] = d.site_xpos[sid].copy()
                if s in self._placed_lifted:
                    self._event("touch-down", f"{s} (set down lifted) touched down", f"touch-down:{s}")
            lifted = float(d.site_xpos[sid][2]) - BOARD_SIZE[2] > 0.002
            if lifted and not touching[s] and s in self._releasing:  # off its board as meant: now in the air
                self._releasing.discard(s)
                self._landed.discard(s)
                self._placed_lifted.add(s)
            elif lifted and not touching[s] and s in self._landed:
                self._event("lift", f"{s} off its board", f"lift:{s}")
            slip = float(np.linalg.norm(d.site_xpos[sid][:2] - self._placed_at[s][:2]))
            if slip > SLIP_REPORT and touching[s]:  # a sole in the air moves freely
                self._event("slip", f"{s} slid {1000 * slip:.1f} mm", f"slip:{s}")

    def report(self) -> list[dict]:
        return [{"t_sim_s": e.t_sim, "kind": e.kind, "detail": e.detail} for e in self.events]

    def timing(self) -> dict:
        """How well simulated time kept to wall time × time_scale. A slow machine runs the physics slower than
        asked (`lost_sim_s`, `achieved_scale` < `time_scale`: the run took longer). Drivers on the twin's clock
        (`drivers_clock` "twin") follow it, so their setpoints are never ahead of the physics (`behind_sim_s` 0),
        except where the physics stopped waiting for them (`freed_at_sim_s`: FREE_AFTER_S); drivers on the host
        clock run ahead of it by everything the physics lost."""
        wall = time.monotonic() - self._wall0
        return {
            "time_scale": self.opts.time_scale,
            "wall_s": wall,
            "sim_s": self.t_sim,
            "achieved_scale": self.t_sim / wall if wall > 0 else None,
            "lost_sim_s": self.lost_s,
            "drivers_clock": "twin" if self.clocked else "host",
            "held_for_drivers_wall_s": self.held_s,
            "freed_at_sim_s": [round(t, 4) for t in self.freed_at],
            "behind_sim_s": 0.0 if self.clocked else self.lost_s,
        }


class TwinRobot:
    """The operator's view of the twin (same interface as the kinematic `SimRobot`): place on the boards at a
    plan placement (board poses from the configuration, plus an optional placement error unknown to it), lift."""

    def __init__(self, twin: Twin, placement_error: tuple[float, float] = (0.0, 0.0), seed: int = 0) -> None:
        self.twin = twin
        self.placement_error = placement_error
        self.rng = np.random.default_rng(seed)

    def place(self, other_foot, right_offset, left_offset, lifted: bool = False) -> None:
        from drivers.wbb.geometry import board_poses_for

        poses = board_poses_for(np.asarray(other_foot), np.asarray(right_offset), np.asarray(left_offset))
        s_xy, s_psi = self.placement_error
        if s_xy > 0 or s_psi > 0:
            poses = [p + np.r_[self.rng.normal(0, s_xy, 2), self.rng.normal(0, s_psi)] for p in poses]
        self.twin.place(poses, lifted)

    def lift(self) -> None:
        self.twin.lift()

    def board_load(self, board: int):
        return self.twin.board_load(board)
