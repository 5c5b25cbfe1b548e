"""Physics of a servo in PWM control mode for the emulated Dynamixel bus: one joint of the robot driven by a
voltage (PWM) command through its gearbox, integrated by MuJoCo at 1 kHz in real time. Inside `at(t)` the clock
stands at t: the bus handles the packets of one transmission at the instant they arrived, as a servo's
controller does within microseconds, not at the moments its thread (slowed by the physics it integrates, or
waiting for the interpreter lock) gets round to each of them.

The link is the robot description's subtree beyond the joint (its URDF inertials, every other joint locked at
its held angle: a MuJoCo model with one hinge), under gravity. The drive is the emulator's *own* truth, not
poise's identification model: motor torque K·PWM, reflected rotor inertia (MuJoCo armature), viscous friction
incl. back-EMF (MuJoCo joint damping, integrated implicitly) and the Stribeck/Coulomb part applied each step as
a velocity-dependent generalised force with Karnopp stick–slip: at rest the joint sticks while the applied
torque stays inside the static band [−σs⁻, σs⁺], and a velocity reversal passes through rest. Friction f is the
torque the drive must add (poise's convention, identify/friction.py): ω > 0: f = Kc + Kv ω + (σs⁺ − Kc)
e^{−ω/v_s}; ω < 0: f = −[Kc − Kv ω + (σs⁻ − Kc) e^{ω/v_s}].
"""

from __future__ import annotations

import math
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from drivers.emulators.mujoco_arm import mujoco_from_urdf_text
from drivers.emulators.mujoco_twin import physical_truth
from formats.errors import DataError
from robots.tree import ParameterSet, RobotModel, rpy_matrix
from robots.urdf import matrix_rpy
from robots.urdf_write import model_to_urdf

PWM_FULL_SCALE = 885  # Goal PWM units at 100 % (X-series e-Manual: 0.113 % per unit)


@dataclass(frozen=True)
class ServoDriveTruth:
    """The emulated servo's true drive, joint side, SI: an XM430-W210-class servo (3.0 N·m stall at 12 V and
    100 % PWM → K = 3.4e-3 N·m per Goal PWM unit; 77 rpm no-load → back-EMF ≈ 0.37 N·m·s/rad, folded into Kv)."""

    kc: float = 0.10  # Coulomb, N·m
    kv: float = 0.35  # viscous incl. back-EMF, N·m·s/rad
    sigma_pos: float = 0.16  # static (breakaway) level for ω > 0, N·m
    sigma_neg: float = 0.18  # for ω < 0
    v_s: float = 0.2  # Stribeck velocity, rad/s
    k_pwm: float = 3.4e-3  # N·m per Goal PWM unit
    armature: float = 0.008  # rotor inertia reflected to the joint, kg·m²
    kt: float = 1.4  # N·m/A at the output, for Present Current only
    stick_band: float = 1e-6  # rad/s: |ω| below this is rest

    def friction(self, w: float) -> float:
        """f(ω), the torque the drive must add (viscous part included)."""
        return self.stribeck(w) + self.kv * w

    def stribeck(self, w: float) -> float:
        """The Coulomb + Stribeck part of f (MuJoCo's joint damping adds Kv ω)."""
        if w > 0:
            return self.kc + (self.sigma_pos - self.kc) * math.exp(-w / self.v_s)
        if w < 0:
            return -(self.kc + (self.sigma_neg - self.kc) * math.exp(w / self.v_s))
        return 0.0

    def k_pwm_pct(self) -> float:
        """The PWM gain in N·m per % of full scale (what `calibrate friction` reports)."""
        return self.k_pwm * PWM_FULL_SCALE / 100.0

    def params(self) -> dict[str, float]:
        return {"Kc": self.kc, "Kv": self.kv, "sigma+": self.sigma_pos, "sigma-": self.sigma_neg}


def one_joint_urdf(model: RobotModel, params: str | ParameterSet, joint: str, q_held: np.ndarray) -> str:
    """The robot's URDF with every joint but `joint` fixed at its held angle (origin rotated by it)."""
    root = ET.fromstring(model_to_urdf(model, params))
    for j in root.findall("joint"):
        name, kind = j.get("name"), j.get("type")
        if name == joint or kind not in ("revolute", "continuous", "prismatic"):
            continue
        q = float(q_held[model.joint_index(name)])
        origin = j.find("origin")
        xyz = np.array([float(v) for v in origin.get("xyz", "0 0 0").split()])
        R = rpy_matrix([float(v) for v in origin.get("rpy", "0 0 0").split()])
        ax = j.find("axis")
        axis = np.array([float(v) for v in (ax.get("xyz") if ax is not None else "1 0 0").split()])
        if kind == "prismatic":
            xyz = xyz + R @ axis * q
        else:
            R = R @ Rotation.from_rotvec(axis / np.linalg.norm(axis) * q).as_matrix()
        origin.set("xyz", " ".join(f"{v:.12g}" for v in xyz))
        origin.set("rpy", " ".join(f"{v:.12g}" for v in matrix_rpy(R)))
        j.set("type", "fixed")
        for tag in ("axis", "limit", "dynamics", "mimic"):
            for e in j.findall(tag):
                j.remove(e)
    return ET.tostring(root, encoding="unicode")


