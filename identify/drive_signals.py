"""Joint velocity/acceleration from a drive recording, with the torque and PWM through the same filter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.calibration_recording import DriveRecording
from identify.differentiation import derivatives, lowpass

CUTOFF_HZ = 12.0  # default low-pass cut-off [Hz] (`calibrate friction` / `pwm-gain` --cutoff-hz)
# cut-off of the velocity the friction model is evaluated on, as a share of the sample rate (40 Hz at 100 Hz):
# nearly unfiltered, so that a low --cutoff-hz does not smear the Stribeck dip's speeds (measured on the
# simulated recommended plan at --cutoff-hz 2–12: σs± within 1.5 %; at the torque's own 2 Hz, 200 % off)
MODEL_VELOCITY_SHARE = 0.4


@dataclass
class Unfiltered:
    """What parallel filtering needs from before the low-pass: ω [rad/s] nearly unfiltered (q differentiated at
    MODEL_VELOCITY_SHARE of the rate, or at the cut-off if higher), τ_j [N·m] and PWM [%] as recorded."""

    omega: np.ndarray
    tau: np.ndarray
    pwm: np.ndarray


@dataclass
class DriveSignals:
    """Filtered signals: ω [rad/s], ω̇ [rad/s²], τ_j [N·m], PWM [%] (parallel filtering), the filter's
    (cut-off, sample rate) [Hz], which the fits' standard errors need, and the unfiltered signals the friction
    fit filters its model's columns from."""

    t: np.ndarray
    omega: np.ndarray
    omega_dot: np.ndarray
    tau: np.ndarray
    pwm: np.ndarray
    filtered: tuple[float, float]
    raw: Unfiltered | None = None


def drive_signals(rec: DriveRecording, cutoff_hz: float | None = None) -> DriveSignals:
    """Zero-phase Butterworth on q, then central differences; τ and PWM see the same filter (CUTOFF_HZ unless
    given)."""
    cutoff_hz = CUTOFF_HZ if cutoff_hz is None else cutoff_hz
    _, w, wd = derivatives(rec.t, rec.q[:, None], cutoff_hz)
    rate = 1.0 / float(np.mean(np.diff(rec.t)))
    tau = lowpass(rec.tau[:, None], rate, cutoff_hz)[:, 0]
    pwm = lowpass(rec.pwm[:, None], rate, cutoff_hz)[:, 0]
    _, w_model, _ = derivatives(rec.t, rec.q[:, None], max(cutoff_hz, MODEL_VELOCITY_SHARE * rate))
    raw = Unfiltered(w_model[:, 0], np.asarray(rec.tau, float), np.asarray(rec.pwm, float))
    return DriveSignals(rec.t, w[:, 0], wd[:, 0], tau, pwm, (cutoff_hz, rate), raw)
