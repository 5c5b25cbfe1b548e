"""Checks a recording must pass to be a standing robot's, shared by static and dynamic identification: joint angles
within the robot's limits, centres of pressure within the soles' support polygon, a board wrench in N and N·m that
carries the robot's weight, and the other sole where the recording's motion class puts it. Each is one
implementation, with its tolerances here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import shapely

from robots.base_params import moments_about
from robots.dynamics import G, zmp_of
from robots.stance import flat_residual, foot_corners, other_pose, other_site
from robots.tree import ParameterSet, RobotModel

# beyond a joint's limits by more than the larger of this and this share of its range, a recorded value is not the
# robot's: rad for revolute joints, m for prismatic ones
LIMIT_SLACK = {"revolute": 0.2, "prismatic": 0.02}
LIMIT_SLACK_SHARE = 0.1
# a board CoP this far outside the soles' polygon (m) in more than this share of samples is not the recorded robot
# standing on those soles: the wrong base sole, another frame. Honest recordings stay inside (simulated: 22 mm in at
# least in single support, 42 mm in double; a twin run 52.6 mm); the other foot's sole named as base puts it up to
# 81 mm out (TUlip's stored double-support plan).
COP_OUTSIDE_TOL_M = 0.02
COP_OUTSIDE_SHARE = 0.1
# mean Fz over the guessed total weight m·g: the guess is the description's (a ±50 % error is a wrong guess, a
# factor g a force in kgf)
WEIGHT_RATIO = (0.5, 1.5)
# the moments' median lever |M|/Fz over the soles' extent beyond this: moments in N·mm, not N·m
LEVER_FACTOR = 10.0
# double support: the other sole stays where it is, judged about its median (height, tilt, x, y, yaw): a constant
# error in q (encoder offsets, the description's geometry) moves it by about a constant. Within these in all but
# COP_OUTSIDE_SHARE of samples. Measured (p90 of the samples): a twin run 0.48 mm, 0.20°, 1.6 mm / 0.13°; random
# offsets of σ 2° on TUlip's 12 joints (worst of 20 draws) 17 mm, 2.5°, 34 mm / 1.7°
SOLE_Z_TOL_M = 0.03
SOLE_TILT_TOL_DEG = 5.0
SOLE_SHIFT_TOL_M = 0.05
SOLE_TURN_TOL_DEG = 5.0
# the other sole's median height (m) and tilt (°) on the ground: beyond them it is lifted (single support) or the
# angles are not the robot's. Measured: σ 2° offsets put it up to 28 mm / 15° off; the stored single-support plan
# lifts it by 122–146 mm
SOLE_GROUND_M = 0.05
SOLE_GROUND_TILT_DEG = 20.0
# samples whose Fz is below this share of the guessed weight have no CoP to judge: left out of the lever and CoP checks
LOADED_SHARE = 0.1
MAX_CHECKED = 2000  # samples the geometric checks look at, evenly spread (a long recording's are alike)
# joint efforts' RMS over those the guessed parameters predict on the recorded motion (rigid bodies, no friction):
# beyond EFFORT_WARN× (or 1/EFFORT_WARN×) a warning, beyond EFFORT_REFUSE× a refusal. Honest recordings measured
# 0.96–1.3× (twins of the description), 11× (iCub twin at viscous 12 N·m·s/rad, Coulomb 5 N·m), 0.039× (a description
# whose masses are 0.04× the robot's); a unit is 1000× (mN·m, N·mm, mA) or 1/30–1/100× (a missing torque constant)
EFFORT_WARN = 10.0
EFFORT_REFUSE = 30.0


def limits_problem(
    model: RobotModel, q: np.ndarray, column: str = "q:", degrees_declared: bool = False
) -> str | None:
    """Where recorded joint values (K, nq) reach beyond a joint's limits by more than its slack (LIMIT_SLACK, or
    LIMIT_SLACK_SHARE of its range): the first such joint named, None if none. Degrees written as radians and
    another robot's joints reach far beyond them."""
    prismatic = np.array([model.joints[c].type == "prismatic" for c in model.coordinates])
    span = model.upper - model.lower
    least = np.where(prismatic, LIMIT_SLACK["prismatic"], LIMIT_SLACK["revolute"])
    slack = np.maximum(least, LIMIT_SLACK_SHARE * np.where(np.isfinite(span), span, 0.0))
    q = np.atleast_2d(q)
    low, high = q.min(axis=0), q.max(axis=0)
    beyond = np.maximum(model.lower - low, high - model.upper) - slack
    if not np.any(beyond > 0):
        return None
    j = int(np.argmax(beyond))
    unit = "m" if prismatic[j] else "rad"
    hint = "" if prismatic[j] or degrees_declared else "; angles in degrees? declare '# angle_unit: deg'"
    return (f"{column}{model.joint_names[j]} spans [{low[j]:.4g}, {high[j]:.4g}] {unit}, beyond the joint's limits "
            f"[{model.lower[j]:.4g}, {model.upper[j]:.4g}] {unit} by more than {slack[j]:.2g} {unit}{hint}")  # fmt: skip


