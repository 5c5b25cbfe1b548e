"""Joint encoder offsets from link accelerometers (spec actuation.md §5, thesis §3.2–3.4.3).

The encoder reads q; the true angle is θ = q + δ. A static (slowly moving) accelerometer on a link measures the
proper acceleration α̂_j(θ) = −ᵂR_{S_j}(θ)ᵀ g. δ minimises Σ_samples Σ_sensors ‖α − α̂(q + δ)‖² by bounded
trust-region least squares (scipy `trf`, like lsqnonlin), bounds ±20°. Robustness check: the samples are split
at random into buckets (5 × 200 in the thesis) and the fit repeated per bucket; the spread is reported.
Any robot: the sensors are sites of the robot description, the base frame is one where gravity is `gravity`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from formats.errors import DataError, IdentifiabilityError
from identify.robust_se import hac_se
from robots.dynamics import GRAVITY
from robots.kinematics import link_frames, site_pose
from robots.tree import RobotModel


def root_link(model: RobotModel) -> str:
    """The model's root link (its frame is the world frame of a fixed-base robot)."""
    return model.links[0].name


def default_sensors(model: RobotModel) -> list[str]:
    """Sites giving ≥ 1 accelerometer per 3 joints along the chain (greedy: deepest link within reach)."""
    depth = {}
    for s in model.sites:
        d = sum(model.joints[j].is_coordinate for j in model.joint_path(s.link))
        if d > 0:
            depth.setdefault(s.link, (d, s.name))
    if not depth:
        raise DataError(f"model {model.name!r} has no site on a moving link to carry an accelerometer")
    by_depth = sorted(depth.values())
    chosen, covered = [], 0
    nmax = max(d for d, _ in by_depth)
    while covered < nmax:
        reach = [x for x in by_depth if covered < x[0] <= covered + 3]
        if not reach:
            reach = [x for x in by_depth if x[0] > covered][:1]
        d, name = reach[-1]
        chosen.append(name)
        covered = d
    return chosen


def smooth(acc: np.ndarray, window: int = 51, order: int = 3) -> np.ndarray:
    """Savitzky–Golay smoothing of accelerations along time (the thesis used a wide window, order 5)."""
    from scipy.signal import savgol_filter

    if window <= order or window % 2 == 0:
        raise DataError(f"smoothing window must be odd and > order {order}, got {window}")
    if len(acc) < window:
        raise DataError(f"{len(acc)} samples are fewer than the smoothing window {window}")
    return savgol_filter(acc, window, order, axis=0)


def prepare(q: np.ndarray, acc: np.ndarray, window: int = 201, decimate: int = 10):
    """Smooth the accelerations (Savitzky–Golay) and keep every `decimate`-th sample of q and acc."""
    if decimate < 1:
        raise DataError(f"decimation must be ≥ 1, got {decimate}")
    a = smooth(acc, window) if window > 1 else acc
    return q[::decimate], a[::decimate]


def expected_acc(
    model: RobotModel, theta: np.ndarray, sensors: list[str], params: str = "urdf", gravity=GRAVITY
) -> np.ndarray:
    """Proper accelerations (N, S, 3) of static sensors at true angles θ (N, nq), in each sensor frame."""
    base = root_link(model)
    g = np.asarray(gravity, float)
    out = []
    for s in sensors:
        R, _ = site_pose(model, theta, params, s, base)
        out.append(-np.einsum("nji,j->ni", R, g))
    return np.stack(out, axis=1)


