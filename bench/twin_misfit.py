"""Where a double-support identification's misfit on the physics twin comes from (issue 13).

A run made with `poise run … --physics mujoco --twin-trace` keeps every physics step while standing: the
whole-body CoM, the plates' wrench on the robot and the joint angles. Against it, in the identification's band
(its cut-off, the recording's default):
  - physics: the plates' Fz against M (g + z̈_com) of the twin's own CoM (Newton; 0 up to the filter's ends);
  - model: the rigid fixed-sole model with the twin's true parameters against the plates' wrench, at the twin's
    exact joint angles, and the part of it the soles' motion on their pads explains: MuJoCo's rigid-body wrench
    along the twin's whole motion (free base included, filtered alike) less the same with the base sole pinned
    where the model puts it;
  - measurement: the recorded wrench (board reports through the drivers and the recorder) against the plates';
  - where the model's misfit lies in frequency (power shares: the motion's band, up to half the cut-off, above)
    and how late the plates are against the angles (the delay of the angles that fits the plates best);
  - the identification from the recording and from the trace, each against the truth (within 3 SE).

`python -m bench.twin_misfit RUN [--json]`; `make bench` runs the test's 10 s design on the twin first.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import sys
import tempfile

import numpy as np

PLAN = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tulip_double_support_10s.json"
G = 9.80665
LAG_SPAN_MS = 5  # the plates' lag is searched over ±this, in 1 ms steps


def _offset(t_rec: np.ndarray, q_rec: np.ndarray, t: np.ndarray, q: np.ndarray) -> float:
    """Simulated time of the recording's t = 0: where the twin's joint angles match the recorded ones best."""

    def err(o: float) -> float:
        qi = np.stack([np.interp(t_rec + o, t, q[:, j]) for j in range(q.shape[1])], axis=1)
        return float(np.mean((qi - q_rec) ** 2))

    lo, hi = t[0], t[-1] - t_rec[-1]
    grid = np.arange(lo, hi, 0.01)
    best = grid[int(np.argmin([err(o) for o in grid]))]
    fine = np.arange(best - 0.01, best + 0.01, 0.0005)
    return float(fine[int(np.argmin([err(o) for o in fine]))])


def _band_shares(x: np.ndarray, dt: float, band_hz: float, cutoff_hz: float) -> list[list[float]]:
    """Per column of x (sampled every dt s): its power's shares up to the motion's band (+10 %), from there to
    half the cut-off, and above."""
    f = np.fft.rfftfreq(len(x), dt)
    power = np.abs(np.fft.rfft(x - x.mean(axis=0), axis=0)) ** 2
    edges = [1.1 * band_hz, cutoff_hz / 2]
    bins = [f <= edges[0], (f > edges[0]) & (f <= edges[1]), f > edges[1]]
    total = np.maximum(power.sum(axis=0), 1e-300)
    return [[float(power[b, k].sum() / total[k]) for b in bins] for k in range(x.shape[1])]


def _parabola_min(x: np.ndarray, y: list[float]) -> float:
    """The minimum of a sampled curve, refined by a parabola through the lowest sample and its neighbours."""
    k = int(np.clip(np.argmin(y), 1, len(y) - 2))
    a, b, c = y[k - 1], y[k], y[k + 1]
    den = a - 2 * b + c
    step = float(x[1] - x[0])
    return float(x[k] + (0.5 * step * (a - c) / den if den > 0 else 0.0))


def twin_model(model, truth):
    """The twin's compiled MuJoCo model (its default options) for the robot with parameters `truth`."""
    from drivers.emulators.mujoco_twin import TwinOptions, build_spec

    return build_spec(model, truth, TwinOptions()).compile()