def support_corners(
    model: RobotModel, q: np.ndarray, base: str, geometry: str | ParameterSet, single: bool = False
) -> np.ndarray:
    """x-y corners (K, c, 2) of the soles the robot stands on at postures q (K, nq), base frame (m): both soles'
    contact rectangles, or with `single` (single support) the base sole's alone."""
    corners = foot_corners(model, np.atleast_2d(q), geometry, base)
    sites = [model.base_site(base).name] if single else list(corners)
    return np.concatenate([corners[s] for s in sites], axis=-2)


def support_margins(
    model: RobotModel,
    q: np.ndarray,
    cop: np.ndarray,
    base: str,
    geometry: str | ParameterSet,
    single: bool = False,
) -> np.ndarray:
    """Signed distance (m, positive inside) of each CoP (K, 2) to the support polygon at its posture (K, nq): the
    convex hull of the soles' corners (`support_corners`). No standing robot presses outside it."""
    pts = support_corners(model, q, base, geometry, single)  # (K, c, 2)
    k, c = pts.shape[:2]
    hulls = shapely.convex_hull(shapely.multipoints(pts.reshape(-1, 2), indices=np.repeat(np.arange(k), c)))
    cop = shapely.points(np.atleast_2d(np.asarray(cop, dtype=float)))
    d = shapely.distance(shapely.boundary(hulls), cop)
    return np.where(shapely.contains(hulls, cop), d, -d)


def _spread(n: int) -> np.ndarray:
    """At most MAX_CHECKED sample indices, evenly spread over n."""
    return np.unique(np.linspace(0, n - 1, min(n, MAX_CHECKED)).round().astype(int))


def board_cop(wrench: np.ndarray, moment_z: float = 0.0) -> np.ndarray:
    """The CoP (K, 2) on the soles' plane (z = 0 of the base frame, m) of board wrenches (K, 6) whose moments are
    taken about (0, 0, moment_z): −My/Fz, Mx/Fz about the origin."""
    about_origin = moments_about(np.asarray(wrench, dtype=float).T, -moment_z).T
    with np.errstate(divide="ignore", invalid="ignore"):  # unloaded samples: `loaded` leaves them out
        return zmp_of(about_origin)


def loaded(model: RobotModel, wrench: np.ndarray, guess: str | ParameterSet) -> np.ndarray:
    """The samples (bool, K) whose Fz carries at least LOADED_SHARE of the guessed weight: only these have a CoP
    (the robot lifted off the boards, or their first samples, have none)."""
    return wrench[:, 2] >= LOADED_SHARE * model.parameter_set(guess).total_mass * G


def weight_problem(model: RobotModel, wrench: np.ndarray, guess: str | ParameterSet) -> str | None:
    """The boards carry the robot's weight: mean Fz against the guessed m·g (WEIGHT_RATIO), named with the likely
    unit when it is far off; None when plausible."""
    ps = model.parameter_set(guess)
    weight = ps.total_mass * G
    fz = float(np.mean(wrench[:, 2]))
    ratio = fz / weight
    if WEIGHT_RATIO[0] <= ratio <= WEIGHT_RATIO[1]:
        return None
    hint = (
        "forces in kgf (kg) rather than N?"
        if abs(ratio * G - 1) < 0.5
        else "forces in another unit, or another robot?"
    )
    return (f"fz_n averages {fz:.4g} N, {ratio:.3g}× the weight of {model.name!r} ({ps.total_mass:.4g} kg × g = "
            f"{weight:.4g} N, {ps.name!r}): {hint}")  # fmt: skip


