"""Every subcommand on a corpus of bad inputs: exit 2, exactly one `poise: error:` line, never a traceback.

The corpus covers every subcommand of the real parser (a new command without entries fails the coverage
test). Inputs are chosen to be refused before any long work starts; `main` runs in-process.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pytest

import robots.data.tulip
from formats.doggy_recording import DoggyRecording, write_csv
from formats.dynamic_recording import DynamicRecording, write_dynamic_recording
from formats.parameter_set import parameter_set_to_json
from formats.plan import Placement, Plan, Posture, save_plan
from formats.static_recording import StaticRecording, write_recording
from formats.trajectory_plan import TrajectoryPlan, save_trajectory_plan
from poise import argtypes
from poise.cli import build_parser, main
from robots.tulip import tulip
from trajectories.fourier import FourierTrajectory
from trajectories.single_support import SingleSupportTrajectory

KEEP = "precious contents\n"


def _leaf_parsers(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """(command words, parser) for every runnable subcommand of the real parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sp in subs[0].choices.items():
        yield from _leaf_parsers(sp, (*prefix, name))


def _static(q_scale: float = 0.3, base: str = "right") -> StaticRecording:
    model = tulip()
    rng = np.random.default_rng(1)
    m = 16
    return StaticRecording(
        "tulip", base, list(model.joint_names), np.arange(m), np.arange(m) // 4,
        rng.uniform(-q_scale, q_scale, (m, model.nq)), rng.uniform(-0.05, 0.05, (m, 2)),
    )  # fmt: skip


def _plan(nq: int = 12) -> Plan:
    rng = np.random.default_rng(0)
    postures = [Posture(i, 0, rng.uniform(-0.2, 0.2, nq), 3.0, 6.0, (0.05, 0.1), 0.09) for i in range(3)]
    names = [f"theta{i}" for i in range(1, nq + 1)]
    return Plan("tulip", "right", names, [Placement(0, (0.0, 0.2, 0.0))], postures, settings={"margin": 0.08})


def _single_support_plan() -> TrajectoryPlan:
    """A (motionless) single-support trajectory plan: `plan check` plans its weight shifts with --config."""
    z = np.zeros((12, 1))
    traj = SingleSupportTrajectory(FourierTrajectory(2.0, 2.0, np.zeros(12), z, z), "right", "sole_l", 0.02)
    names = [f"theta{i}" for i in range(1, 13)]
    return TrajectoryPlan("tulip", "right", names, traj.to_json(), params="sim",
                          settings={"motion": "single-support", "zmp_margin": 0.02})  # fmt: skip