@dataclass
class OffsetFit:
    """Offsets δ [rad] (θ = q + δ), residual rms [m/s²], mean angle between measured and predicted [deg]."""

    joints: list[str]
    offsets: np.ndarray
    rms: float
    angle_deg: float
    active_bounds: list[str]
    buckets: np.ndarray | None = None  # (B, nq) per-bucket offsets [rad]
    unidentifiable: list[str] = field(default_factory=list)
    # [rad] from the fit (Newey–West: smoothed samples are correlated); NaN at a bound
    se: np.ndarray | None = None

    @property
    def bucket_std(self) -> np.ndarray | None:
        return None if self.buckets is None else self.buckets.std(axis=0, ddof=1)

    def as_dict(self, truth: np.ndarray | None = None, reference: np.ndarray | None = None) -> dict:
        """Table 3.5-style rows in radians (files carry radians; tables show degrees): estimate, bucket mean/std,
        truth and gap (simulated), reference (e.g. a manual calibration) and gap to it."""
        rows = []
        for k, j in enumerate(self.joints):
            row = {"joint": j, "offset_rad": float(self.offsets[k])}
            if self.se is not None and np.isfinite(self.se[k]):
                row["se_rad"] = float(self.se[k])
            if self.buckets is not None:
                row["bucket_mean_rad"] = float(self.buckets[:, k].mean())
                row["bucket_std_rad"] = float(self.bucket_std[k])
            if truth is not None:
                row["true_rad"] = float(truth[k])
                row["gap_rad"] = row["offset_rad"] - row["true_rad"]
            if reference is not None:
                row["reference_rad"] = float(reference[k])
                row["gap_reference_rad"] = row["offset_rad"] - row["reference_rad"]
            rows.append(row)
        return {
            "joints": rows,
            "rms_m_s2": self.rms,
            "mean_angle_rad": float(np.radians(self.angle_deg)),
            "active_bounds": self.active_bounds,
            "unidentifiable": self.unidentifiable,
        }

    def warnings(self, bound_deg: float) -> list[str]:
        """Notes on a doubtful fit: a residual far above sensor noise (units, uncalibrated sensors, wrong sites
        or description) or offsets stuck at the ±bound (the fit wanted more)."""
        notes = []
        if self.rms > 0.5:  # 25× what a calibrated static sensor fits to; 1° of offset error moves g by 0.17
            notes.append(
                f"residual rms {self.rms:.3g} m/s² is large (a calibrated static sensor fits to ~0.02): are the "
                "accelerations calibrated and in m/s², and the sensor sites and robot description right?"
            )
        if self.active_bounds:
            notes.append(
                f"offsets at the ±{bound_deg:g} deg bound: {', '.join(self.active_bounds)} — the fit wanted "
                "more; check the robot description's zero angles, or raise --bound-deg"
            )
        return notes


def speed_limit(distance: float, delta_alpha: float = 0.01) -> float:
    """Joint speed [rad/s] whose centripetal term ω² d stays below Δα [m/s²] at distance d [m]: √(Δα/d)."""
    return float(np.sqrt(delta_alpha / max(distance, 1e-9)))


def sensor_reach(model: RobotModel, q: np.ndarray, sensors: list[str], params: str = "urdf") -> float:
    """Largest distance [m] of a sensor from the first moving joint on its chain, over the samples."""
    base = root_link(model)
    frames = link_frames(model, q, params, base)
    names = [lk.name for lk in model.links]
    d = 0.0
    for s in sensors:
        path = [j for j in model.joint_path(model.site(s).link) if model.joints[j].is_coordinate]
        if not path:
            continue
        origin = frames.p[:, names.index(model.joints[path[0]].child)]
        _, ps = site_pose(model, q, params, s, base)
        d = max(d, float(np.max(np.linalg.norm(ps - origin, axis=1))))
    return d


@dataclass
class SpeedCheck:
    """Fastest joint speed of the recording against the slow-motion limit √(Δα/d) [deg/s]."""

    max_speed_deg_s: float
    limit_deg_s: float
    reach_m: float
    delta_alpha: float

    @property
    def too_fast(self) -> bool:
        return self.max_speed_deg_s > self.limit_deg_s

    def as_dict(self) -> dict:
        """The check in SI units (rad/s), as files carry it."""
        return {
            "max_speed_rad_s": float(np.radians(self.max_speed_deg_s)),
            "limit_rad_s": float(np.radians(self.limit_deg_s)),
            "reach_m": self.reach_m,
            "delta_alpha_m_s2": self.delta_alpha,
            "too_fast": self.too_fast,
        }

    def warning(self) -> str | None:
        """A note when the recording moved faster than the slow-motion limit."""
        if not self.too_fast:
            return None
        return (
            f"max joint speed {self.max_speed_deg_s:.2f} deg/s exceeds the slow-motion limit "
            f"{self.limit_deg_s:.2f} deg/s: non-gravity accelerations bias the offsets; move slower"
        )


