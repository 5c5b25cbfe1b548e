"""Motors and transmissions of a robot, from the `[[actuation]]` groups of its description.

poise's one coupling convention (the F/T + PWM paper's): each group names joints, the motors that drive them and
Tᵀ; motor velocities are q̇_m = T q̇ and joint torques τ = Tᵀ τ_m (power balance), so τ_m = T⁻ᵀ τ and
q̇ = T⁻¹ q̇_m. (The iCub thesis writes the inverse map, ω_j = T_thesis ω_m: T = T_thesis⁻¹.) An uncoupled joint
is a group of one with Tᵀ = [[1]] (or its gear sign). identify/coupled.py and the F/T + PWM regression both use
the Transmission below.
```
[[actuation]]
label = "shoulder"
joints = ["r_shoulder_pitch", "r_shoulder_roll", "r_shoulder_yaw"]
motors = ["m0", "m1", "m2"]
transpose = [[1.0, -1.625, -1.625], [0.0, 1.625, 1.625], [0.0, 0.0, 1.625]]
```

Friction sign convention (poise's one convention, spec icub-pls.md §1; identify/friction.py uses the same):
f(q̇) is the torque a joint (or motor) must be *given* to overcome its friction, f(q̇) = c⁺·[q̇>0] − c⁻·[q̇<0] + v⁺·max(q̇,0) + v⁻·min(q̇,0), with
c⁺, c⁻, v⁺, v⁻ ≥ 0 for a dissipative joint (f has the sign of q̇); the regressor row is
[1(q̇>0), −1(q̇<0), max(q̇,0), min(q̇,0)] = [(sgn q̇)⁺, −(sgn q̇)⁻, q̇⁺, −q̇⁻], and f(0) = 0.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from robots.tree import RobotModel


@dataclass(frozen=True)
class Transmission:
    """Joints (indices into the model's coordinates) driven by motors through τ = Tᵀ τ_m, q̇_m = T q̇."""

    label: str
    joints: tuple[int, ...]
    motors: tuple[str, ...]
    matrix: tuple[tuple[float, ...], ...]  # Tᵀ (n_joints × n_motors), a tuple so groups are hashable

    @property
    def transpose(self) -> np.ndarray:
        """Tᵀ: joint torques τ = Tᵀ τ_m."""
        return np.array(self.matrix, dtype=float)

    @property
    def T(self) -> np.ndarray:
        """T: motor velocities q̇_m = T q̇."""
        return self.transpose.T

    @property
    def coupled(self) -> bool:
        return len(self.joints) > 1

    def motor_velocity(self, qd: np.ndarray) -> np.ndarray:
        """q̇_m = T q̇, row-wise for (K, n) joint velocities (or accelerations) of this group's joints."""
        return np.asarray(qd, float) @ self.transpose

    def joint_velocity(self, qd_m: np.ndarray) -> np.ndarray:
        """q̇ = T⁻¹ q̇_m, row-wise."""
        return np.linalg.solve(self.T, np.asarray(qd_m, float).T).T

    def joint_torque(self, tau_m: np.ndarray) -> np.ndarray:
        """τ = Tᵀ τ_m, row-wise."""
        return np.asarray(tau_m, float) @ self.T

    def motor_torque(self, tau: np.ndarray) -> np.ndarray:
        """τ_m = T⁻ᵀ τ, row-wise."""
        return np.linalg.solve(self.transpose, np.asarray(tau, float).T).T

    def joint_inertia(self, motor_inertia: np.ndarray) -> np.ndarray:
        """The motors' rotor inertias seen at the joints, Tᵀ diag(I_m) T."""
        return self.transpose @ np.diag(np.asarray(motor_inertia, float)) @ self.T


def parse_actuation(
    model: RobotModel | list[str], entries: list, source: str = "description"
) -> list[Transmission]:
    """Validate `[[actuation]]` entries against the model (or a list of joint names): known, distinct joints;
    a square invertible Tᵀ. Joint indices refer to the model's coordinates (or to the list)."""
    names = list(model) if isinstance(model, list) else model.joint_names
    out, seen = [], set()
    if not isinstance(entries, list):
        raise DataError(f"{source}: [[actuation]] must be an array of tables")
    for k, e in enumerate(entries):
        where = f"{source}: actuation group {e.get('label', k) if isinstance(e, dict) else k!r}"
        try:
            joints = [str(j) for j in e["joints"]]
            motors = tuple(str(m) for m in e["motors"])
            Tt = np.array(e["transpose"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: needs joints, motors and transpose ({exc})") from None
        unknown = [j for j in joints if j not in names]
        if unknown:
            raise DataError(f"{where}: unknown joint(s) {unknown}")
        if seen & set(joints):
            raise DataError(f"{where}: joint(s) {sorted(seen & set(joints))} already belong to another group")
        seen |= set(joints)
        n = len(joints)
        if len(motors) != n or Tt.shape != (n, n) or not np.all(np.isfinite(Tt)):
            raise DataError(f"{where}: transpose must be a finite {n}×{n} matrix for {n} motors")
        if abs(np.linalg.det(Tt)) < 1e-12:
            raise DataError(f"{where}: the transmission matrix is singular")
        idx = tuple(names.index(j) for j in joints)
        matrix = tuple(tuple(float(v) for v in r) for r in Tt)
        out.append(Transmission(str(e.get("label", f"group {k}")), idx, motors, matrix))
    return out


def description_path(model: RobotModel) -> Path:
    """The description file of a built-in robot (the model does not keep the TOML it came from)."""
    from robots.registry import BUILT_IN  # noqa: PLC0415 (the registry builds models)

    if model.name.lower() in BUILT_IN:
        return BUILT_IN[model.name.lower()]
    raise DataError(f"robot {model.name!r} is not built in: give its description file for the actuation")


def transmissions(model: RobotModel, description: str | Path | None = None) -> list[Transmission]:
    """The actuation groups of a robot's description (built-in robots need no path)."""
    path = Path(description) if description is not None else description_path(model)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"cannot read the actuation of {path}: {exc}") from None
    groups = parse_actuation(model, doc.get("actuation", []), str(path))
    if not groups:
        raise DataError(f"{path}: describes no motors ([[actuation]] groups)")
    return groups


def motor_velocities(groups: list[Transmission], qd: np.ndarray) -> np.ndarray:
    """q̇_m = T q̇ for every described motor, in group order: (K, n_motors)."""
    return np.concatenate([g.motor_velocity(qd[:, list(g.joints)]) for g in groups], axis=1)


def friction_rows(v: np.ndarray) -> np.ndarray:
    """The asymmetric friction regressor of velocities (K, n) → (K, n, 4): [1⁺, −1⁻, v⁺, v⁻] (module doc)."""
    return np.stack([(v > 0) * 1.0, -((v < 0) * 1.0), np.maximum(v, 0.0), np.minimum(v, 0.0)], axis=-1)


def friction_torque(v: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """f(v) for velocities (K, n) and per-axis parameters (n, 4) = [c⁺, c⁻, v⁺, v⁻]."""
    return np.einsum("kjf,jf->kj", friction_rows(v), phi)


@dataclass(frozen=True)
class FtPwmTruth:
    """The true non-inertial parameters: per actuation group, joint friction (n_j, 4), motor friction of
    coupled groups (n_m, 4), PWM gains (N·m per PWM unit, at the motor); the F/T offset (N, N·m)."""

    joint_friction: tuple[np.ndarray, ...]
    motor_friction: tuple[np.ndarray | None, ...]
    pwm_gain: tuple[np.ndarray, ...]
    ft_offset: np.ndarray