def _sole_motion(m, model, base: str, t: np.ndarray, qpos: np.ndarray, tg: np.ndarray, fc: float):
    """(Fz, Mx, My) per sample of tg: the wrench the soles' motion on their pads adds to the plates' (about the floor
    origin, N and N·m), filtered at fc — MuJoCo's rigid-body dynamics along the twin's whole state (its free base
    included) less the same motion with the base sole pinned flat at the placement's origin, as the model has it.
    `m`: the twin's compiled MuJoCo model."""
    import mujoco

    from drivers.emulators.mujoco_twin import BOARD_SIZE, root_pose_for
    from identify.differentiation import lowpass

    d = mujoco.MjData(m)
    if m.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
        raise ValueError("the twin's first joint is not its free base")
    root = int(m.jnt_bodyid[0])
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, model.base_site(base).name)
    dt = float(tg[1] - tg[0])
    quat = qpos[:, 3:7] * np.where(qpos[:, 3:4] < 0, -1.0, 1.0)  # one hemisphere: components interpolate
    raw = np.concatenate([qpos[:, :3], quat, qpos[:, 7:]], axis=1)
    full = lowpass(np.stack([np.interp(tg, t, raw[:, k]) for k in range(m.nq)], axis=1), 1.0 / dt, fc)
    full[:, 3:7] /= np.linalg.norm(full[:, 3:7], axis=1, keepdims=True)
    pinned = full.copy()
    origin = np.array([0.0, 0.0, BOARD_SIZE[2]])
    for k in range(len(tg)):
        d.qpos[:] = full[k]
        pinned[k, :3], pinned[k, 3:7] = root_pose_for(m, d, root, site, np.eye(3), origin)

    def wrench(Q: np.ndarray) -> np.ndarray:
        V = np.zeros((len(Q), m.nv))
        for k in range(1, len(Q) - 1):
            mujoco.mj_differentiatePos(m, V[k], 2 * dt, Q[k - 1], Q[k + 1])
        V[0], V[-1] = V[1], V[-2]
        A = np.gradient(V, dt, axis=0)
        out, f = np.zeros((len(Q), 3)), np.zeros(m.nv)
        for k in range(len(Q)):
            d.qpos[:], d.qvel[:] = Q[k], V[k]
            mujoco.mj_forward(m, d)
            d.qacc[:] = A[k]
            mujoco.mj_rne(m, d, 1, f)  # the free base's rows: the external wrench the motion needs
            F, tau = f[:3], d.xmat[root].reshape(3, 3) @ f[3:6]
            n = tau + np.cross(d.xpos[root], F)
            out[k] = F[2], n[0], n[1]
        return out

    return wrench(full) - wrench(pinned)


def _sole_paths(m, model, t: np.ndarray, qpos: np.ndarray, tg: np.ndarray, fc: float) -> dict:
    """How each sole moves on its board over tg (the recording's span): its slide from where it stood at tg[0]
    (x, y, µm, at the end), and in the band (filtered at fc, about its mean) its x, y displacement (µm rms) and
    turn about its own x, y (tilt) and z (yaw) axes (mrad rms) — what the model's soles, fixed on the boards,
    leave out; and how often a corner of it is off its board (the share of samples, any corner: the sole rocks)."""
    import mujoco
    from scipy.spatial.transform import Rotation

    from drivers.emulators.mujoco_twin import BOARD_SIZE, PAD_RADIUS
    from identify.differentiation import lowpass

    d = mujoco.MjData(m)
    at = np.clip(np.searchsorted(t, tg), 0, len(t) - 1)  # the trace's steps at the grid (1 ms: the same)
    out = {}
    for site in model.sites:
        if site.rect is None:
            continue
        sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, site.name)
        pads = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"{site.name}_pad{c}") for c in range(4)]
        pos, rot, lifted = np.zeros((len(at), 3)), [], np.zeros(len(at), dtype=bool)
        for i, k in enumerate(at):
            d.qpos[:] = qpos[k]
            mujoco.mj_kinematics(m, d)
            pos[i] = d.site_xpos[sid]
            rot.append(d.site_xmat[sid].reshape(3, 3).copy())
            lifted[i] = (
                d.geom_xpos[pads, 2] - PAD_RADIUS > BOARD_SIZE[2] + 1e-6
            ).any()  # a corner off the plate
        R0 = rot[0]
        turn = Rotation.from_matrix(np.einsum("ji,kjl->kil", R0, np.array(rot))).as_rotvec()  # in R0's axes
        slide = (pos[-1] - pos[0])[:2]
        band = lowpass(np.column_stack([pos[:, :2], turn]), 1.0 / float(tg[1] - tg[0]), fc)
        band -= band.mean(axis=0)
        rms = np.sqrt(np.mean(band**2, axis=0))
        out[site.name] = {"slide_um": [float(v) for v in 1e6 * slide],
                          "band_xy_rms_um": [float(v) for v in 1e6 * rms[:2]],
                          "band_tilt_rms_mrad": [float(v) for v in 1e3 * rms[2:4]],
                          "band_yaw_rms_mrad": float(1e3 * rms[4]), "corner_off_share": float(lifted.mean())}  # fmt: skip
    return out


