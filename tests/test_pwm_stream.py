"""`poise run PWM_PLAN`: PWM plans streamed through the real Dynamixel driver (dynamixel_sdk, Protocol 2.0) over
a pty to the emulated bus, whose servo in PWM mode is MuJoCo physics with its own true friction, gravity load and
PWM gain; `poise calibrate friction|pwm-gain` recover them from the recording. Refusals before anything opens,
a limit approach that stops with its rows kept, and the servo always put back (Goal PWM 0, torque off, mode)."""

from __future__ import annotations

import json
import time

import dynamixel_sdk
import numpy as np
import pytest

from drivers.config import load_config, servo_order
from drivers.dxl_pwm import PwmState
from drivers.emulators.dxl_bus import ADDR_GOAL_PWM, ADDR_OPERATING_MODE, ADDR_TORQUE, DxlBusEmulator
from drivers.emulators.plant import JointPlant
from drivers.emulators.pwm_drive import PwmDrive, ServoDriveTruth
from drivers.pwm_run import CubicGrid, LinkLoad, PwmRecorder, PwmStream
from formats.calibration_recording import read_drive
from formats.pwm_plan import PwmPlan, Segment, recommended, samples, save_pwm_plan, sweeps
from poise.cli import main
from robots.registry import get_model

TRUTH = ServoDriveTruth()
# 4 Hz: on streamed sweeps (quiet and loaded host) Kc moved −2 % at 6 Hz, −2.5 % at 10 Hz, +3 % at 3 Hz
FIT = ["--vs", str(TRUTH.v_s), "--cutoff-hz", "4", "--speed-min", "0.05", "--margin", "10"]
URDF = """<?xml version="1.0"?>
<robot name="pwm-bench">
  <link name="base_link"><inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="1.0"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0 0 -0.2" rpy="0 0 0"/><mass value="0.3"/>
    <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.0004"/></inertial></link>
  <joint name="pivot" type="revolute"><parent link="base_link"/><child link="arm"/>
    <origin xyz="0 0 0.5" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1.6" upper="1.6" velocity="8" effort="3"/></joint>
</robot>
"""


def write_bench(d, urdf: str = URDF, joints: tuple[str, ...] = ("pivot",)):
    """A servo bench's URDF and robot configuration written to folder `d` (joint k on servo k + 1): `d`."""
    (d / "bench.urdf").write_text(urdf)
    (d / "bench.toml").write_text(
        f'robot = "{d / "bench.urdf"}"\n[link]\nbaud = 1000000\n[executor]\nrate_hz = 100\n'
        "link_timeout_s = 0.5\npwm_limit_pct = 20\n"
        + "".join(f'[[joints]]\nname = "{n}"\nid = {k + 1}\n' for k, n in enumerate(joints))
    )
    return d


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A one-joint servo bench (a 0.3 kg arm hanging 0.2 m below the axis) and its robot configuration."""
    return write_bench(tmp_path_factory.mktemp("bench"))


def pwm_bus(bench, joint: str = "pivot", models: dict[int, int] | None = None):
    """The emulated bus of `bench` (`write_bench`) with `joint`'s servo in PWM mode driving MuJoCo physics (TRUTH),
    the servos' model numbers `models`: (bus, the robot configuration)."""
    cfg = load_config(bench / "bench.toml")
    model = get_model(cfg.robot)
    q0 = np.zeros(len(model.joint_names))
    drive = PwmDrive(model, joint, q0, TRUTH)
    servos = servo_order(cfg, model.joint_names)
    sid = next(s.id for s in servos if s.name == joint)
    bus = DxlBusEmulator(servos, JointPlant(q0), drives={sid: drive}, models=models)
    return bus, cfg


def _run(bench, plan_file, out, *extra):
    bus, cfg = pwm_bus(bench)
    try:
        args = ["run", str(plan_file), "--robot", f"dxl:{bus.path}?baud={cfg.baud}", "--config",
                str(bench / "bench.toml"), "--out", str(out), "--drive-inertia", str(TRUTH.armature),
                "--json", *extra]  # fmt: skip
        code = main(args)
        table = bytes(bus.tables[1])
    finally:
        bus.close()
    return code, table


def _restored(table: bytes) -> None:
    """Goal PWM 0, torque off, position control mode again."""
    assert table[ADDR_OPERATING_MODE] == 3 and table[ADDR_TORQUE] == 0
    assert int.from_bytes(table[ADDR_GOAL_PWM : ADDR_GOAL_PWM + 2], "little", signed=True) == 0