def lever_problem(
    model: RobotModel,
    q: np.ndarray,
    wrench: np.ndarray,
    base: str,
    geometry: str | ParameterSet,
    moment_z: float,
) -> str | None:
    """The moments' lever |(Mx, My)|/Fz about the soles' plane (median) against the soles' extent (the farthest
    corner from the base origin): LEVER_FACTOR beyond it, the moments are in N·mm; None otherwise."""
    idx = _spread(len(q))
    extent = float(np.max(np.linalg.norm(support_corners(model, q[idx], base, geometry), axis=-1)))
    lever = float(np.nanmedian(np.linalg.norm(board_cop(wrench[idx], moment_z), axis=1)))
    if lever <= LEVER_FACTOR * extent:
        return None
    return (f"the moments' lever |M|/Fz is {lever * 1000:.4g} mm (median), {lever / extent:.0f}× the soles' extent "
            f"{extent * 1000:.0f} mm: moments in N·mm rather than N·m?")  # fmt: skip


def cop_problem(
    model: RobotModel,
    q: np.ndarray,
    cop: np.ndarray,
    base: str,
    geometry: str | ParameterSet,
    single: bool,
) -> str | None:
    """Board CoPs outside the soles' polygon (`support_margins`) by more than COP_OUTSIDE_TOL_M in more than
    COP_OUTSIDE_SHARE of the samples: the wrench is not this robot's on these soles; None otherwise."""
    idx = _spread(len(q))
    margins = support_margins(model, q[idx], cop[idx], base, geometry, single)
    out = -margins > COP_OUTSIDE_TOL_M
    if out.mean() <= COP_OUTSIDE_SHARE:
        return None
    soles = f"base sole's ({base!r}, single support)" if single else "soles'"
    return (f"the boards' CoP lies up to {-margins.min() * 1000:.0f} mm (median {np.median(-margins[out]) * 1000:.0f} "
            f"mm) outside the {soles} polygon in {100 * out.mean():.0f} % of samples: is '# base: {base}' the sole "
            "on the first board (and the wrench in its frame, x forward, y left)?")  # fmt: skip


def other_sole_problem(
    model: RobotModel, q: np.ndarray, base: str, geometry: str | ParameterSet, motion: str
) -> str | None:
    """The other sole where the motion class puts it: in single support lifted (median height above
    SOLE_GROUND_M), in double support on the ground (`_sole_off_ground`) and still about its median
    (`_sole_moved`). None when consistent."""
    idx = _spread(len(q))
    sole = other_site(model, base)
    res = flat_residual(model, q[idx], geometry, base)
    z = float(np.median(res[:, 0]))
    if motion == "single-support":
        if z > SOLE_GROUND_M:
            return None
        return (f"{sole} stays on the ground (median height {z * 1000:.0f} mm ≤ {SOLE_GROUND_M * 1000:g} mm) "
                "throughout a single-support recording: a double-support motion? remove '# motion: "
                "single-support'")  # fmt: skip
    return _sole_off_ground(sole, res) or _sole_moved(model, q[idx], res, base, geometry)


def _tilt_deg(r: np.ndarray) -> np.ndarray:
    """The tilt (°) of a sole whose z axis has x, y components r (..., 2) in the base frame."""
    return np.degrees(np.arcsin(np.clip(np.linalg.norm(r, axis=-1), 0, 1)))