def _board_loads(board_force: np.ndarray) -> dict:
    """What the plates push the soles with (K, 2, 3 N, standing samples): each board's largest and 99th-percentile
    tangential / normal ratio (its friction cone's use), and the horizontal force the two boards push the soles
    apart or together with (half their difference, N rms: the closed chain's internal force)."""
    loaded = board_force[:, :, 2] > 1.0
    out = {"tangential_over_normal_max": [], "tangential_over_normal_p99": []}
    for b in range(board_force.shape[1]):
        f = board_force[loaded[:, b], b]
        ratio = np.hypot(f[:, 0], f[:, 1]) / f[:, 2] if len(f) else np.zeros(1)
        out["tangential_over_normal_max"].append(float(ratio.max()))
        out["tangential_over_normal_p99"].append(float(np.percentile(ratio, 99)))
    both = loaded.all(axis=1)
    squeeze = (board_force[both, 0, :2] - board_force[both, 1, :2]) / 2
    out["internal_horizontal_rms_n"] = [float(v) for v in np.sqrt(np.mean(squeeze**2, axis=0))]
    return out


def _z(est, truth) -> dict:
    fit, nb = est.fit_, est.dynamic_base_.rank
    z = (fit.values[:nb] - est.reference_values(truth)) / fit.se[:nb]
    return {"within_3se": int(np.sum(np.abs(z) < 3)), "parameters": nb, "max_abs_z": float(np.abs(z).max()),
            "mean_z2": float(np.mean(z**2)), "sigma": [float(s) for s in fit.sigma]}  # fmt: skip


