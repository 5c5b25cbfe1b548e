"""Joint velocity/acceleration from a drive recording, with the torque and PWM through the same filter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.calibration_recording import DriveRecording
from identify.differentiation import derivatives, lowpass


@dataclass
class DriveSignals:
    """Filtered signals: ω [rad/s], ω̇ [rad/s²], τ_j [N·m], PWM [%] (parallel filtering)."""

    t: np.ndarray
    omega: np.ndarray
    omega_dot: np.ndarray
    tau: np.ndarray
    pwm: np.ndarray


def drive_signals(rec: DriveRecording, cutoff_hz: float = 12.0) -> DriveSignals:
    """Zero-phase Butterworth on q, then central differences; τ and PWM see the same filter."""
    _, w, wd = derivatives(rec.t, rec.q[:, None], cutoff_hz)
    rate = 1.0 / float(np.mean(np.diff(rec.t)))
    tau = lowpass(rec.tau[:, None], rate, cutoff_hz)[:, 0]
    pwm = lowpass(rec.pwm[:, None], rate, cutoff_hz)[:, 0]
    return DriveSignals(rec.t, w[:, 0], wd[:, 0], tau, pwm)