def _sole_off_ground(sole: str, res: np.ndarray) -> str | None:
    """Double support: the other sole's median height or tilt (`flat_residual` rows res) beyond SOLE_GROUND_M,
    SOLE_GROUND_TILT_DEG: lifted throughout, or angles that are not the robot's; None otherwise."""
    z = float(np.median(res[:, 0]))
    tilt = float(_tilt_deg(np.median(res[:, 1:], axis=0)))
    if abs(z) <= SOLE_GROUND_M and tilt <= SOLE_GROUND_TILT_DEG:
        return None
    why = "a single-support motion? declare '# motion: single-support'; else " if z > SOLE_GROUND_M else ""
    return (f"the recorded angles put {sole} {z * 1000:.0f} mm above the ground, tilted {tilt:.1f}° (median; double "
            f"support allows {SOLE_GROUND_M * 1000:g} mm, {SOLE_GROUND_TILT_DEG:g}°): {why}encoder offsets "
            "(`calibrate encoder-offsets`) or a description whose geometry is not the robot's?")  # fmt: skip


def _sole_moved(
    model: RobotModel, q: np.ndarray, res: np.ndarray, base: str, geometry: str | ParameterSet
) -> str | None:
    """Double support: the other sole's height, tilt, x, y, yaw about their medians beyond SOLE_*_TOL in more than
    COP_OUTSIDE_SHARE of samples: it steps or slides; None otherwise."""
    pose = other_pose(model, q, geometry, base)
    mid = np.median(pose, axis=0)
    dz = np.abs(res[:, 0] - np.median(res[:, 0]))
    tilt = _tilt_deg(res[:, 1:] - np.median(res[:, 1:], axis=0))
    shift = np.hypot(*(pose[:, :2] - mid[:2]).T)
    turn = np.degrees(np.abs(np.angle(np.exp(1j * (pose[:, 2] - mid[2])))))
    moved = (
        (dz > SOLE_Z_TOL_M)
        | (tilt > SOLE_TILT_TOL_DEG)
        | (shift > SOLE_SHIFT_TOL_M)
        | (turn > SOLE_TURN_TOL_DEG)
    )
    if moved.mean() <= COP_OUTSIDE_SHARE:
        return None
    return (f"{other_site(model, base)} leaves its place in {100 * moved.mean():.0f} % of samples (about its median: "
            f"height up to {dz.max() * 1000:.0f} mm, tilt {tilt.max():.1f}°, {shift.max() * 1000:.0f} mm / "
            f"{turn.max():.1f}°; double support allows {SOLE_Z_TOL_M * 1000:g} mm, {SOLE_TILT_TOL_DEG:g}°, "
            f"{SOLE_SHIFT_TOL_M * 1000:g} mm / {SOLE_TURN_TOL_DEG:g}°): a single-support or stepping motion? "
            "declare '# motion: single-support'")  # fmt: skip


def standing_problem(
    model: RobotModel,
    q: np.ndarray,
    wrench: np.ndarray,
    base: str,
    motion: str,
    geometry: str | ParameterSet,
    moment_z: float = 0.0,
) -> str | None:
    """What makes a standing (board-wrench) recording not this robot's standing as labelled, the first found in
    the order that names the cause best: weight (force unit), lever (moment unit), the other sole against the
    motion class, the CoP against the soles' polygon; lever and CoP on the `loaded` samples. None when all pass."""
    single = motion == "single-support"
    on = loaded(model, wrench, geometry)
    checks: Sequence[Callable[[], str | None]] = (
        lambda: weight_problem(model, wrench, geometry),
        lambda: lever_problem(model, q[on], wrench[on], base, geometry, moment_z),
        lambda: other_sole_problem(model, q, base, geometry, motion),
        lambda: cop_problem(model, q[on], board_cop(wrench[on], moment_z), base, geometry, single),
    )
    return next((p for p in (check() for check in checks) if p), None)


