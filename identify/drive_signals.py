"""Joint velocity/acceleration from a drive recording, with the torque and PWM through the same filter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.calibration_recording import DriveRecording
from identify.differentiation import derivatives, lowpass

CUTOFF_HZ = 12.0  # default low-pass cut-off [Hz] (`calibrate friction` / `pwm-gain` --cutoff-hz)


@dataclass
class DriveSignals:
    """Filtered signals: ω [rad/s], ω̇ [rad/s²], τ_j [N·m], PWM [%] (parallel filtering), and the filter's
    (cut-off, sample rate) [Hz], which the fits' standard errors need."""

    t: np.ndarray
    omega: np.ndarray
    omega_dot: np.ndarray
    tau: np.ndarray
    pwm: np.ndarray
    filtered: tuple[float, float]


def drive_signals(rec: DriveRecording, cutoff_hz: float | None = None) -> DriveSignals:
    """Zero-phase Butterworth on q, then central differences; τ and PWM see the same filter (CUTOFF_HZ unless
    given)."""
    cutoff_hz = CUTOFF_HZ if cutoff_hz is None else cutoff_hz
    _, w, wd = derivatives(rec.t, rec.q[:, None], cutoff_hz)
    rate = 1.0 / float(np.mean(np.diff(rec.t)))
    tau = lowpass(rec.tau[:, None], rate, cutoff_hz)[:, 0]
    pwm = lowpass(rec.pwm[:, None], rate, cutoff_hz)[:, 0]
    return DriveSignals(rec.t, w[:, 0], wd[:, 0], tau, pwm, (cutoff_hz, rate))
