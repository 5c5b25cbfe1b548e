"""Coupled joints (spec actuation.md §3): motor-wise friction identification through T, versus joint-wise.

Convention (poise's one, robots/actuation.py): motor velocities ω_m = T ω_j, joint torques τ_j = Tᵀ τ_m
(the thesis writes ω_j = T_thesis ω_m, i.e. T = T_thesis⁻¹); friction f is the torque a motor must add
(identify/friction.py). Motor-wise (adopted by the thesis): map the data to motor space (ω_m = T ω_j,
τ_m = T⁻ᵀ τ_j) and fit each motor with the single-joint regressor (2 unknowns each). Joint-wise: regress each
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
from robots.actuation import Transmission, parse_actuation

DATA = Path(__file__).resolve().parent.parent / "robots" / "data" / "icub" / "icub_torso_actuation.toml"


@dataclass(frozen=True)
class CoupledDrive:
    """A coupled group (its robots.actuation Transmission, joints in group order) and optional reference motor
    friction (Kc, Kv)."""

    transmission: Transmission
    joints: tuple[str, ...]
    reference: dict[str, tuple[float, float]]

    @property
    def label(self) -> str:
        return self.transmission.label

    @property
    def motors(self) -> tuple[str, ...]:
        return self.transmission.motors

    @property
    def T(self) -> np.ndarray:
        """ω_m = T ω_j."""
        return self.transmission.T


def load_coupled(path: str | Path = DATA) -> CoupledDrive:
    """Read a coupled-drive TOML (default: the iCub torso): one `[[actuation]]` group (joints, motors, Tᵀ) and
    optional `[reference_friction]`; DataError for malformed content."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"{path}: not a TOML coupled-drive file ({exc})") from None
    groups = doc.get("actuation")
    if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
        raise DataError(f"{path}: needs exactly one [[actuation]] group (joints, motors, transpose)")
    try:
        joints = [str(j) for j in groups[0]["joints"]]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: the [[actuation]] group needs joints ({exc!r})") from None
    (tr,) = parse_actuation(joints, groups, str(path))
    try:
        ref = {m: (float(v["Kc"]), float(v["Kv"])) for m, v in doc.get("reference_friction", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{path}: reference_friction entries need Kc and Kv ({exc!r})") from None
    return CoupledDrive(tr, tuple(joints), ref)


def to_motor_space(drive: CoupledDrive, omega_j: np.ndarray, tau_j: np.ndarray):
    """(ω_m, τ_m) = (T ω_j, T⁻ᵀ τ_j) row-wise for (N, n) arrays."""
    tr = drive.transmission
    return tr.motor_velocity(omega_j), tr.motor_torque(tau_j)


@dataclass
class CoupledComparison:
    """Motor-wise fits (one per motor) vs joint-wise cross-gain regression; rms on the fit and on validation."""

    motor_fits: dict[str, FrictionFit]
    joint_coeffs: (
        np.ndarray
    )  # (n joints, 2n) composite [Kc, Kv] per joint velocity (f_j, ≥ 0 on the diagonal)
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
    """Columns [sign ω_k, ω_k] per joint velocity k: joint-wise f_j = Σ_k (Kc_jk sign ω_k + Kv_jk ω_k)."""
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
    filtered: tuple[float, float] | None = None,
) -> CoupledComparison:
    """Fit motor-wise and joint-wise models on (ω_j, ω̇_j, τ_j) (N, n) and compare joint-torque residuals;
    `filtered`: (cut-off, rate) [Hz] of the signals' low-pass, for the motor fits' SEs and misfit test."""
    n = len(drive.joints)
    for a in (omega_j, omega_dot_j, tau_j):
        if a.ndim != 2 or a.shape != omega_j.shape or a.shape[1] != n or not np.all(np.isfinite(a)):
            raise DataError(
                f"coupled data must be finite (N, {n}) arrays for joints {', '.join(drive.joints)}"
            )
    tr = drive.transmission
    w_m, t_m = to_motor_space(drive, omega_j, tau_j)
    wd_m = tr.motor_velocity(omega_dot_j)
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
            filtered=filtered,
        )
        for i, m in enumerate(drive.motors)
    }
    # joint-wise, motors off: τ_j + (Tᵀ I_m T) ω̇_j = −f_j(ω) on the same samples (all motors moving)
    keep = np.all(np.abs(w_m) > speed_min, axis=1)
    J_inertia = tr.joint_inertia(I_m)
    y = tau_j + omega_dot_j @ J_inertia.T
    X = _joint_regressor(omega_j[keep])
    coeffs = np.linalg.lstsq(X, -y[keep], rcond=None)[0].T  # (n, 2n), f_j = X coeffs_jᵀ

    def predict_motor(w_j: np.ndarray) -> np.ndarray:
        wm = tr.motor_velocity(w_j)
        f_m = np.column_stack([fits[m].torque(wm[:, i]) for i, m in enumerate(drive.motors)])
        return -tr.joint_torque(f_m)  # y_j = −Tᵀ f_m

    def rms(pred, actual, mask):
        return float(np.sqrt(np.mean((pred[mask] - actual[mask]) ** 2)))

    w_v, wd_v, t_v = validation if validation is not None else (omega_j, omega_dot_j, tau_j)
    mask = np.all(np.abs(tr.motor_velocity(w_v)) > speed_min, axis=1)
    y_v = t_v + wd_v @ J_inertia.T
    return CoupledComparison(
        fits,
        coeffs,
        rms(predict_motor(w_v), y_v, mask),
        rms(-(_joint_regressor(w_v) @ coeffs.T), y_v, mask),
        2 * n,
        2 * n * n,
    )