def _rms(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Root mean square (over `axis`)."""
    return np.sqrt(np.mean(np.square(x), axis=axis))


def effort_scale_problem(
    model: RobotModel,
    motion: tuple[np.ndarray, np.ndarray, np.ndarray],
    tau: np.ndarray,
    guess: str | ParameterSet,
    base: str,
    currents: bool = False,
) -> tuple[str, bool] | None:
    """The measured joint efforts (K, nq) against the guessed parameters' inverse dynamics on the recorded motion
    (q, q̇, q̈), RMS over all joints and samples: beyond EFFORT_WARN× either way a message, refusing (True) beyond
    EFFORT_REFUSE×, naming the likely unit and the joint farthest off; None when plausible or nothing is predicted.
    Independent of the description's effort limits (placeholders on some)."""
    from robots.dynamics import rnea

    idx = _spread(len(tau))
    q, qd, qdd = (np.asarray(a)[idx] for a in motion)
    pred = rnea(model, q, qd, qdd, guess, base)
    meas = np.asarray(tau)[idx]
    predicted, measured = float(_rms(pred)), float(_rms(meas))
    if not predicted > 0:
        return None
    ratio = measured / predicted
    off = max(ratio, 1 / ratio) if ratio > 0 else np.inf
    if off <= EFFORT_WARN:
        return None
    refuse = off > EFFORT_REFUSE
    per = _rms(meas, 0) / np.maximum(_rms(pred, 0), 1e-12 * predicted)
    j = int(np.argmax(np.abs(np.log(np.maximum(per, 1e-300)))))
    band = EFFORT_REFUSE if refuse else EFFORT_WARN
    tail = "" if refuse else f"; refused beyond 1/{EFFORT_REFUSE:g}–{EFFORT_REFUSE:g}×, the fit goes on"
    return (f"the joint efforts' RMS is {measured:.4g} N·m, {ratio:.3g}× what {model.name!r}'s parameters "
            f"({model.parameter_set(guess).name!r}) predict on the recorded motion without friction ({predicted:.4g} "
            f"N·m; farthest joint {model.joint_names[j]} at {per[j]:.3g}×), beyond 1/{band:g}–{band:g}×{tail}: "
            f"{_effort_hint(ratio, currents)}, or the description's masses/friction far from this robot (check "
            "--prior)?", refuse)  # fmt: skip


def _effort_hint(ratio: float, currents: bool) -> str:
    """The unit mistake an effort-scale ratio points to."""
    if ratio > 1:
        if currents:
            return "currents in mA rather than A, or a torque constant in another unit"
        return (
            "efforts in mN·m rather than N·m" if abs(np.log10(ratio) - 3) < 1 else "efforts in another unit"
        )
    if currents:
        return "a torque constant too small (motor's alone, without the gear ratio)"
    return "motor currents or motor-side torques written as joint torques (a missing torque constant or gear ratio)"


# per joint, the fit's residual RMS beyond what an honest recording leaves (`band_noise`: the efforts' noise in the
# fit's band; `honest_residuals`: the encoders' steps and noise, filtered and differentiated into q̇ and q̈, through
# the fit), over the spread (SD) of the joint's measured effort on the fitted rows: beyond MISFIT_WARN a warning. It
# catches a joint whose wrong map (a flipped direction, swapped servo ids) worsens the dynamics fit; a flip the
# fitted parameters absorb leaves no trace (on the UR5 flips of shoulder_lift and elbow show, those of
# shoulder_pan, wrist_1, wrist_2, wrist_3 stay at honest levels). Judged at the recordings' own cut-off when the fit's
# is higher (`identify.joint_misfit.joint_misfits`). Measured (`identify dynamic`, UR5 ur5_6s.json): an honest run
# on the emulated Dynamixel bench 0.042 at most (wrist_1; the same at --cutoff-hz 10 and 20), simulated recordings
# (100 and 500 Hz, 4096 and 16384 encoder ticks, --cutoff-hz 3.3, 10, 20) 0; elbow's direction flipped in the servo
# map 0.151 (shoulder_lift), shoulder_lift's 0.105 (shoulder_lift) and 0.133 (wrist_1); a simulated recording with
# elbow's effort negated 0.57 (shoulder_lift), wrist_2 and wrist_3 swapped 0.29 and 0.62. A zero 35° off stays at
# 0.033: the fit absorbs it.
MISFIT_WARN = 0.08
# the angles' noise is judged above this share of the Nyquist frequency (or above the fit's cut-off, if higher):
# a robot's motion has nothing there, the encoders' noise and quantisation do
ANGLE_NOISE_SPLIT = 0.5
PREDICTION_NOISE_DRAWS = 4  # noise draws `honest_residuals` averages
ENCODER_STEP_TOL = (
    0.02  # share of an encoder step within which a step between samples is a whole number of it
)


def band_noise(tau: np.ndarray, rate_hz: float, cutoff_hz: float) -> np.ndarray:
    """Per joint, the RMS (the fitted efforts' unit: N·m, N) that white noise in recorded efforts (K, nq) leaves
    below the fit's cut-off: the part above it (what a `lowpass` at cutoff_hz removes) taken as white and scaled to the
    band the fit keeps. Ripple and quantisation count as noise; an upper bound (the fit absorbs some of it)."""
    from identify.differentiation import lowpass

    tau = np.asarray(tau, dtype=float)
    share = min(cutoff_hz / (rate_hz / 2), 0.99)
    above = np.std(tau - lowpass(tau, rate_hz, cutoff_hz), axis=0)
    return above * np.sqrt(share / (1 - share))


def encoder_steps(q: np.ndarray) -> np.ndarray:
    """Per joint, the encoder step (rad, m) recorded angles (K, nq) sit on: the smallest step between samples,
    when every step is a whole number of it (to within ENCODER_STEP_TOL of it, and the 1e-6 a CSV's six decimals
    round to; steps under 1e-6/ENCODER_STEP_TOL are not told); 0 where they sit on none (interpolated between
    ticks, or noise finer than the step)."""
    return np.array([_step(c) for c in np.atleast_2d(np.asarray(q, dtype=float)).T])


def _step(q: np.ndarray) -> float:
    """`encoder_steps` of one joint's angles (K,)."""
    steps = np.abs(np.diff(q))
    steps = steps[steps > 1e-9]
    if len(steps) < 10:
        return 0.0
    least = float(np.min(steps))
    ones = steps[steps < 1.5 * least]
    step = float(np.median(ones))
    n = np.maximum(np.round(steps / step), 1)
    step = float(np.sum(steps * n) / np.sum(n * n))  # the whole-number multiples' least-squares step
    off = np.abs(steps - n * step)
    # a CSV's six decimals put each step within ±1e-6 of its whole number: steps finer than that cannot be told
    visible = step * ENCODER_STEP_TOL > 1e-6
    return step if visible and np.all(off <= ENCODER_STEP_TOL * step + 1e-6) else 0.0


def angle_noise(q: np.ndarray, rate_hz: float, cutoff_hz: float, steps: np.ndarray) -> np.ndarray:
    """Per joint, the SD (rad, m) of white noise in recorded angles (K, nq) beyond their encoder's quantisation
    (`steps`, `encoder_steps`: Δ²/12 of it taken out): their part above max(cutoff_hz, ANGLE_NOISE_SPLIT × Nyquist),
    where a robot's motion has nothing, scaled to the whole band."""
    from identify.differentiation import lowpass

    q = np.asarray(q, dtype=float)
    nyquist = rate_hz / 2
    split = min(max(cutoff_hz, ANGLE_NOISE_SPLIT * nyquist), 0.9 * nyquist)
    above = np.std(q - lowpass(q, rate_hz, split), axis=0) / np.sqrt(1 - split / nyquist)
    return np.sqrt(np.maximum(above**2 - np.square(steps) / 12, 0.0))


def honest_residuals(
    systems: Sequence[Callable[[np.ndarray], np.ndarray]],
    qs: Sequence[np.ndarray],
    rates_hz: Sequence[float],
    cutoff_hz: float,
    steps: Sequence[np.ndarray],
    sigmas: Sequence[np.ndarray],
    theta: np.ndarray,
    weights: np.ndarray,
    keeps: Sequence[np.ndarray],
    refit: bool = True,
    draws: int = PREDICTION_NOISE_DRAWS,
    seed: int = 0,
) -> list[np.ndarray]:
    """Per recording, per output row, the residual RMS a fit leaves on recordings that are this model's own (efforts
    exactly `theta`'s on the recorded motion) and whose only error is the encoders' reading of the angles: what the
    fit's residual holds beyond the efforts' noise on an honest recording. `systems[k](q)`: recording k's filtered
    regressor rows (K', rows, columns) on angles q (K, nq), as the fit builds them. The motion is the recorded angles
    low-passed at the fit's cut-off; its reading rounds it to each joint's encoder step (`steps`, `encoder_steps`,
    at a random phase: a slow joint's staircase puts its error in the fit's band, as white noise of Δ²/12 would not)
    and adds white noise of SD `sigmas` (`angle_noise`). With `refit`, least squares at the row `weights` refits
    the read recordings together (the angles' noise in the regressor biases it: errors in variables); without (an
    instrumental-variable fit, unbiased), `theta` predicts. Over the rows `keeps` (bool, as each prediction: the
    fit drops a joint's rows around its velocity reversals, where the Coulomb step's sign is the encoders' noise's),
    averaged over `draws` draws, seeded (the same answer every time)."""
    from identify.differentiation import lowpass

    rng = np.random.default_rng(seed)
    smooth = [lowpass(np.asarray(q, dtype=float), r, cutoff_hz) for q, r in zip(qs, rates_hz, strict=True)]
    clean = [system(m) for system, m in zip(systems, smooth, strict=True)]
    theta = np.asarray(theta, dtype=float)[: clean[0].shape[-1]]
    truth = [a @ theta for a in clean]
    keeps = [np.asarray(k, dtype=bool) for k in keeps]
    sq = [np.zeros(t.shape[1]) for t in truth]
    for _ in range(draws):
        read = []
        for system, m, step, sigma in zip(systems, smooth, steps, sigmas, strict=True):
            step = np.asarray(step, dtype=float)
            phase = rng.uniform(size=step.shape) * step
            on = np.where(step > 0, np.round((m + phase) / np.where(step > 0, step, 1)) * step - phase, m)
            read.append(system(on + rng.standard_normal(m.shape) * sigma))
        x = theta
        if refit:
            A = np.concatenate([(a * weights[None, :, None])[k] for a, k in zip(read, keeps, strict=True)])
            b = np.concatenate([(t * weights)[k] for t, k in zip(truth, keeps, strict=True)])
            x = np.linalg.lstsq(A, b, rcond=None)[0]
        for i, (a, t, k) in enumerate(zip(read, truth, keeps, strict=True)):
            sq[i] += np.sum(np.square(t - a @ x) * k, axis=0) / np.maximum(k.sum(axis=0), 1)
    return [np.sqrt(v / draws) for v in sq]


def misfit_joints(
    names: Sequence[str], rmse: np.ndarray, measured_sd: np.ndarray, noise: np.ndarray
) -> list[dict]:
    """The joints whose fitted residual RMS (`rmse`), beyond the noise their recordings explain (`noise`:
    `band_noise` and `honest_residuals` in quadrature), exceeds MISFIT_WARN of their measured effort's SD:
    {joint, share, rmse_nm, noise_nm, measured_sd_nm} each, in the fit's unit (N·m; N on a prismatic joint: the
    `_nm` keys as the fit's sigma_nm, rmse_nm; motor currents are fitted as the torques their constants make);
    [] when none."""
    excess = np.sqrt(np.maximum(np.square(rmse) - np.square(noise), 0.0))
    share = excess / np.maximum(measured_sd, 1e-12)
    return [{"joint": names[j], "share": float(share[j]), "rmse_nm": float(rmse[j]),
             "noise_nm": float(noise[j]), "measured_sd_nm": float(measured_sd[j])}
            for j in np.flatnonzero(share > MISFIT_WARN)]  # fmt: skip


# a run's tick later than this many periods is said (`late_ticks`): the recording bridges it by interpolation
LATE_TICK_PERIODS = 2.0


def late_ticks(tick_times: np.ndarray, period: float) -> int:
    """How many of a run's streamed ticks (their times, s) came more than LATE_TICK_PERIODS periods late: a step
    from the tick before longer than (1 + LATE_TICK_PERIODS) periods."""
    steps = np.diff(np.asarray(tick_times, dtype=float))
    return int(np.count_nonzero(steps > (1 + LATE_TICK_PERIODS) * period))