class PwmDrive:
    """One joint in PWM mode: `set_pwm` (Goal PWM units) and `state` advance the physics to now."""

    def __init__(
        self,
        model: RobotModel,
        joint: str,
        q_held: np.ndarray,
        truth: ServoDriveTruth = ServoDriveTruth(),
        params: str | None = None,
        dt: float = 1e-3,
    ) -> None:
        import mujoco

        if joint not in model.joint_names:
            raise DataError(f"PWM drive: {model.name} has no joint {joint!r}")
        self.truth, self.dt = truth, dt
        # inertias made physically consistent as the twin simulates them (MuJoCo refuses a triangle violation)
        ps = physical_truth(model, model.parameter_set(params or next(iter(model.params))))
        m = mujoco_from_urdf_text(one_joint_urdf(model, ps, joint, np.asarray(q_held, float)))
        if m.nv != 1:
            raise DataError(f"PWM drive: expected one free joint, MuJoCo sees {m.nv}")
        m.opt.timestep = dt
        m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER  # joint damping integrated implicitly
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        m.dof_damping[0] = truth.kv
        m.dof_armature[0] = truth.armature
        m.dof_frictionloss[0] = 0.0
        self._mj, self.m, self.d = mujoco, m, mujoco.MjData(m)
        self.pwm = 0
        self.torque = False
        self.active = False
        self._instant: float | None = None  # inside `at`: the time everything happens at
        self._t = time.monotonic()
        self.lock = threading.RLock()
        self.reset(float(q_held[model.joint_index(joint)]))

    def now(self) -> float:
        """Monotonic seconds: the instant of `at`, else the wall clock."""
        return time.monotonic() if self._instant is None else self._instant

    @contextmanager
    def at(self, t: float) -> Iterator[None]:
        """Everything inside happens at monotonic time t (one transmission's packets, handled at once)."""
        with self.lock:
            self._instant = t
            try:
                yield
            finally:
                self._instant = None

    def reset(self, q: float) -> None:
        """The joint at rest at q, the clock at now."""
        with self.lock:
            self.d.qpos[0], self.d.qvel[0] = q, 0.0
            self._mj.mj_forward(self.m, self.d)
            self._t = self.now()

    def set_active(self, on: bool, q: float | None = None) -> None:
        """Physics runs while the servo is in PWM mode (position mode: the position plant owns the joint)."""
        with self.lock:
            if on and not self.active:
                self.reset(self.d.qpos[0] if q is None else q)
            self.advance()
            self.active = on

    def set_torque(self, on: bool) -> None:
        with self.lock:
            self.advance()
            self.torque = on

    def set_pwm(self, units: int) -> None:
        with self.lock:
            self.advance()
            self.pwm = int(units)

    def state(self) -> tuple[float, float, float]:
        """(q rad, ω rad/s, t s on the monotonic clock): the physics advanced to the last whole step before now."""
        with self.lock:
            self.advance()
            return float(self.d.qpos[0]), float(self.d.qvel[0]), self._t

    def drive_torque(self) -> float:
        return self.truth.k_pwm * self.pwm if self.torque else 0.0

    def advance(self) -> None:
        now = self.now()
        if not self.active:
            self._t = now
            return
        n = max(0, int((now - self._t) / self.dt))
        for _ in range(n):
            self._step()
        self._t += n * self.dt

    def _step(self) -> None:
        mj, m, d, tr = self._mj, self.m, self.d, self.truth
        w = float(d.qvel[0])
        if abs(w) < tr.stick_band:
            d.qvel[0] = w = 0.0
        mj.mj_step1(m, d)  # positions, velocities, gravity (qfrc_bias) at the current state
        drive = self.drive_torque()
        net = drive - float(d.qfrc_bias[0])  # everything but friction
        if w == 0.0:
            if -tr.sigma_neg <= net <= tr.sigma_pos:
                f = net  # stick: friction takes the whole applied torque
            else:
                f = tr.sigma_pos if net > 0 else -tr.sigma_neg  # breakaway
        else:
            f = tr.stribeck(w)  # + Kv ω from the joint damping
        d.qfrc_applied[0] = drive - f
        mj.mj_step2(m, d)
        if w != 0.0 and d.qvel[0] * w < 0.0:
            d.qvel[0] = 0.0  # a reversal passes through rest: the stick test decides next step