def analyse(run: str | pathlib.Path) -> dict:
    from formats.dynamic_recording import DynamicRecording, read_dynamic_recording
    from identify.differentiation import lowpass
    from identify.dynamic import DynamicEstimator
    from robots.params_io import resolve_params
    from robots.registry import get_model

    run = pathlib.Path(run)
    rec = read_dynamic_recording(run / "recording.csv")
    model = get_model(rec.robot)
    truth = resolve_params(str(run / "truth.json"), model)
    tr = dict(np.load(run / "twin_trace.npz"))
    if "qpos" not in tr:
        raise SystemExit(
            f"{run}: its twin_trace.npz predates the whole-state trace; run it again with --twin-trace"
        )
    t, keep = np.unique(tr["t"], return_index=True)
    com, force, moment, q = (tr[k][keep] for k in ("com", "force", "moment", "q"))
    off = _offset(rec.t, rec.q, t, q)
    est = DynamicEstimator(model, rec.base, True, False, quantity="wrench").fit(rec)
    fc, nb = est.cutoff_, est.dynamic_base_.rank
    M = truth.total_mass
    # the trace on a uniform 1 kHz grid spanning the recording
    tg = np.arange(off, off + rec.t[-1], 0.001)

    def angles(delay: float) -> np.ndarray:
        return np.stack([np.interp(tg - delay, t, q[:, j]) for j in range(q.shape[1])], axis=1)

    qg = angles(0.0)
    wg = np.zeros((len(tg), 6))
    wg[:, 2] = np.interp(tg, t, force[:, 2])
    wg[:, 3], wg[:, 4] = (np.interp(tg, t, moment[:, k]) for k in (0, 1))
    cg = np.stack([np.interp(tg, t, com[:, k]) for k in range(3)], axis=1)

    def ideal_recording(qa: np.ndarray) -> DynamicRecording:
        return DynamicRecording(robot=rec.robot, base=rec.base, joint_names=list(rec.joint_names), t=tg - tg[0],
                                q=qa, tau=None, wrench=wg, meta=dict(rec.meta))  # fmt: skip

    ideal = ideal_recording(qg)
    ideal_est = DynamicEstimator(model, rec.base, True, False, cutoff_hz=fc, quantity="wrench").fit(ideal)
    y = ideal_est.filtered_rows(wg[:, [2, 3, 4]], 1000.0)
    ref = ideal_est.reference_values(truth)

    def misfit(qa: np.ndarray) -> np.ndarray:
        A, _, _ = ideal_est.prepare(ideal_recording(qa), reuse_base=True)
        return y - (A[:, :nb] @ ref).reshape(y.shape)

    model_misfit = misfit(qg)
    sl = ideal_est._kept(len(tg), 1000.0)
    band = float(rec.meta.get("motion_band_hz", fc / 4))
    shares = _band_shares(model_misfit, sl.step / 1000.0, band, fc)
    scale = model_misfit.std(axis=0)
    lags = np.arange(-LAG_SPAN_MS, LAG_SPAN_MS + 1)
    cost = [float(np.sum((misfit(angles(1e-3 * d)) / scale).var(axis=0))) for d in lags]
    lag_ms, lag_rms = _parabola_min(lags, cost), misfit(angles(1e-3 * _parabola_min(lags, cost))).std(axis=0)
    cz = lowpass(cg[:, 2:], 1000.0, fc)[:, 0]
    newton = lowpass(wg[:, 2:3], 1000.0, fc)[sl, 0] - M * (G + np.gradient(np.gradient(cz, tg), tg))[sl]
    twin = twin_model(model, truth)  # compiled once for both
    sole = _sole_motion(twin, model, rec.base, t, tr["qpos"][keep], tg, fc)[sl]
    soles = _sole_paths(twin, model, t, tr["qpos"][keep], tg, fc)
    span = (t >= tg[0]) & (t <= tg[-1])
    boards = _board_loads(tr["board_force"][keep][span]) if "board_force" in tr else None  # older traces
    # the recording against the plates, both filtered alike, at the recording's fitted times
    plates = lowpass(wg[:, [2, 3, 4]], 1000.0, fc)
    at = np.stack([np.interp(rec.t + off, tg, plates[:, k]) for k in range(3)], axis=1)
    meas = lowpass(rec.wrench[:, [2, 3, 4]], rec.rate_hz, fc) - at
    meas = meas[est._kept(len(rec.t), rec.rate_hz)]

    def rms(x):
        return [float(v) for v in np.sqrt(np.mean((x - x.mean(axis=0)) ** 2, axis=0))]

    return {
        "run": str(run), "cutoff_hz": fc, "offset_s": off, "rows": ["fz_n", "mx_nm", "my_nm"],
        "newton_fz_rms_n": rms(newton[:, None])[0],
        "model_vs_plates_rms": rms(model_misfit), "model_vs_plates_mean": [float(v) for v in model_misfit.mean(0)],
        "sole_motion_rms": rms(sole), "model_vs_plates_rms_less_sole_motion": rms(model_misfit - sole),
        "model_vs_plates_less_sole_motion_power_share": _band_shares(model_misfit - sole, sl.step / 1000.0, band, fc),
        "model_vs_plates_power_share": {"bands_hz": [band, fc / 2], "rows": shares},
        "plates_lag_ms": lag_ms, "model_vs_plates_rms_at_lag": [float(v) for v in lag_rms],
        "recorded_vs_plates_rms": rms(meas), "recorded_vs_plates_mean": [float(v) for v in meas.mean(0)],
        "fit_recording": _z(est, truth), "fit_plates": _z(ideal_est, truth), "soles": soles, "boards": boards,
    }  # fmt: skip


