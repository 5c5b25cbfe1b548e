"""Link angular and linear acceleration from distributed accelerometers and one gyroscope (spec actuation.md §6).

Sensor i at r_i on the link (link frame, sensor axes aligned with it after rotating by R_i) reads the proper
acceleration α_Si = α_L + ω̇ × r_i + ω × (ω × r_i), so per sensor
    [(r_i)^, −I₃] [ω̇; α_L] = −α_Si + (ω^)² r_i,
with ω from the gyro. Rank 6 needs ≥ 3 non-collinear accelerometers; C does not change, so C⁺ is precomputed.
Estimators: 1 = pseudo-inverse; 3 = Tikhonov towards the previous estimate, x = (CᵀC + λI)⁻¹(Cᵀb + λ x_{k−1});
4 = an extra row block √λ [I₃ 0] x = √λ (ω_k − ω_{k−1})/Δt pulling ω̇ towards the gyro's numerical derivative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.errors import DataError, IdentifiabilityError


def hat(v: np.ndarray) -> np.ndarray:
    """Skew matrix v^ with v^ u = v × u."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def design(positions: np.ndarray) -> np.ndarray:
    """Stacked C (3S × 6) for sensor positions (S, 3) in the link frame; IdentifiabilityError below rank 6."""
    r = np.asarray(positions, float)
    if r.ndim != 2 or r.shape[1] != 3 or not np.all(np.isfinite(r)):
        raise DataError(f"sensor positions must be a finite (S, 3) array, got shape {r.shape}")
    C = np.vstack([np.hstack([hat(ri), -np.eye(3)]) for ri in r])
    if np.linalg.matrix_rank(C, tol=1e-9 * max(1.0, np.abs(C).max())) < 6:
        raise IdentifiabilityError(
            f"{len(r)} accelerometer(s) at these positions give rank < 6: need ≥ 3 non-collinear sensors"
        )
    return C


def noise_gain(positions: np.ndarray) -> float:
    """Spectral norm of C⁺: worst-case amplification of accelerometer noise into [ω̇; α_L]."""
    return float(np.linalg.norm(np.linalg.pinv(design(positions)), 2))


@dataclass
class LinkAcceleration:
    """Estimates per sample: ω̇ (N, 3) [rad/s²] and α_L (N, 3) [m/s², proper acceleration of the link origin]."""

    omega_dot: np.ndarray
    alpha: np.ndarray
    estimator: str
    lam: float


def estimate(
    positions: np.ndarray,
    acc: np.ndarray,
    gyro: np.ndarray,
    dt: float,
    estimator: str = "pinv",
    lam: float = 0.01,
    rotations: np.ndarray | None = None,
) -> LinkAcceleration:
    """[ω̇; α_L] per sample from accelerometers acc (N, S, 3) and gyro (N, 3); estimator pinv|tikhonov|gyro-rate."""
    acc, gyro = np.asarray(acc, float), np.asarray(gyro, float)
    S = len(positions)
    if acc.ndim != 3 or acc.shape[1:] != (S, 3) or gyro.shape != (len(acc), 3):
        raise DataError(f"need accelerations (N, {S}, 3) and gyro (N, 3); got {acc.shape} and {gyro.shape}")
    if not (np.all(np.isfinite(acc)) and np.all(np.isfinite(gyro))):
        raise DataError("link-acceleration data contain non-finite values")
    if estimator not in ("pinv", "tikhonov", "gyro-rate"):
        raise DataError(f"unknown estimator {estimator!r} (pinv, tikhonov, gyro-rate)")
    if not (np.isfinite(lam) and lam >= 0):
        raise DataError(f"λ must be finite and ≥ 0, got {lam}")
    if rotations is not None:  # sensor frames → link frame
        acc = np.einsum("sij,nsj->nsi", np.asarray(rotations, float), acc)
    r = np.asarray(positions, float)
    C = design(r)
    # b_i = −α_Si + ω × (ω × r_i), vectorised over samples
    wxr = np.cross(gyro[:, None, :], r[None, :, :])
    b = (-acc + np.cross(gyro[:, None, :], wxr)).reshape(len(acc), -1)
    if estimator == "pinv":
        x = b @ np.linalg.pinv(C).T
    elif estimator == "tikhonov":
        A = np.linalg.inv(C.T @ C + lam * np.eye(6))
        Ctb = b @ C
        x = np.empty((len(b), 6))
        prev = np.linalg.lstsq(C, b[0], rcond=None)[0]
        for k in range(len(b)):
            prev = A @ (Ctb[k] + lam * prev)
            x[k] = prev
    else:
        E = np.hstack([np.eye(3), np.zeros((3, 3))])
        Ca = np.vstack([C, np.sqrt(lam) * E])
        P = np.linalg.pinv(Ca)
        wd_num = np.vstack([np.zeros((1, 3)), np.diff(gyro, axis=0) / dt])
        x = np.hstack([b, np.sqrt(lam) * wd_num]) @ P.T
        x[0] = np.linalg.lstsq(C, b[0], rcond=None)[0]
    return LinkAcceleration(x[:, :3], x[:, 3:], estimator, lam)
