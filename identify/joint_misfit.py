"""`identify dynamic`'s per-joint misfit check of a torque fit: its residual against what honest recordings leave
(the efforts' noise in the fit's band, `band_noise`; the encoders' reading of the angles through the fit,
`honest_residuals`), judged at the recordings' own cut-off, each joint with the recordings it is in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError
from identify.dynamic import DynamicEstimator, default_cutoff
from identify.recording_checks import angle_noise, band_noise, encoder_steps, honest_residuals, misfit_joints


@dataclass
class JointMisfit:
    """A joint the fit does not follow (`joint_misfits`), in the fit's unit (N·m; N on a prismatic joint; motor
    currents fitted as the torques their constants make)."""

    joint: str
    share: float  # the residual RMS beyond the noise, over the measured effort's SD (beyond MISFIT_WARN)
    rmse_nm: float  # the fit's residual RMS
    noise_nm: float  # what honest recordings leave (`band_noise`, `honest_residuals` in quadrature)
    measured_sd_nm: float  # the spread (SD) of the joint's measured effort on the fitted rows
    files: list[str]  # the recordings it is in: those whose own fit leaves it, or all when none does
    alone: bool  # a recording's own fit leaves it (True with one recording); False: the recordings disagree
    cutoff_hz: float  # the cut-off it was judged at

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Honest:
    """One recording's noise terms at the judged cut-off: its rate (Hz), its efforts' noise in band (`band_noise`),
    its encoders' steps (`encoder_steps`) and their noise beyond them (`angle_noise`)."""

    rate_hz: float
    band: np.ndarray
    steps: np.ndarray
    sigma: np.ndarray


def joint_misfits(
    est: DynamicEstimator,
    recs: Sequence[DynamicRecording],
    joint_names: Sequence[str],
    estimator: Callable[[float], DynamicEstimator],
    files: Sequence[str],
    stream_angles: Callable[[int], np.ndarray | None],
) -> list[JointMisfit]:
    """`misfit_joints` of a torque fit `est` of `recs` (named `files`, one entry per fitted recording): with several,
    each joint with the recordings whose own fit leaves it (`alone`), or all of them when none does (the recordings
    disagree with each other). A fit above the recordings' own cut-off (`default_cutoff`, their motion's band) is
    judged by a fit at that one (`estimator(cutoff_hz)` makes it): above it the encoders' steps, differentiated
    twice, bias the fit itself (errors in variables: the Coulomb column's sign wherever a joint creeps), which no
    noise band tells from a wrong joint map, and the motion has nothing there that a map error would not show below.
    The encoders' steps are read from the recorded angles, or where the recording interpolated them between ticks
    from `stream_angles(k)`: recording k's streamed angles (ticks, nq) as the run measured them (None: unknown)."""
    if est.fit_.measured_sd is None:
        return []
    try:
        own = min(default_cutoff(r) for r in recs)
    except DataError:
        own = est.cutoff_
    if est.cutoff_ > own * (1 + 1e-9):
        est = estimator(own)
        try:
            est.fit(list(recs))
        except DataError:
            return []  # not fittable at the recordings' own cut-off (too short): the check is left out
    cut = est.cutoff_
    honest = [_honest(r, cut, lambda k=k: stream_angles(k)) for k, r in enumerate(recs)]
    out = _misfit_of(est, recs, joint_names, honest)
    alone: dict[str, list[str]] = {}
    if out and len(recs) > 1:
        for r, f, h in zip(recs, files, honest, strict=True):
            one = estimator(cut)
            try:
                one.fit([r])
            except DataError:  # too short or too poor alone to say
                continue
            for m in _misfit_of(one, [r], joint_names, [h]):
                alone.setdefault(m["joint"], []).append(f)
    return [
        JointMisfit(**m, files=alone.get(m["joint"]) or list(files), alone=len(recs) == 1 or m["joint"] in alone,
                    cutoff_hz=float(cut))
        for m in out
    ]  # fmt: skip


def _honest(
    rec: DynamicRecording, cutoff_hz: float, stream_angles: Callable[[], np.ndarray | None]
) -> _Honest:
    """A recording's `_Honest` terms at cutoff_hz; its encoders' steps from `stream_angles()` (the run's measured
    ticks) where the recorded angles sit on none (interpolated between ticks)."""
    rate = 1 / float(np.median(np.diff(rec.t)))
    steps = encoder_steps(rec.q)
    if not np.all(steps > 0):
        raw = stream_angles()
        if raw is not None and len(raw) > 1:
            steps = np.where(steps > 0, steps, encoder_steps(raw))
    return _Honest(
        rate, band_noise(rec.tau, rate, cutoff_hz), steps, angle_noise(rec.q, rate, cutoff_hz, steps)
    )


def _misfit_of(
    est: DynamicEstimator,
    recs: Sequence[DynamicRecording],
    joint_names: Sequence[str],
    honest: Sequence[_Honest],
) -> list[dict]:
    """`misfit_joints` of a torque fit: its residual against what honest recordings leave (`honest`, each
    recording's), the efforts' noise in the fit's band and the encoders' reading of the angles through the fit."""
    fit = est.fit_
    if fit.measured_sd is None:
        return []

    systems, keeps = zip(*(est.fit_rows(r) for r in recs), strict=True)
    weights = 1 / np.maximum(fit.sigma, 1e-9) if est.weighted else np.ones(len(fit.sigma))
    through = honest_residuals(systems, [r.q for r in recs], [h.rate_hz for h in honest], est.cutoff_,
                               [h.steps for h in honest], [h.sigma for h in honest], np.nan_to_num(fit.values),
                               weights, keeps, refit=not fit.instruments)  # fmt: skip
    sq = [(h.band**2 + t**2) * len(r.t) for r, h, t in zip(recs, honest, through, strict=True)]
    noise = np.sqrt(np.sum(sq, axis=0) / sum(len(r.t) for r in recs))
    return misfit_joints(joint_names, fit.rmse, fit.measured_sd, noise)