@pytest.fixture(scope="module")
def streamed(bench, tmp_path_factory):
    """The amplitude and frequency sweeps (one period per segment, 29 s) and an 8 % triangle (2 periods), streamed."""
    d = tmp_path_factory.mktemp("runs")
    sw, tri = d / "sweeps.json", d / "triangle.json"
    save_pwm_plan(sweeps("pivot", "free", periods=1), sw)
    save_pwm_plan(PwmPlan((Segment("triangle", 8.0, 0.3, 20 / 3),), joint="pivot", link="free"), tri)
    out = {}
    for name, plan in (("sweeps", sw), ("triangle", tri)):
        code, table = _run(bench, plan, d / name)
        assert code == 0
        _restored(table)
        out[name] = d / name
    return out


def _friction(rec: str, capsys, *extra) -> dict:
    assert main(["calibrate", "friction", rec, "--model", "stribeck", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["fits"][0]


def _within_2_percent(fit: dict) -> None:
    """Friction and PWM gain of a `calibrate friction` fit within 2 % of the emulated servo's truth."""
    for k, v in TRUTH.params().items():
        assert fit["params"][k] == pytest.approx(v, rel=0.02), (k, fit["params"], fit["k_pwm_Nm_per_pct"])
    assert fit["k_pwm_Nm_per_pct"] == pytest.approx(TRUTH.k_pwm_pct(), rel=0.02), fit["params"]


def test_streamed_recording_is_the_plan_on_a_uniform_grid(streamed):
    rec = read_drive(streamed["sweeps"] / "recording.csv")
    t_plan, pct = samples(sweeps("pivot", "free", periods=1))
    assert np.allclose(np.diff(rec.t), 0.01)
    assert len(rec.t) >= len(t_plan) - 3
    n = len(rec.t)
    # each row's PWM is the mean of the Present PWM the servo applied over the row's period: the plan's values
    # k − 1 and k in 0.113 % units, held from the reads that follow their writes (longer when the host was late)
    units = rec.pwm * 885 / 100
    assert np.median(np.abs(units - np.round(pct[:n] * 885 / 100))) < 1
    assert np.abs(rec.pwm).max() <= 16 + 100 / 885 / 2 and np.corrcoef(rec.pwm, pct[:n])[0, 1] > 0.99
    assert rec.inertia == pytest.approx(0.3 * 0.2**2 + 0.002 + TRUTH.armature, rel=1e-6)
    assert rec.tau == pytest.approx(0.3 * 9.81 * 0.2 * np.sin(rec.q), abs=1e-6)  # gravity load at q
    ticks = rec.q * 4096 / (2 * np.pi)
    raw = np.loadtxt(streamed["sweeps"] / "raw.csv", delimiter=",", skiprows=1)
    raw_ticks = raw[:, 6] * 4096 / (2 * np.pi)
    assert np.allclose(raw_ticks, np.round(raw_ticks), atol=1e-6)  # the encoder's 4096 ticks per turn
    assert np.ptp(ticks) > 100  # the link really moved (physics, not a replay)
    vel_units = raw[:, 7] / (0.229 * 2 * np.pi / 60)
    assert np.allclose(vel_units, np.round(vel_units), atol=1e-4)  # Present Velocity in 0.229 rpm units
    meta = json.loads((streamed["sweeps"] / "run.json").read_text())
    assert meta["status"] == "completed" and meta["original_operating_mode"] == 3


def test_friction_and_pwm_gain_recovered_within_2_percent_from_streamed_sweeps(streamed, capsys, tmp_path):
    rec = str(streamed["sweeps"] / "recording.csv")
    fit = _friction(rec, capsys, *FIT, "--out", str(tmp_path / "fric.json"))
    _within_2_percent(fit)
    # the 8 % triangle alone barely leaves the static band; with the sweeps' friction it gives the gain
    tri = str(streamed["triangle"] / "recording.csv")
    assert main(["calibrate", "pwm-gain", tri, "--link", "free", "--friction", str(tmp_path / "fric.json"),
                 "--cutoff-hz", "4", "--json"]) == 0  # fmt: skip
    gain = json.loads(capsys.readouterr().out)
    assert gain["k_pwm_Nm_per_pct"] == pytest.approx(TRUTH.k_pwm_pct(), rel=0.02)


@pytest.fixture
def late_host(monkeypatch):
    """Every 2nd Goal PWM, the host loses the CPU for 10 ms right after its bytes leave: 19–22 ms between reads
    at the 99th percentile, as in the flaky runs (19 ms, at most 29 ms); one flag per Goal PWM: stalled."""
    write = dynamixel_sdk.PortHandler.writePort
    stalls = []

    def late(port, packet) -> int:
        n = write(port, packet)
        b = bytes(packet)  # header FF FF FD 00, id, length; SYNC WRITE (0x83) from Goal PWM
        if b[7:10] == bytes([0x83, ADDR_GOAL_PWM & 0xFF, ADDR_GOAL_PWM >> 8]):
            stalls.append(len(stalls) % 2 == 1)
            if stalls[-1]:
                time.sleep(0.010)
        return n

    monkeypatch.setattr(dynamixel_sdk.PortHandler, "writePort", late)
    return stalls


def test_friction_recovered_within_2_percent_from_a_late_host(bench, tmp_path, capsys, late_host):
    """Late between a Goal PWM and the read reporting it, the host once put the new PWM down up to a period
    late in the recording (and bunched the next reads): Kv −3.5 … −4.5 %, σs⁻ −3 … −4 %; now within 2 %."""
    save_pwm_plan(sweeps("pivot", "free", periods=1), tmp_path / "sweeps.json")
    code, _ = _run(bench, tmp_path / "sweeps.json", tmp_path / "run")
    assert code == 0 and sum(late_host) > 1400
    capsys.readouterr()
    _within_2_percent(_friction(str(tmp_path / "run" / "recording.csv"), capsys, *FIT))


def test_cubic_grid_is_not_thrown_by_bunched_reads():
    """Reads a late host bunched 1 ms apart, positions in whole encoder ticks: the grid stays within a tick."""
    tick = 2 * np.pi / 4096
    times = np.cumsum(np.tile([0.01, 0.01, 0.03, 0.001, 0.001], 40))
    q = lambda t: 0.5 * np.sin(3 * t)  # noqa: E731
    rows: dict[int, tuple[float, float]] = {}
    grid = CubicGrid(times[0] + 0.005, 0.01, lambda k, g, x, gap: rows.__setitem__(k, (g, x)))
    for t in times:
        grid.add(t, np.round(q(t) / tick) * tick)
    grid.flush()
    g, x = np.array(list(rows.values())).T
    assert len(rows) > 200 and np.abs(x - q(g)).max() < tick


def test_pwm_rows_are_what_the_servo_applied_over_their_period(tmp_path):
    """Writes landing 4 ms after the phase of the first read (the grid's anchor): each row's PWM is the mean of
    the staircase the servo held over its period, not the value at its middle (which would be 4 ms early)."""
    n, p, rate = 80, 0.01, 0.5  # %/tick ramp
    stream = PwmStream("pivot", 0, None, np.arange(n) * p, np.arange(n) * rate, 100.0, 0.1, -1.0, 1.0)
    rec = PwmRecorder(tmp_path / "run", stream, LinkLoad(0.0, 0.0, 0.0, 0.01), 0.0, {})
    for k in range(n):
        t = k * p + (0.004 if k else 0.0)
        rec.tick(k, k * rate, PwmState(t, 0.1 * t, 0.1, k * rate, 0.0, t))
    rec.close()
    got = read_drive(tmp_path / "run" / "recording.csv")
    k = np.arange(1, len(got.t))
    assert np.allclose(got.pwm[1:], rate * (k - 0.4), atol=1e-6)


def test_unknown_rotor_inertia_is_fitted(streamed, capsys, tmp_path):
    """A servo's rotor inertia is rarely known: given the link's inertia only, --fit-inertia finds the rest."""
    rec = read_drive(streamed["sweeps"] / "recording.csv")
    link_only = str(rec.inertia - TRUTH.armature)
    opts = [
        "--vs",
        str(TRUTH.v_s),
        "--cutoff-hz",
        "4",
        "--speed-min",
        "0.05",
        "--margin",
        "10",
        "--inertia",
        link_only,
    ]
    wrong = _friction(str(streamed["sweeps"] / "recording.csv"), capsys, *opts)
    fit = _friction(str(streamed["sweeps"] / "recording.csv"), capsys, *opts, "--fit-inertia")
    assert fit["inertia_extra_kg_m2"] == pytest.approx(TRUTH.armature, rel=0.15)
    err = lambda f: max(abs(f["params"][k] / v - 1) for k, v in TRUTH.params().items())  # noqa: E731
    assert err(fit) < 0.03 and err(fit) < err(wrong) / 3
    assert fit["k_pwm_Nm_per_pct"] == pytest.approx(TRUTH.k_pwm_pct(), rel=0.02)


def test_plan_beyond_the_pwm_limit_is_refused_before_any_device_opens(bench, tmp_path, capsys):
    plan = tmp_path / "hot.json"
    save_pwm_plan(PwmPlan((Segment("triangle", 30.0, 0.3, 5.0),), joint="pivot", link="free"), plan)
    bus, cfg = pwm_bus(bench)
    try:
        args = ["run", str(plan), "--robot", f"dxl:{bus.path}", "--config", str(bench / "bench.toml"),
                "--out", str(tmp_path / "run")]  # fmt: skip
        assert main(args) == 2
        assert bus.packets == 0  # nothing was sent
    finally:
        bus.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pwm_limit_pct 20" in err[0] and "30 %" in err[0]
    assert not (tmp_path / "run").exists()
    bad_joint = tmp_path / "elbow.json"
    save_pwm_plan(recommended("elbow", "free"), bad_joint)
    assert main(args[:1] + [str(bad_joint)] + args[2:]) == 2
    assert "not in pwm-bench's description" in capsys.readouterr().err
    fixture = tmp_path / "fixture.json"
    save_pwm_plan(recommended("pivot", "fixture"), fixture)
    assert main(args[:1] + [str(fixture)] + args[2:]) == 2
    assert "needs a joint torque sensor" in capsys.readouterr().err
    assert bus.packets == 0


def test_limit_approach_stops_with_pwm_0_and_keeps_the_rows(bench, tmp_path, capsys):
    plan = tmp_path / "push.json"
    save_pwm_plan(PwmPlan((Segment("triangle", 16.0, 0.3, 4.0),), joint="pivot", link="free"), plan)
    # a 86 deg margin leaves ±0.1 rad of the ±1.6 rad joint: the 16 % push gets there within a second
    code, table = _run(bench, plan, tmp_path / "run", "--limit-margin-deg", "86")
    assert code == 2
    err = capsys.readouterr().err
    assert "came within 86 deg of its limit" in err and "PWM 0, stopped" in err
    _restored(table)
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"].startswith("stopped: SafetyTrip") and meta["ticks_streamed"] < 400
    rec = read_drive(tmp_path / "run" / "recording.csv")
    assert len(rec.t) >= meta["ticks_streamed"] - 3 and np.abs(rec.q).max() < 0.1 + 0.02


@pytest.mark.parametrize("stop", ["ctrl-c", "silent servo"])
def test_interrupted_stream_keeps_its_rows(bench, tmp_path, stop):
    from drivers.link import LinkTimeout, open_link
    from drivers.pwm_run import PwmRecorder, link_load, preflight, stream_pwm

    bus, cfg = pwm_bus(bench)
    model = get_model(cfg.robot)
    plan = PwmPlan((Segment("triangle", 12.0, 0.3, 5.0),), joint="pivot", link="free")
    stream = preflight(plan, model, cfg, None, 5.0)

    def progress(k, n, t, s):
        if k == 60:
            if stop == "ctrl-c":
                raise KeyboardInterrupt
            bus.drop_every = 1  # from now on the servo answers nothing

    link = open_link(f"dxl:{bus.path}?baud={cfg.baud}", model.joint_names, cfg)
    try:
        link.connect()
        rec = PwmRecorder(tmp_path / "run", stream, link_load(model, 0, link.read()), 0.0, {})
        with pytest.raises(KeyboardInterrupt if stop == "ctrl-c" else LinkTimeout):
            stream_pwm(link, stream, rec, cfg.executor.link_timeout_s, progress)
        table = bytes(bus.tables[1])
    finally:
        link.close()
        bus.close()
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"].startswith("stopped") and meta["ticks_streamed"] >= 60
    rec = read_drive(tmp_path / "run" / "recording.csv")  # whole lines: it parses
    assert len(rec.t) >= 55
    if stop == "ctrl-c":
        _restored(table)
        assert meta["restore_failures"] == []
    else:  # nobody to tell: reported, not hidden
        assert meta["restore_failures"]