def _doggy(n: int = 200, dt: float = 1e-3) -> DoggyRecording:
    z = np.zeros((n, 3))
    return DoggyRecording(np.arange(n) * dt, z, z + 0.1, z, z, np.zeros(3))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Bad (and a few good) input files; keys are used as {placeholders} in the corpus."""
    d = tmp_path_factory.mktemp("corpus")
    f = {"dir": str(d), "missing_dir": str(d / "no" / "such" / "dir")}

    def put(name, data):
        path = d / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        f[name.split(".")[0]] = str(path)

    put("binary.dat", bytes(range(256)) * 4)
    put("latin1.txt", "masse: 3,5 kg für das Bein\n".encode("latin-1"))
    put("empty.txt", "")
    put("existing.json", KEEP)
    put("existing_png.png", KEEP)
    result = {"format": "poise static result", "parameters": [{"symbol": "a", "value_m": 1.0, "se_m": 0.1}],
              "correlation": {"symbols": ["a"], "matrix": [[1, 0], [0, 1]]}}  # fmt: skip
    put("bad_result.json", json.dumps(result))
    gains = {"format": "poise board gains", "version": 1, "weight_kg": 10.0, "cells": ["TR", "BR", "TL", "BL"],
             "boards": [{"board": "sim0", "gain": [1.0, 1.01, 0.99, 1.0]}, {"board": "sim1", "gain": [1.0] * 4}]}  # fmt: skip
    put("gains_nan.json", json.dumps(gains).replace("1.01", "NaN"))
    put("gains_zero.json", json.dumps(gains).replace("1.01", "0.0"))  # a dead cell, or the weight not over it
    put("gains_three.json", json.dumps(gains).replace("1.0, 1.01, 0.99, 1.0", "1.0, 1.01, 0.99"))
    put("gains_static.json", json.dumps({**gains, "format": "poise static result"}))
    put("binary_urdf.urdf", b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    urdf = (Path(robots.data.tulip.__file__).parent / "tulip.urdf").read_text()
    put("zero_mass.urdf", re.sub(r'<mass value="[^"]*"', '<mass value="0"', urdf))
    model = tulip()
    ps = parameter_set_to_json(model.params["sim"])
    for name, edit in {
        "nan_params": lambda d: d["mass"].update(torso=float("nan")),
        "negative_params": lambda d: d["mass"].update(torso=-15.0),
        "zero_params": lambda d: d["mass"].update({k: 0.0 for k in d["mass"]}),
        "shape_params": lambda d: d["com"].update(torso=[0.0, 0.1]),
        "list_params": lambda d: d.update(mass=[1.0, 2.0]),
        "good_params": lambda d: None,
    }.items():
        doc = json.loads(json.dumps(ps))
        edit(doc)
        put(f"{name}.json", json.dumps(doc))
    save_plan(_plan(), d / "good_plan.json")
    f["good_plan"] = str(d / "good_plan.json")
    f["traj_plan"] = str(Path(__file__).parent / "data" / "tulip_double_support_10s.json")
    save_trajectory_plan(_single_support_plan(), d / "ss_plan.json")
    f["ss_plan"] = str(d / "ss_plan.json")
    spline = json.loads((d / "ss_plan.json").read_text())
    spline["trajectory"]["motion"] = {
        "kind": "spline",
        "times_s": [0.0, 1.0, 1.0, 2.0],
        "q": [[0.0] * 12] * 4,
    }
    put("ss_spline_times.json", json.dumps(spline))  # a standing plan's spline: times not increasing
    spline["trajectory"]["motion"] = {"kind": "spline", "times_s": [0.0, 1.0, 2.0], "q": [[0.0] * 11] * 3}
    put("ss_spline_shape.json", json.dumps(spline))  # … waypoints for 11 of the 12 joints
    put("bad_toml.toml", "[executor\nrate_hz = 100\n")
    put("ur5_config.toml", 'robot = "ur5"\n')
    put("margin_config.toml", "[executor]\nmin_margin = 2.0\n")
    good = json.loads((d / "good_plan.json").read_text())
    bad = json.loads(json.dumps(good))
    bad["postures"][0]["q"][0] = float("nan")
    put("nan_plan.json", json.dumps(bad))
    bad = json.loads(json.dumps(good))
    bad["postures"][1]["q"].pop()
    put("shape_plan.json", json.dumps(bad))
    bad = json.loads(json.dumps(good))
    bad["postures"][1]["hold_s"] = 0
    put("hold0_plan.json", json.dumps(bad))
    write_recording(d / "good_rec.csv", _static())
    f["good_rec"] = str(d / "good_rec.csv")
    write_recording(d / "middle_rec.csv", _static(base="middle"))
    f["middle_rec"] = str(d / "middle_rec.csv")
    text = (d / "good_rec.csv").read_text()
    put("deg_on_rad_rec.csv", text.replace("# angle_unit: rad", "# angle_unit: deg"))
    put("mm_on_m_rec.csv", text.replace("# length_unit: m", "# length_unit: mm"))
    lines = text.splitlines()
    lines[-1] = ",".join(lines[-1].split(",")[:4] + ["nan"] + lines[-1].split(",")[5:])
    put("nan_rec.csv", "\n".join(lines) + "\n")
    put("short_rec.csv", "\n".join(lines[:-1] + [",".join(lines[-1].split(",")[:-3])]) + "\n")
    rng = np.random.default_rng(2)
    t = np.arange(50) * 0.01
    dyn = DynamicRecording(
        "tulip", "right", ["theta1", "theta2"], t, rng.uniform(-1, 1, (50, 2)), np.zeros((50, 2))
    )
    write_dynamic_recording(dyn, d / "dyn.csv")
    f["dyn"] = str(d / "dyn.csv")
    q12 = rng.uniform(-1, 1, (50, 12))
    names = [f"theta{i}" for i in range(1, 13)]
    write_dynamic_recording(
        DynamicRecording("tulip", "torso", names, t, q12, np.zeros((50, 12))), d / "dyn12.csv"
    )
    f["dyn12"] = str(d / "dyn12.csv")
    rows = (d / "dyn.csv").read_text().splitlines()
    rows[-1] = ",".join([rows[-1].split(",")[0], "nan", *rows[-1].split(",")[2:]])
    put("dyn_nan.csv", "\n".join(rows) + "\n")
    result["parameters"][0]["se_m"] = float("nan")
    result["correlation"]["matrix"] = [[1.0]]
    put("nan_result.json", json.dumps(result))
    put("dyn_deg_on_rad.csv", (d / "dyn.csv").read_text().replace("# angle_unit: rad", "# angle_unit: deg"))
    put("dyn_shape.csv", (d / "dyn.csv").read_text().rstrip("\n").rsplit("\n", 1)[0] + "\n0.9,1,2\n")
    write_csv(_doggy(), d / "doggy.csv")
    f["doggy"] = str(d / "doggy.csv")
    put("doggy_short.csv", (d / "doggy.csv").read_text().rstrip("\n") + "\n0.5,0,0\n")
    write_csv(_doggy(dt=1.0), d / "doggy_ms.csv")  # time stamps in ms written as if seconds
    f["doggy_ms"] = str(d / "doggy_ms.csv")
    put("doggy_nan.csv", (d / "doggy.csv").read_text().replace("\n0.1,", "\nnan,", 1))
    rows = "".join(f"{k * 0.01:.2f},0,0,{'nan' if k == 7 else 0}\n" for k in range(60))
    put("drive_nan.csv", "# inertia: 0.06\nt,pwm,q,tau\n" + rows)
    pwm = {"format": "poise pwm plan", "version": 1, "rate_hz": 100.0, "link": "free", "joint": "theta1",
           "segments": [{"shape": "triangle", "amplitude_pct": 8.0, "frequency_hz": 0.3, "duration_s": 2.0}]}  # fmt: skip
    put("pwm_plan.json", json.dumps(pwm))
    put("pwm_elbow.json", json.dumps({**pwm, "joint": "elbow"}))
    put("pwm_nojoint.json", json.dumps({**pwm, "joint": None}))
    put("pwm_hot.json", json.dumps({**pwm, "segments": [{**pwm["segments"][0], "amplitude_pct": 120.0}]}))
    _recorded_priors(d, f, put)
    return f


def _recorded_priors(d: Path, f: dict, put) -> None:
    """Dynamic recordings `plan trajectory --prior` refuses for a double-support design: of another robot, of one
    sole, standing 30 mm from the prior plan's placement, too short for its filter."""
    from dataclasses import replace

    from conftest import TEST_DESIGN, design_wrench

    from formats.trajectory_plan import load_trajectory_plan
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.plan import plan_trajectory

    model, t, q, w = design_wrench(1, 100.0, -0.053)
    wrench = np.zeros((len(t), 6))
    wrench[:, 2:5] = w
    rec = DynamicRecording("tulip", "right", list(model.joint_names), t, q, wrench=wrench,
                           meta={"motion_band_hz": "0.3"})  # fmt: skip
    write_dynamic_recording(rec, d / "rec_ds.csv")
    f["rec_ds"] = str(d / "rec_ds.csv")
    text = (d / "rec_ds.csv").read_text()
    put("rec_ur5.csv", text.replace("# robot: tulip", "# robot: ur5"))
    put("rec_ss.csv", text.replace("# base: right\n", "# base: right\n# motion: single-support\n"))
    lines = text.replace("# motion_band_hz: 0.3\n", "").splitlines(keepends=True)
    put("rec_short.csv", "".join(lines[:66]))  # 0.6 s: the 5 Hz default cut-off drops 0.4 s at each end
    traj = plan_trajectory(load_trajectory_plan(TEST_DESIGN), model)
    chain = replace(traj.chain, target_p=traj.chain.target_p + [0.0, 0.03, 0.0])
    moved = ClosedChainTrajectory(model, chain, traj.independent).sample(t[:401])[0]
    write_dynamic_recording(replace(rec, t=t[:401], q=moved, wrench=wrench[:401]), d / "rec_moved.csv")
    f["rec_moved"] = str(d / "rec_moved.csv")


