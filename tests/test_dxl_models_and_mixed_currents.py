"""Dynamixel buses mixing servos with and without Present Current: a PWM run streams one joint, whose current is
checked against its own servo's unit; the models without Present Current (address 126 is Present Load) known by
number; an unknown model warned about once; a servo answering PING only with error 3 named as such. Against the
pty bus emulator running dynamixel_sdk unmodified."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_dxl_review_fixes import bench
from test_pwm_stream import TRUTH, pwm_bus, write_bench
from test_pwm_stream import URDF as PWM_URDF

from drivers.config import ServoMap
from drivers.dynamixel import MODELS
from drivers.executor import check_readings
from drivers.link import link_meta
from formats.errors import DeviceError
from formats.pwm_plan import PwmPlan, Segment, save_pwm_plan
from poise.cli import main

XM430, XL430 = 1020, 1060
# the one-joint bench's URDF with a second arm below the first, on joint 'other'
URDF = PWM_URDF.replace('name="pwm-bench"', 'name="pwm-bench2"').replace(
    "</robot>",
    """  <link name="arm2"><inertial><origin xyz="0 0 -0.1" rpy="0 0 0"/><mass value="0.1"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.0002"/></inertial></link>
  <joint name="other" type="revolute"><parent link="arm"/><child link="arm2"/>
    <origin xyz="0 0 -0.2" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1.6" upper="1.6" velocity="8" effort="3"/></joint>