def _print(r: dict) -> None:
    f = "{:.3f} / {:.3f} / {:.3f}".format
    print(f"{r['run']}: cut-off {r['cutoff_hz']:.2f} Hz, recording t = 0 at simulated {r['offset_s']:.3f} s")
    print(f"  physics, plates' Fz − M(g + z̈_com):          {r['newton_fz_rms_n']:.4f} N rms")
    print(f"  model(truth) − plates, Fz N / Mx / My N·m rms: {f(*r['model_vs_plates_rms'])}")
    rest = zip(("Fz", "Mx", "My"), r["model_vs_plates_less_sole_motion_power_share"], strict=True)
    print(f"    the soles' motion on their pads adds:        {f(*r['sole_motion_rms'])}; the model misses the rest by "
          f"{f(*r['model_vs_plates_rms_less_sole_motion'])}, in the bands "
          + " ".join(f"{n} {a:.0%}/{b:.0%}/{c:.0%}" for n, (a, b, c) in rest))  # fmt: skip
    lo, mid = r["model_vs_plates_power_share"]["bands_hz"]
    rows = zip(("Fz", "Mx", "My"), r["model_vs_plates_power_share"]["rows"], strict=True)
    shares = " ".join(f"{n} {a:.0%}/{b:.0%}/{c:.0%}" for n, (a, b, c) in rows)
    print(f"    its power ≤ {1.1 * lo:.2g} Hz / to {mid:.2g} Hz / above: {shares}")
    print(f"    the plates lag the angles by {r['plates_lag_ms']:.1f} ms; the angles delayed so: "
          f"{f(*r['model_vs_plates_rms_at_lag'])}")  # fmt: skip
    for name, p in r["soles"].items():
        print(f"    {name} slid {p['slide_um'][0]:+.0f} / {p['slide_um'][1]:+.0f} µm (x / y); in the band moves "
              f"{p['band_xy_rms_um'][0]:.0f} / {p['band_xy_rms_um'][1]:.0f} µm, tilts "
              f"{p['band_tilt_rms_mrad'][0]:.2f} / {p['band_tilt_rms_mrad'][1]:.2f} mrad, turns "
              f"{p['band_yaw_rms_mrad']:.2f} mrad rms; a corner off its board {p['corner_off_share']:.0%} of the time")  # fmt: skip
    if r["boards"] is not None:
        b = r["boards"]
        print(f"    the boards' tangential / normal force: max {' / '.join(f'{v:.2f}' for v in b['tangential_over_normal_max'])}"
              f" (99 %: {' / '.join(f'{v:.2f}' for v in b['tangential_over_normal_p99'])}); the closed chain "
              f"pushes the soles apart by {b['internal_horizontal_rms_n'][0]:.1f} / "
              f"{b['internal_horizontal_rms_n'][1]:.1f} N rms (x / y)")  # fmt: skip
    print(f"  recorded − plates, Fz N / Mx / My N·m rms:     {f(*r['recorded_vs_plates_rms'])}")
    for k in ("fit_recording", "fit_plates"):
        z = r[k]
        print(f"  {k}: {z['within_3se']}/{z['parameters']} within 3 SE, max |z| {z['max_abs_z']:.2f}, "
              f"mean z² {z['mean_z2']:.2f}, σ {' / '.join(f'{s:.3f}' for s in z['sigma'])}")  # fmt: skip


def run(quick: bool = False) -> dict:
    """`make bench`: the test's 10 s double-support design on the twin (scale 0.5), traced, then analysed."""
    from poise.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "run"
        args = ["run", str(PLAN), "--robot", "sim", "--boards", "sim", "--physics", "mujoco", "--time-scale",
                "0.5", "--no-noise", "--out", str(out), "--yes", "--json", "--twin-trace"]  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()):  # the run's own JSON summary: not this benchmark's
            code = main(args)
        if code != 0:
            raise RuntimeError("the twin run failed")
        result = analyse(out)
    _print(result)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.twin_misfit", description=__doc__.splitlines()[0])
    p.add_argument("run", help="a run directory of `poise run … --physics mujoco --twin-trace`")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    r = analyse(a.run)
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        _print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