SIM_RUN = ["{good_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1"]
# (command words, extra argv); placeholders {name} refer to `files`.
CORPUS: list[tuple[str, list[str]]] = [
    # model show
    ("model show", ["tulip", "--params", "{binary}"]),
    ("model show", ["tulip", "--params", "{latin1}"]),
    ("model show", ["tulip", "--params", "{empty}"]),
    ("model show", ["tulip", "--params", "{nan_params}"]),
    ("model show", ["tulip", "--params", "{negative_params}"]),
    ("model show", ["tulip", "--params", "{zero_params}"]),
    ("model show", ["tulip", "--params", "{shape_params}"]),
    ("model show", ["tulip", "--params", "{list_params}"]),
    ("model show", ["tulip", "--base", "middle"]),
    ("model show", ["{binary_urdf}"]),
    ("model show", ["{zero_mass}", "--regressor", "torque"]),
    ("model show", ["tulip", "--regressor", "ft:nowhere"]),
    ("model show", ["tulip", "--regressor", "torque:abc"]),
    ("model show", ["tulip", "--regressor", "base-wrench:fz,zz"]),
    # model export
    ("model export", ["tulip", "--params", "{nan_params}", "--out", "{dir}/x1.urdf"]),
    ("model export", ["tulip", "--params", "{good_params}", "--out", "{dir}/x1.urdf", "--consistent"]),
    ("model export", ["tulip", "--params", "{good_params}", "--out", "{dir}/x1.urdf", "--consistent", "0"]),
    ("model export", ["tulip", "--params", "{good_params}", "--out", "{dir}/x1.urdf", "--consistent", "nan"]),
    ("model export", ["tulip", "--params", "{binary}", "--out", "{dir}/x1.urdf"]),
    ("model export", ["tulip", "--params", "{bad_result}", "--out", "{dir}/x1.urdf"]),
    ("model export", ["tulip", "--params", "{dir}/none.json", "--out", "{dir}/x1.urdf"]),
    ("model export", ["tulip", "--params", "{shape_params}", "--out", "{existing}"]),
    ("model export", ["atlas", "--params", "{nan_params}", "--out", "{dir}/x1.urdf"]),
    # identify static
    ("identify static", ["{binary}"]),
    ("identify static", ["{latin1}"]),
    ("identify static", ["{empty}"]),
    ("identify static", ["{middle_rec}"]),
    ("identify static", ["{deg_on_rad_rec}"]),
    ("identify static", ["{mm_on_m_rec}"]),
    ("identify static", ["{nan_rec}"]),
    ("identify static", ["{short_rec}"]),
    ("identify static", ["{good_rec}", "--reference", "{binary}"]),
    ("identify static", ["{good_rec}", "--guess", "{negative_params}"]),
    ("identify static", ["{good_rec}", "--guess", "{zero_params}"]),
    ("identify static", ["{good_rec}", "--plot", "{dir}/fit.docx"]),
    ("identify static", ["{good_rec}", "--out", "{existing}"]),
    ("identify static", ["{good_rec}", "--out", "{missing_dir}/r.json"]),
    ("identify static", ["{good_rec}", "--out", "{dir}"]),
    # identify ft-pwm
    ("identify ft-pwm", ["{binary}"]),
    ("identify ft-pwm", ["{latin1}"]),
    ("identify ft-pwm", ["{empty}"]),
    ("identify ft-pwm", ["{dyn}"]),
    ("identify ft-pwm", []),
    ("identify ft-pwm", ["--simulate", "--noise", "nan,0.1,0.1"]),
    ("identify ft-pwm", ["--simulate", "--duration", "-5"]),
    ("identify ft-pwm", ["--simulate", "--alpha", "1.5"]),
    # identify dynamic
    ("identify dynamic", ["{binary}"]),
    ("identify dynamic", ["{latin1}"]),
    ("identify dynamic", ["{empty}"]),
    ("identify dynamic", ["{dyn_deg_on_rad}"]),
    ("identify dynamic", ["{dyn_shape}"]),
    ("identify dynamic", ["{dyn_nan}"]),
    ("identify dynamic", ["{dyn}", "--cutoff-hz", "nan"]),
    ("identify dynamic", ["{dyn}", "{dyn12}"]),
    ("identify dynamic", ["{dyn}", "--drift", "1"]),
    ("identify dynamic", ["{dyn}", "--drift", "9"]),
    ("identify dynamic", ["{dyn}", "{binary}"]),
    ("identify dynamic", ["{dyn}", "--cutoff-hz", "0"]),
    ("identify dynamic", ["{dyn}", "--plot", "{dir}/x.unknown"]),
    ("identify dynamic", ["{dyn12}", "--validate", "{binary}"]),
    ("identify dynamic", ["{dyn12}", "--reference", "{zero_params}"]),
    ("identify dynamic", ["{dyn12}", "--instruments", "{binary}"]),
    ("identify dynamic", ["{dyn12}", "--instruments", "{traj_plan}"]),
    ("identify dynamic", ["{dyn12}", "--instruments", "{traj_plan}", "{traj_plan}"]),
    ("identify dynamic", ["{dyn}", "--instruments", "{traj_plan}"]),
    ("identify dynamic", ["{dyn}", "--instruments"]),
    # simulate static
    ("simulate static", ["tulip", "--truth", "{binary}", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--truth", "{latin1}", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--truth", "{negative_params}", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--truth", "{zero_params}", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--seed", "-1", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--noise-mm", "nan", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--noise-mm", "-1", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--postures", "0", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--postures", "2.5", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--base", "middle", "--out", "{dir}/s1.csv"]),
    ("simulate static", ["tulip", "--out", "{existing}"]),
    ("simulate static", ["tulip", "--out", "{dir}/s1.csv", "--truth-out", "{existing}"]),
    ("simulate static", ["tulip", "--out", "{missing_dir}/s.csv"]),
    ("simulate static", ["atlas", "--out", "{dir}/s1.csv"]),
    # simulate trajectory
    ("simulate trajectory", ["{binary}", "--out", "{dir}/t1.csv"]),
    ("simulate trajectory", ["{good_plan}", "--out", "{dir}/t1.csv"]),
    ("simulate trajectory", ["{binary}", "--out", "{dir}/t1.csv", "--rate-hz", "inf"]),
    ("simulate trajectory", ["{binary}", "--out", "{dir}/t1.csv", "--rate-hz", "1e9"]),
    ("simulate trajectory", ["{binary}", "--out", "{dir}/t1.csv", "--encoder-ticks", "-1"]),
    ("simulate trajectory", ["{binary}", "--out", "{existing}"]),
    # run
    ("run", ["{binary}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1"]),
    (
        "run",
        ["{binary}", "--robot", "sim", "--out", "{dir}/run1"],
    ),  # not a plan: said so, not "needs --boards"
    ("run", ["{missing_dir}/plan.json", "--robot", "sim", "--out", "{dir}/run1"]),
    ("run", ["{nan_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1"]),
    ("run", ["{hold0_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "dxl:/dev/null?baud=abc", "--boards", "sim", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "serial:/dev/null?baud=0", "--boards", "sim", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "bogus:x", "--boards", "sim", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "dxl:", "--boards", "sim", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "serial:a,b?baud=-3", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "bt:?mode=99", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "bt:AA,BB?mode=99", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "sim", "--twin-trace", "--out", "{dir}/run1"]),
    (
        "run",
        ["{good_plan}", "--robot", "sim", "--boards", "sim", "--start", "set-down", "--out", "{dir}/run1"],
    ),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "sim", "--start", "hoist", "--out", "{dir}/run1"]),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "bt:AA,BB?rate=5", "--out", "{dir}/run1"]),
    (
        "run",
        ["{good_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1", "--time-scale", "nan"],
    ),
    ("run", ["{good_plan}", "--robot", "sim", "--boards", "sim", "--out", "{existing}"]),
    # run PWM_PLAN: refused before any device opens
    ("run", ["{pwm_hot}", "--robot", "sim", "--out", "{dir}/run_pwm"]),
    ("run", ["{pwm_elbow}", "--robot", "sim", "--out", "{dir}/run_pwm"]),
    ("run", ["{pwm_nojoint}", "--robot", "sim", "--out", "{dir}/run_pwm"]),
    ("run", ["{pwm_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run_pwm"]),
    ("run", ["{pwm_plan}", "--robot", "sim", "--out", "{dir}/run_pwm", "--limit-margin-deg", "nan"]),
    ("run", ["{pwm_plan}", "--robot", "sim", "--out", "{dir}/run_pwm", "--drive-inertia", "-1"]),
    ("run", ["{pwm_plan}", "--robot", "sim", "--out", "{dir}/run_pwm", "--joint", "theta2"]),
    ("run", ["{pwm_plan}", "--robot", "serial:/dev/null", "--out", "{dir}/run_pwm"]),
    (
        "run",
        ["{good_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1", "--config", "{binary}"],
    ),
    (
        "run",
        ["{good_plan}", "--robot", "sim", "--boards", "sim", "--out", "{dir}/run1", "--config", "{latin1}"],
    ),
    (
        "run",
        [
            "{good_plan}",
            "--robot",
            "sim",
            "--boards",
            "sim",
            "--out",
            "{dir}/run1",
            "--config",
            "{dir}/no.toml",
        ],
    ),
    # boards read
    ("boards list", ["--json", "/dev/input/event3"]),  # takes no endpoint: it finds them
    ("boards read", ["--boards", "serial:/dev/null?baud=abc"]),
    ("boards read", ["--boards", "bt:"]),
    ("boards read", ["--boards", "usb:1,2"]),
    ("boards read", ["--boards", "evdev:/dev/a,/dev/b?fit=cubic"]),
    ("boards read", ["--boards", "sim", "--seconds", "nan"]),
    ("boards read", ["--boards", "sim", "--seconds", "-1"]),
    ("boards read", ["--boards", "sim", "--tare", "inf"]),
    ("boards read", ["--boards", "sim", "--board-gains", "{gains_nan}"]),
    ("boards read", ["--boards", "sim", "--board-gains", "{binary}"]),
    ("boards calibrate", ["--boards", "sim", "--weight", "0", "--out", "{dir}/g.json"]),
    ("boards calibrate", ["--boards", "sim", "--weight", "nan", "--out", "{dir}/g.json"]),
    ("boards calibrate", ["--boards", "sim", "--weight", "10", "--weight-sd", "1", "--out", "{dir}/g.json"]),
    ("boards calibrate", ["--boards", "usb:1,2", "--weight", "10", "--out", "{dir}/g.json"]),
    ("boards calibrate", ["--boards", "sim", "--weight", "10", "--out", "{existing}"]),
    ("boards calibrate", ["--boards", "sim", "--weight", "10", "--seconds", "-1", "--out", "{dir}/g.json"]),
    ("run", [*SIM_RUN, "--noise-seed", "-1"]),
    ("run", [*SIM_RUN, "--noise-seed", "2", "--no-noise"]),
    (
        "run",
        [
            "{good_plan}",
            "--robot",
            "dxl:/dev/null",
            "--boards",
            "sim",
            "--noise-seed",
            "3",
            "--out",
            "{dir}/r",
        ],
    ),
    ("run", [*SIM_RUN, "--board-gains", "{gains_zero}"]),
    ("run", [*SIM_RUN, "--board-gains", "{gains_three}"]),
    ("run", [*SIM_RUN, "--board-gains", "{gains_static}"]),
    ("run", [*SIM_RUN, "--board-gains", "{missing_dir}/g.json"]),
    ("run", [*SIM_RUN, "--board-gains", "{gains_nan}", "--no-noise"]),
    # demo
    ("demo", ["--postures", "12"]),
    ("demo", ["--placements", "0"]),
    ("demo", ["--postures", "14", "--placements", "3"]),
    ("demo", ["--hold-s", "0"]),
    ("demo", ["--time-scale", "inf"]),
    ("demo", ["--seed", "-1"]),
    ("demo", ["--out", "{existing}"]),
    # solve doggy
    ("solve doggy", ["--data", "{binary}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--data", "{latin1}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--data", "{empty}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--data", "{doggy_ms}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--data", "{doggy_nan}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--data", "{doggy_short}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "inf", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "nan", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "0.5", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "2", "--plan", "{binary}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "2", "--plan", "{empty}", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "2", "--plan", "{good_rec}", "--out", "{dir}/d1.json"]),
    # plan doggy
    ("plan doggy", ["--duration", "0", "--out", "{dir}/dg.json"]),
    ("plan doggy", ["--duration", "nan", "--out", "{dir}/dg.json"]),
    ("plan doggy", ["--seed", "-1", "--out", "{dir}/dg.json"]),
    ("plan doggy", ["--out", "{existing}"]),
    ("solve doggy", ["--simulate", "2", "--seed", "-1", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "2", "--max-iter", "0", "--out", "{dir}/d1.json"]),
    ("solve doggy", ["--simulate", "2", "--out", "{existing}"]),
    ("solve doggy", ["--simulate", "2", "--out", "{dir}/d1.json", "--plot", "{existing}"]),
    ("solve doggy", ["--data", "{doggy}", "--simulate", "2", "--out", "{dir}/d1.json"]),
    # plan postures
    ("plan postures", ["tulip", "--placements", "0", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--margin", "nan", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--margin", "-0.1", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--feet-gap", "inf", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--hold-s", "0", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--move-s", "-1", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--seed", "-1", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--starts", "0", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--postures", "10", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--postures", "14", "--placements", "3", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--scheduler", "no address", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--uncertainty", "{binary}", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--uncertainty", "{latin1}", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--uncertainty", "nan", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--uncertainty", "{bad_result}", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--uncertainty", "{nan_result}", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--uncertainty-sigma", "0", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--sharpness", "64,8", "--out", "{dir}/p1.json"]),
    ("plan postures", ["tulip", "--out", "{existing}"]),
    ("plan postures", ["tulip", "--out", "{missing_dir}/p.json"]),
    ("plan postures", ["atlas", "--out", "{dir}/p1.json"]),
    # plan augment
    ("plan augment", ["{binary}", "--add", "1", "--out", "{dir}/a1.json"]),
    ("plan augment", ["{nan_plan}", "--add", "1", "--out", "{dir}/a1.json"]),
    ("plan augment", ["{good_plan}", "--add", "0", "--out", "{dir}/a1.json"]),
    ("plan augment", ["{good_plan}", "--add", "1", "--pool", "-2", "--out", "{dir}/a1.json"]),
    ("plan augment", ["{good_plan}", "--add", "1", "--seed", "-1", "--out", "{dir}/a1.json"]),
    ("plan augment", ["{good_plan}", "--add", "1", "--out", "{existing}"]),
    # plan forecast
    ("plan sample", ["{binary}", "--out", "{dir}/sp.csv"]),
    ("plan sample", ["{good_plan}", "--out", "{dir}/sp.csv"]),  # a posture plan: no motion to sample
    ("plan sample", ["{traj_plan}", "--out", "{existing}"]),
    ("plan sample", ["{traj_plan}", "--out", "{dir}/sp.csv", "--rate-hz", "0"]),
    ("plan sample", ["{traj_plan}", "--out", "{dir}/sp.csv", "--rate-hz", "nan"]),
    ("plan sample", ["{traj_plan}", "--out", "{missing_dir}/sp.csv"]),
    ("plan forecast", ["{binary}", "--noise", "1"]),
    ("plan forecast", ["{good_plan}", "--noise", "1"]),
    ("plan forecast", ["{traj_plan}", "--noise", "1", "2"]),
    ("plan forecast", ["{traj_plan}", "--noise", "nan"]),
    ("plan forecast", ["{traj_plan}", "--noise", "1", "--well", "0"]),
    ("plan forecast", ["{traj_plan}", "--noise", "1", "--rate-hz", "0"]),
    ("plan forecast", ["{traj_plan}", "--noise", "1", "--params", "{binary}"]),
    ("plan forecast", ["{traj_plan}", "--noise", "1", "--plot", "{existing_png}"]),
    ("plan forecast", ["{traj_plan}", "--noise", "1", "--plot", "{dir}/x.unknown"]),
    ("plan forecast", ["{traj_plan}", "{ss_plan}", "--noise", "1"]),
    ("plan forecast", ["{traj_plan}", "{binary}", "--noise", "1"]),
    ("plan forecast", ["{traj_plan}", "{dir}/missing.json", "--noise", "1"]),
    # plan trajectory
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--max-kappa", "1"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--duration", "inf"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--period", "nan"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--harmonics", "0"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--waypoints", "8", "--harmonics", "3"]),
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--lift", "0.05"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--duration", "1e9"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--samples", "100000000"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--rate-hz", "0"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--seed", "-3"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--params", "{binary}"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--row-noise", "1", "1", "1"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--focus", "ϑ0"]),
    ("plan reach", ["tulip", "--noise", "nan"]),
    ("plan reach", ["tulip", "--noise", "1", "--only", "x"]),
    ("plan reach", ["tulip"]),
    ("plan reach", ["tulip", "--double-support", "--noise", "1", "2"]),
    ("plan reach", ["tulip", "--noise", "1", "--plot", "{dir}/r.txt"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--focus", "ϑ2", "nan"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--focus", "ϑ2", "ϑ2", "--criterion", "logvar"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--focus", "ϑ2"]),
    (
        "plan trajectory",
        ["tulip", "--double-support", "--out", "{dir}/t1.json", "--row-noise", "0", "1", "1"],
    ),
    (
        "plan trajectory",
        ["tulip", "--double-support", "--out", "{dir}/t1.json", "--row-noise", "1", "nan", "1"],
    ),
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--row-noise", "1", "1"]),
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--prior", "{traj_plan}"]),
    (
        "plan trajectory",
        ["tulip", "--double-support", "--simplified", "--out", "{dir}/t1.json", "--prior", "{ss_plan}"],
    ),
    ("plan trajectory", ["tulip", "--single-support", "--out", "{dir}/t1.json", "--prior", "{traj_plan}"]),
    # single support takes single-support priors only, on its stance sole and model
    (
        "plan trajectory",
        ["tulip", "--single-support", "--simplified", "--out", "{dir}/t1.json", "--prior", "{traj_plan}"],
    ),
    (
        "plan trajectory",
        ["tulip", "--single-support", "--simplified", "--out", "{dir}/t1.json", "--prior", "{ss_plan}"],
    ),
    (
        "plan trajectory",
        ["tulip", "--single-support", "--base", "left", "--out", "{dir}/t1.json", "--prior", "{ss_plan}"],
    ),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--prior", "{ss_plan}"]),
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--prior", "{binary}"]),
    # recordings as priors: another robot, one sole for two, another placement than the plan's, too short to filter
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--prior", "{rec_ur5}"]),
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--prior", "{rec_ss}"]),
    (
        "plan trajectory",
        [
            "tulip",
            "--double-support",
            "--simplified",
            "--out",
            "{dir}/t1.json",
            "--prior",
            "{traj_plan}",
            "{rec_moved}",
        ],
    ),  # fmt: skip
    ("plan trajectory", ["tulip", "--double-support", "--out", "{dir}/t1.json", "--prior", "{rec_short}"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--prior", "{rec_ds}"]),
    ("plan trajectory", ["tulip", "--out", "{existing}"]),
    # the run configuration a single-support design's weight shifts are checked with, refused before designing
    ("plan trajectory", ["tulip", "--single-support", "--out", "{dir}/t1.json", "--config", "{ur5_config}"]),
    ("plan trajectory", ["tulip", "--single-support", "--out", "{dir}/t1.json", "--config", "{bad_toml}"]),
    (
        "plan trajectory",
        ["tulip", "--single-support", "--out", "{dir}/t1.json", "--config", "{margin_config}"],
    ),
    ("plan trajectory", ["tulip", "--single-support", "--out", "{dir}/t1.json", "--config", "{binary}"]),
    ("plan trajectory", ["tulip", "--out", "{dir}/t1.json", "--config", "{ur5_config}"]),
    # plan check
    ("plan check", ["{binary}"]),
    ("plan check", ["{latin1}"]),
    ("plan check", ["{empty}"]),
    ("plan check", ["{nan_plan}"]),
    ("plan check", ["{shape_plan}"]),
    ("plan check", ["{hold0_plan}"]),
    ("plan check", ["{good_plan}", "--params", "{binary}"]),
    ("plan check", ["{good_plan}", "--params", "{negative_params}"]),
    ("plan check", ["{good_plan}", "--params", "{zero_params}"]),
    ("plan check", ["{ss_plan}", "--config", "{bad_toml}"]),
    ("plan check", ["{ss_spline_times}"]),
    ("plan check", ["{ss_spline_shape}"]),
    ("plan show", ["{ss_spline_times}", "--out", "{dir}/s.png"]),
    ("plan check", ["{ss_plan}", "--config", "{ur5_config}"]),
    ("plan check", ["{ss_plan}", "--config", "{margin_config}"]),
    ("plan check", ["{ss_plan}", "--config", "{latin1}"]),
    # plan show
    ("plan show", ["{binary}", "--out", "{dir}/f1.png"]),
    ("plan show", ["{good_plan}", "--out", "{dir}/f1.docx"]),
    ("plan show", ["{good_plan}", "--out", "{dir}/noext"]),
    ("plan show", ["{good_plan}", "--out", "{existing_png}"]),
    ("plan show", ["{good_plan}", "--out", "{existing}"]),
    # calibrate friction
    ("calibrate friction", ["{binary}"]),
    ("calibrate friction", ["{latin1}"]),
    ("calibrate friction", ["{empty}"]),
    ("calibrate friction", ["{dyn}"]),
    ("calibrate friction", ["{drive_nan}"]),
    ("calibrate friction", ["{drive_nan}", "--simulate"]),
    ("calibrate friction", ["--simulate", "--vs", "0"]),
    ("calibrate friction", ["--simulate", "--accel-max", "nan"]),
    ("calibrate friction", ["--simulate", "--out", "{existing}"]),
    ("calibrate friction", ["--simulate", "--plot", "{dir}/f.docx"]),
    ("calibrate friction", ["--simulate", "--plan", "{good_plan}"]),
    # calibrate pwm-gain
    ("calibrate pwm-gain", ["{binary}"]),
    ("calibrate pwm-gain", ["{dyn}"]),
    ("calibrate pwm-gain", ["{drive_nan}", "--link", "free"]),
    ("calibrate pwm-gain", ["--simulate", "--link", "hand"]),
    ("calibrate pwm-gain", ["--simulate", "--friction", "{binary}"]),
    ("calibrate pwm-gain", ["--simulate", "--link", "free", "--friction", "{bad_result}"]),
    ("calibrate pwm-gain", ["--simulate", "--plan", "{good_plan}"]),
    ("calibrate pwm-gain", ["--simulate", "--out", "{existing}"]),
    # calibrate pwm-plan
    ("calibrate pwm-plan", ["--out", "{existing}"]),
    ("calibrate pwm-plan", ["--out", "{missing_dir}/p.json"]),
    ("calibrate pwm-plan", ["--out", "{dir}/pp.json", "--link", "hand"]),
    # calibrate accelerometer
    ("calibrate accelerometer", ["{binary}"]),
    ("calibrate accelerometer", ["{empty}"]),
    ("calibrate accelerometer", ["{dyn}"]),
    ("calibrate accelerometer", ["{dyn}", "--runs", "3"]),
    ("calibrate accelerometer", ["--simulate", "--bound", "nan"]),
    ("calibrate accelerometer", ["--simulate", "--runs", "0"]),
    ("calibrate accelerometer", ["--simulate", "--plot", "{existing_png}"]),
    # calibrate encoder-offsets
    ("calibrate encoder-offsets", ["{binary}"]),
    ("calibrate encoder-offsets", ["{dyn}"]),
    ("calibrate encoder-offsets", ["--simulate", "--robot", "atlas"]),
    ("calibrate encoder-offsets", ["--simulate", "--sensors", "nowhere"]),
    ("calibrate encoder-offsets", ["--simulate", "--bound-deg", "0"]),
    ("calibrate encoder-offsets", ["--simulate", "--smooth-window", "4"]),
    ("calibrate encoder-offsets", ["--simulate", "--decimate", "0"]),
    ("calibrate encoder-offsets", ["--simulate", "--reference-deg", "1,nan"]),
    ("calibrate encoder-offsets", ["--simulate", "--reference-deg", "1,2"]),
    ("calibrate encoder-offsets", ["--simulate", "--out", "{existing}"]),
]


def _ids():
    return [f"{cmd}:{' '.join(a)}" for cmd, a in CORPUS]


def test_corpus_covers_every_subcommand():
    commands = {" ".join(words) for words, _ in _leaf_parsers(build_parser())}
    assert {cmd for cmd, _ in CORPUS} == commands


@pytest.mark.parametrize("cmd, extra", CORPUS, ids=_ids())
def test_bad_input_is_one_line_exit_2(cmd, extra, files, capsys):
    argv = cmd.split() + [a.format(**files) for a in extra]
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, (argv, err)
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("poise: error: "), err
    for name in ("existing", "existing_png"):  # refused outputs are never touched
        assert open(files[name]).read() == KEEP


def test_numeric_options_are_range_checked_and_outputs_have_force():
    """New options cannot slip in with a bare int/float (NaN, inf, negatives) or an unguarded output file."""
    out_types = {argtypes.out_file, argtypes.image_file}
    for words, parser in _leaf_parsers(build_parser()):
        dests = {a.dest for a in parser._actions}
        for a in parser._actions:
            assert a.type not in (int, float), (
                f"poise {' '.join(words)} {a.option_strings}: use poise.argtypes"
            )
            if a.type in out_types:
                assert "force" in dests, f"poise {' '.join(words)} writes {a.option_strings} without --force"


@pytest.mark.parametrize(
    "plan, message", [("{binary}", "not a plan poise runs"), ("{missing_dir}/p.json", "no such plan file")]
)
def test_run_says_what_is_wrong_with_the_plan_file_before_asking_for_boards(plan, message, files, capsys):
    assert main(["run", plan.format(**files), "--robot", "sim", "--out", files["dir"] + "/run9"]) == 2
    assert message in capsys.readouterr().err