</robot>""",
)


@pytest.fixture(scope="module")
def two_joint_bench(tmp_path_factory):
    """Two joints on one bus, 'pivot' (servo 1) and 'other' (servo 2), and a triangle PWM plan for each."""
    d = write_bench(tmp_path_factory.mktemp("bench2"), URDF, ("pivot", "other"))
    for joint in ("pivot", "other"):
        plan = PwmPlan((Segment("triangle", 8.0, 0.3, 2.0),), joint=joint, link="free")
        save_pwm_plan(plan, d / f"{joint}.json")
    return d


def _pwm_run(d, out, joint, models):
    """`poise run` of the triangle on `joint` (its servo's PWM drive emulated), the servos' model numbers `models`."""
    bus, cfg = pwm_bus(d, joint, models)
    try:
        code = main(["run", str(d / f"{joint}.json"), "--robot", f"dxl:{bus.path}?baud={cfg.baud}", "--config",
                     str(d / "bench.toml"), "--out", str(out), "--drive-inertia", str(TRUTH.armature),
                     "--yes"])  # fmt: skip
    finally:
        bus.close()
    return code


@pytest.mark.parametrize(
    "joint, models",
    [
        ("pivot", {1: XL430, 2: XM430}),  # the streamed XL430 first on the link
        ("other", {1: XM430, 2: XL430}),  # the streamed XL430 second
        ("pivot", {1: XM430, 2: XL430}),  # an XM430 streamed, an XL430 besides
    ],
)
def test_pwm_run_on_a_bus_mixing_an_xl430_and_an_xm430_completes(two_joint_bench, tmp_path, joint, models):
    """The streamed joint's current is checked against its own servo's unit: an XL430-W250 (no Present Current)
    records NaN currents and completes, wherever it sits on the link; an XM430 records real ones."""
    out = tmp_path / "run"
    assert _pwm_run(two_joint_bench, out, joint, models) == 0
    streamed = models[{"pivot": 1, "other": 2}[joint]]
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and meta["ticks_streamed"] == meta["ticks_planned"] > 100
    raw = np.genfromtxt(out / "raw.csv", delimiter=",", names=True)
    assert len(raw) == meta["ticks_streamed"]
    if streamed == XL430:
        assert np.isnan(raw["current"]).all()
    else:
        assert np.isfinite(raw["current"]).all()
    assert np.ptp(raw["q"]) > 0.01  # the joint really moved


def test_check_readings_uses_the_units_of_the_joints_passed():
    """One joint of a two-servo link: its own unit decides (NaN allowed only where its servo has no current);
    joint names are matched to the link's servos, whatever their order in the call."""
    from types import SimpleNamespace

    link = SimpleNamespace(
        current_units_a=np.array([2.69e-3, np.nan]), port="loop", servos=[ServoMap("a", 1), ServoMap("b", 2)]
    )
    check_readings(link, ["b"], angle=0.1, current=float("nan"))  # b: no Present Current
    with pytest.raises(DeviceError, match="a read a non-finite current"):
        check_readings(link, ["a"], angle=0.1, current=float("nan"))
    check_readings(link, ["b", "a"], angle=np.zeros(2), current=np.array([np.nan, 0.2]))
    with pytest.raises(DeviceError, match="a read a non-finite current"):
        check_readings(link, ["b", "a"], angle=np.zeros(2), current=np.array([np.nan, np.nan]))


# e-Manual control tables: address 126 is Present Load on these (no current sensor)
NO_CURRENT = {
    1070: "XC430-W150",
    1080: "XC430-W240",
    1090: "2XL430-W250",
    1160: "2XC430-W250",
    30: "MX-28(2.0)",
}


@pytest.mark.parametrize("model", sorted(NO_CURRENT))
def test_models_without_present_current_are_refused_with_a_torque_constant(model):
    servos = [ServoMap("j0", 1, torque_constant=1.5)]
    with bench(servos=servos, models={1: model}, connect=False) as (bus, plant, link):
        with pytest.raises(DeviceError, match=r"servo 1 \(j0\).*no Present Current.*torque_constant"):
            link.connect()
    with bench(n=2, models={2: model}) as (bus, plant, link):  # without one: connected, its currents NaN
        link.read()
        assert np.isnan(link.currents[1]) and np.isfinite(link.currents[0])
        assert link_meta(link)["servos"]["j1"]["model"] == NO_CURRENT[model]
        assert any(NO_CURRENT[model] in w and "Present Load" in w for w in link.warnings)


def test_models_with_their_own_present_current_unit_are_checked():
    """MX-64(2.0) / MX-106(2.0): 3.36 mA per unit — the default 2.69 is warned about, 3.36 is not."""
    assert MODELS[311][1] == MODELS[321][1] == 3.36
    with bench(n=1, models={1: 321}) as (bus, plant, link):
        assert len(link.warnings) == 1 and "MX-106(2.0)" in link.warnings[0] and "3.36 mA" in link.warnings[0]
    with bench(n=1, models={1: 321}, current_unit_ma=3.36) as (bus, plant, link):
        assert link.warnings == [] and link.current_units_a[0] == pytest.approx(3.36e-3)


def test_unknown_model_is_warned_about_once(capsys):
    with bench(n=3, models={1: 4242, 2: 4242, 3: XM430}) as (bus, plant, link):
        unknown = [w for w in link.warnings if "4242" in w]
        assert len(unknown) == 1 and len(link.warnings) == 1
        assert "not known to poise" in unknown[0] and "not checked" in unknown[0]
        assert "1 (j0)" in unknown[0] and "2 (j1)" in unknown[0] and "3 (j2)" not in unknown[0]
        assert "2.69 mA" in unknown[0] and unknown[0] in capsys.readouterr().err
        assert np.allclose(link.current_units_a, 2.69e-3)  # the configured unit is used
        link.close()
        link.connect()  # a new connect: its own warnings, the unknown model once again
        assert len([w for w in link.warnings if "4242" in w]) == 1
    with bench(n=2, models={1: XM430, 2: 1010}) as (bus, plant, link):  # all known: no warning
        assert link.warnings == []


def test_a_servo_answering_ping_only_with_error_3_is_not_called_silent():
    with bench(n=2, connect=False) as (bus, plant, link):
        bus.damage_next(1, 100)
        with pytest.raises(DeviceError) as err:
            link.connect()
        msg = str(err.value)
        assert "servos [1]" in msg and "error 3" in msg and "damaged instruction" in msg and "cabling" in msg
        assert "do not answer" not in msg and "baud" in msg  # "not the baud rate"
        assert link.comm_errors == link.retries + 1
    with bench(n=2, connect=False) as (bus, plant, link):
        link.servos[1] = ServoMap("j1", 9)  # no servo 9 on the bus: silent
        with pytest.raises(DeviceError, match=r"servos \[9\] do not answer ping at 1000000 baud"):
            link.connect()
