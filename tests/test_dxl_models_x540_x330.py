"""The X-series models added to `MODELS` (XH540, XD430/XD540, XW430/XW540, XC330), each checked against its
ROBOTIS e-Manual control table: known by number on connect (no unknown-model warning), their Present Current unit
checked against `[link] current_unit_ma` and used to scale address 126. Against the pty bus emulator running
dynamixel_sdk unmodified."""

from __future__ import annotations

import pytest
from test_dxl_review_fixes import bench

from drivers.dynamixel import MODELS
from drivers.link import link_meta

# e-Manual control tables (address 0 default; address 126 Present Current in 2.69 mA)
X540_X430 = {
    1011: "XD430-T210",
    1100: "XH540-W270",
    1101: "XD540-T270",
    1110: "XH540-W150",
    1111: "XD540-T150",
    1140: "XH540-V270",
    1150: "XH540-V150",
    1170: "XW540-T260",
    1180: "XW540-T140",
    1270: "XW430-T333",
    1280: "XW430-T200",
    1310: "XW540-H260",
}
# address 126 Present Current in 1.0 mA (measured at the power input)
XC330 = {1210: "XC330-T181", 1220: "XC330-T288", 1230: "XC330-M181", 1240: "XC330-M288"}


def test_the_new_entries_hold_the_e_manual_name_and_unit():
    assert {m: MODELS[m] for m in X540_X430} == {m: (name, 2.69) for m, name in X540_X430.items()}
    assert {m: MODELS[m] for m in XC330} == {m: (name, 1.0) for m, name in XC330.items()}


@pytest.mark.parametrize("model", sorted(X540_X430))
def test_a_2_69_ma_model_is_known_and_its_unit_checked(model):
    name = X540_X430[model]
    with bench(n=1, models={1: model}) as (bus, plant, link):  # the default 2.69 mA: nothing to say
        assert link.warnings == []
        info = link_meta(link)["servos"]["j0"]
        assert info["model_number"] == model and info["model"] == name and info["current_unit_ma"] == 2.69
    with bench(n=1, models={1: model}, current_unit_ma=1.0) as (bus, plant, link):
        assert len(link.warnings) == 1 and "not known" not in link.warnings[0]
        assert f"servo 1 (j0) is an {name} (model {model})" in link.warnings[0]
        assert (
            "Present Current unit is 2.69 mA" in link.warnings[0]
            and "off by a factor 0.372" in link.warnings[0]
        )


@pytest.mark.parametrize("model", sorted(XC330))
def test_an_xc330_reads_its_current_in_1_ma_units(model):
    name = XC330[model]
    with bench(n=2, models={1: model, 2: 1020}) as (bus, plant, link):  # 2.69 mA: right for the XM430 only
        assert len(link.warnings) == 1 and "not known" not in link.warnings[0]
        assert (
            f"servo 1 (j0) is an {name} (model {model}), whose Present Current unit is 1 mA"
            in link.warnings[0]
        )
        assert "off by a factor 2.69" in link.warnings[0]
    with bench(n=2, models={1: model, 2: model}, current_unit_ma=1.0) as (bus, plant, link):
        assert link.warnings == [] and link_meta(link)["servos"]["j0"]["model"] == name
        bus.tables[1][126:128] = (500).to_bytes(2, "little")  # 500 units on address 126
        bus.tables[2][126:128] = ((-250) & 0xFFFF).to_bytes(2, "little")
        link.read()
        d = [s.direction for s in link.servos]
        assert link.currents[0] == pytest.approx(0.5 * d[0]) and link.currents[1] == pytest.approx(
            -0.25 * d[1]
        )
