"""Coupled joints (spec actuation.md §3): motor-wise friction identification through T, versus joint-wise.

ω_j = T ω_m and τ_j = T⁻ᵀ τ_m. Motor-wise (adopted by the thesis): map the data to motor space (ω_m = T⁻¹ ω_j,
τ_m = Tᵀ τ_j) and fit each motor with the single-joint regressor (2 unknowns each). Joint-wise: regress each
joint torque on the Coulomb/viscous terms of all joint velocities (cross gains, 6 unknowns per joint); the true
motor Coulomb terms switch with the signs of motor velocities, which joint-velocity signs cannot express.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from identify.friction import FrictionFit, fit_friction, regressor

DATA = Path(__file__).resolve().parent.parent / "robots" / "data" / "icub" / "icub_torso_actuation.toml"


@dataclass(frozen=True)
class CoupledDrive:
    """A coupled group: joints, motors, T (ω_j = T ω_m) and optional reference motor friction (Kc, Kv)."""

    label: str
    joints: tuple[str, ...]
    motors: tuple[str, ...]
    T: np.ndarray
    reference: dict[str, tuple[float, float]]

    @property
    def T_inv(self) -> np.ndarray:
        return np.linalg.inv(self.T)


def load_coupled(path: str | Path = DATA) -> CoupledDrive:
    """Read a coupled-drive TOML (default: the iCub torso); DataError for malformed content."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"{path}: not a TOML coupled-drive file ({exc})") from None
    try:
        T = np.array(doc["T"], dtype=float)
        joints, motors = tuple(doc["joints"]), tuple(doc["motors"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: needs joints, motors and T ({exc!r})") from None
    n = len(joints)
    if T.shape != (n, n) or len(motors) != n or not np.all(np.isfinite(T)) or abs(np.linalg.det(T)) < 1e-12:
        raise DataError(f"{path}: T must be a finite invertible {n}×{n} matrix")
    ref = {m: (float(v["Kc"]), float(v["Kv"])) for m, v in doc.get("reference_friction", {}).items()}
    return CoupledDrive(str(doc.get("label", "coupled")), joints, motors, T, ref)


def to_motor_space(drive: CoupledDrive, omega_j: np.ndarray, tau_j: np.ndarray):
    """(ω_m, τ_m) = (T⁻¹ ω_j, Tᵀ τ_j) row-wise for (N, n) arrays."""
    return omega_j @ drive.T_inv.T, tau_j @ drive.T


@dataclass
class CoupledComparison:
    """Motor-wise fits (one per motor) vs joint-wise cross-gain regression; rms on the fit and on validation."""

    motor_fits: dict[str, FrictionFit]
    joint_coeffs: np.ndarray  # (n joints, 2n) composite [Kc, Kv] per joint velocity
    rms_motor_wise: float  # N·m, joint-torque prediction
    rms_joint_wise: float
    unknowns_motor_wise: int
    unknowns_joint_wise: int

    def as_dict(self) -> dict:
        return {
            "motor_wise": {m: f.as_dict() for m, f in self.motor_fits.items()},
            "joint_wise_coefficients": self.joint_coeffs.tolist(),
            "rms_motor_wise_Nm": self.rms_motor_wise,
            "rms_joint_wise_Nm": self.rms_joint_wise,
            "unknowns": {"motor_wise": self.unknowns_motor_wise, "joint_wise": self.unknowns_joint_wise},
        }


def _joint_regressor(omega_j: np.ndarray) -> np.ndarray:
    return np.hstack([regressor("coulomb-viscous", omega_j[:, k]) for k in range(omega_j.shape[1])])


def compare(
    drive: CoupledDrive,
    omega_j: np.ndarray,
    omega_dot_j: np.ndarray,
    tau_j: np.ndarray,
    motor_inertia: np.ndarray,
    speed_min: float = 0.05,
    accel_max: float | None = None,
    validation: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> CoupledComparison:
    """Fit motor-wise and joint-wise models on (ω_j, ω̇_j, τ_j) (N, n) and compare joint-torque residuals."""
    n = len(drive.joints)
    for a in (omega_j, omega_dot_j, tau_j):
        if a.ndim != 2 or a.shape != omega_j.shape or a.shape[1] != n or not np.all(np.isfinite(a)):
            raise DataError(
                f"coupled data must be finite (N, {n}) arrays for joints {', '.join(drive.joints)}"
            )
    w_m, t_m = to_motor_space(drive, omega_j, tau_j)
    wd_m = omega_dot_j @ drive.T_inv.T
    I_m = np.asarray(motor_inertia, float)
    fits = {
        m: fit_friction(
            w_m[:, i],
            wd_m[:, i],
            t_m[:, i],
            float(I_m[i]),
            "coulomb-viscous",
            speed_min=speed_min,
            accel_max=accel_max,
        )
        for i, m in enumerate(drive.motors)
    }
    # joint-wise: y_j = τ_j + (T⁻ᵀ I_m T⁻¹) ω̇_j on the same samples (all motors moving)
    keep = np.all(np.abs(w_m) > speed_min, axis=1)
    J_inertia = drive.T_inv.T @ np.diag(I_m) @ drive.T_inv
    y = tau_j + omega_dot_j @ J_inertia.T
    X = _joint_regressor(omega_j[keep])
    coeffs = np.linalg.lstsq(X, y[keep], rcond=None)[0].T  # (n, 2n)

    def predict_motor(w_j: np.ndarray) -> np.ndarray:
        wm = w_j @ drive.T_inv.T
        tf_m = np.column_stack([fits[m].torque(wm[:, i]) for i, m in enumerate(drive.motors)])
        return tf_m @ drive.T_inv  # τ_j = T⁻ᵀ τ_m, row-wise

    def rms(pred, actual, mask):
        return float(np.sqrt(np.mean((pred[mask] - actual[mask]) ** 2)))

    w_v, wd_v, t_v = validation if validation is not None else (omega_j, omega_dot_j, tau_j)
    mask = np.all(np.abs(w_v @ drive.T_inv.T) > speed_min, axis=1)
    y_v = t_v + wd_v @ J_inertia.T
    return CoupledComparison(
        fits,
        coeffs,
        rms(predict_motor(w_v), y_v, mask),
        rms(_joint_regressor(w_v) @ coeffs.T, y_v, mask),
        2 * n,
        2 * n * n,
    )