def check_speed(
    model: RobotModel, t: np.ndarray, q: np.ndarray, sensors: list[str], delta_alpha: float = 0.01
) -> SpeedCheck:
    """Thesis requirement: the non-gravity accelerations must stay below Δα (≈ 8 deg/s at d = 0.5 m)."""
    if len(t) < 3 or np.any(np.diff(t) <= 0):
        raise DataError("encoder-offset recording: time stamps must increase")
    w = max(1, int(np.searchsorted(t, t[0] + 0.1)))  # 0.1 s baseline: encoder steps would dominate at 1 ms
    if w >= len(t):
        raise DataError(
            f"encoder-offset recording too short for the slow-motion check: {len(t)} samples over "
            f"{t[-1] - t[0]:.3g} s (the speed is measured over 0.1 s; a calibration needs a slow motion of "
            "seconds)"
        )
    qd = (q[w:] - q[:-w]) / (t[w:] - t[:-w])[:, None]
    d = sensor_reach(model, q[:: max(1, len(q) // 200)], sensors)
    return SpeedCheck(
        float(np.degrees(np.max(np.abs(qd)))), float(np.degrees(speed_limit(d, delta_alpha))), d, delta_alpha
    )


def _check(model: RobotModel, q: np.ndarray, acc: np.ndarray, sensors: list[str]) -> None:
    if q.ndim != 2 or q.shape[1] != model.nq:
        raise DataError(f"encoder readings must be (N, {model.nq}) for {model.name}, got {q.shape}")
    if acc.shape != (len(q), len(sensors), 3):
        raise DataError(f"accelerations must be (N, {len(sensors)}, 3), got {acc.shape}")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(acc))):
        raise DataError("encoder-offset data contain non-finite values")
    for s in sensors:
        model.site(s)  # DataError naming the unknown site


def _rank_check(J: np.ndarray, names: list[str]) -> None:
    """IdentifiabilityError naming the joints whose offsets the data cannot see."""
    s = np.linalg.svd(J, compute_uv=False)
    if s[-1] >= 1e-6 * s[0]:
        return
    col = np.linalg.norm(J, axis=0)
    unid = [names[k] for k in range(len(names)) if col[k] < 1e-6 * s[0]] or ["a combination of joints"]
    raise IdentifiabilityError(
        f"encoder offsets not identifiable from these poses/sensors: {', '.join(unid)} "
        "(add a sensor beyond those joints or avoid axes aligned with gravity)"
    )


def fit_offsets(
    model: RobotModel,
    q: np.ndarray,
    acc: np.ndarray,
    sensors: list[str],
    bound_deg: float = 20.0,
    tol_deg: float = 0.1,
    params: str = "urdf",
    gravity=GRAVITY,
) -> OffsetFit:
    """Bounded nonlinear LS for δ; joints the data cannot see (rank-deficient Jacobian) are named."""
    q, acc = np.asarray(q, float), np.asarray(acc, float)
    _check(model, q, acc, sensors)
    b = np.radians(bound_deg)

    def res(d):
        return (expected_acc(model, q + d, sensors, params, gravity) - acc).ravel()

    names = model.joint_names
    if not len(q) or all(np.ptp(q[:, k]) < 1e-6 for k in range(model.nq)):
        raise IdentifiabilityError(
            "encoder offsets not identifiable: no joint moved during the recording (constant posture); move the "
            "joints slowly through their ranges"
        )
    r0 = res(np.zeros(model.nq))  # rank check before solving: a blind joint makes the solver wander
    h = 1e-6
    _rank_check(np.column_stack([(res(h * e) - r0) / h for e in np.eye(model.nq)]), names)
    sol = least_squares(
        res, np.zeros(model.nq), bounds=(-b, b), method="trf", x_scale=1.0, xtol=np.radians(tol_deg) * 1e-3
    )
    _rank_check(sol.jac, names)
    pred = expected_acc(model, q + sol.x, sensors, params, gravity)
    cosang = np.sum(pred * acc, axis=2) / (np.linalg.norm(pred, axis=2) * np.linalg.norm(acc, axis=2))
    active = [names[k] for k in range(model.nq) if abs(abs(sol.x[k]) - b) < 1e-6]
    return OffsetFit(
        list(names),
        sol.x,
        float(np.sqrt(np.mean(sol.fun**2))),
        float(np.degrees(np.mean(np.arccos(np.clip(cosang, -1, 1))))),
        active,
        se=_offset_se(sol.jac, sol.fun, len(q), [names.index(a) for a in active]),
    )


def _offset_se(J: np.ndarray, fun: np.ndarray, samples: int, held: list[int]) -> np.ndarray:
    """Newey–West SEs of the offsets from the solver's Jacobian (rows: samples × sensors × axes, the bandwidth in
    samples); joints `held` at a bound are fixed and get NaN."""
    J = np.asarray(J.toarray() if hasattr(J, "toarray") else J)
    free = [k for k in range(J.shape[1]) if k not in held]
    se = np.full(J.shape[1], np.nan)
    if free:
        sample = np.repeat(np.arange(samples), len(fun) // samples)
        se[free] = hac_se(J[:, free], -fun, np.zeros(len(free)), sample)[0]
    return se


def fit_with_buckets(
    model: RobotModel,
    q: np.ndarray,
    acc: np.ndarray,
    sensors: list[str],
    n_buckets: int = 5,
    bucket_size: int = 200,
    seed: int = 0,
    **kw,
) -> OffsetFit:
    """Fit on all samples, then on `n_buckets` random disjoint buckets of `bucket_size` samples (robustness)."""
    fit = fit_offsets(model, q, acc, sensors, **kw)
    n = len(q)
    if n_buckets * bucket_size > n:
        raise DataError(f"{n} samples cannot fill {n_buckets} buckets of {bucket_size}")
    perm = np.random.default_rng(seed).permutation(n)
    fit.buckets = np.array(
        [
            fit_offsets(model, q[idx], acc[idx], sensors, **kw).offsets
            for idx in (perm[k * bucket_size : (k + 1) * bucket_size] for k in range(n_buckets))
        ]
    )
    return fit
