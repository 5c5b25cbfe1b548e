"""Wii Balance Board codec, calibration and geometry (no threads)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.emulators.wbb import DEFAULT_CAL
from drivers.wbb import protocol as P
from drivers.wbb.calibration import Calibration
from drivers.wbb.geometry import cell_positions, cells_in_base, compose, cop
from drivers.wbb.transports import BridgeDecoder, bridge_frame

u16 = st.integers(0, 0xFFFF)


@given(st.tuples(u16, u16, u16, u16), st.sampled_from([P.IN_BUTTONS_EXT8, P.IN_BUTTONS_EXT19]))
def test_cell_report_roundtrip(raw, mode):
    rep = P.encode_cells(raw, mode)
    assert len(rep) == P.REPORT_LENGTHS[mode]
    assert P.decode_cells(rep) == raw
    assert P.decode(rep).raw == raw


def test_report_bytes_layout():
    rep = P.encode_cells((0x0102, 0x0304, 0x0506, 0x0708), P.IN_BUTTONS_EXT8)
    assert rep.hex() == "a1320000" + "0102030405060708"  # big-endian TR, BR, TL, BL after the buttons
    assert P.read_memory(0xA40024, 24).hex() == "a21704a400240018"
    assert P.write_memory(0xA400F0, b"\x55")[:8].hex() == "a21604a400f00155"
    assert P.report_mode(0x32).hex() == "a2120432"


@pytest.mark.parametrize(
    "bad", [b"", b"\xa1", b"\xa1\x32\x00", b"\xa1\x3f" + bytes(10), b"\xa2\x32" + bytes(10)]
)
def test_bad_reports_raise(bad):
    with pytest.raises(P.ReportError):
        P.decode(bad)
    with pytest.raises(P.ReportError):
        P.decode_cells(bad)


def test_status_read_ack_decode():
    s = P.decode(P.encode_status(0x83, extension=True))
    assert s.extension and s.battery == 0x83
    r = P.decode(P.encode_read_data(0x0024, bytes(range(16))))
    assert (r.offset, r.size, r.error, r.data) == (0x24, 16, 0, bytes(range(16)))
    a = P.decode(P.encode_ack(0x16, 0))
    assert (a.report, a.error) == (0x16, 0)
    block = P.encode_calibration(DEFAULT_CAL.astype(int).tolist())
    assert P.decode_calibration(block) == DEFAULT_CAL.astype(int).tolist()


def test_calibration_piecewise_hits_reference_points_and_inverts():
    cal = Calibration(DEFAULT_CAL)
    np.testing.assert_allclose(cal.kg(DEFAULT_CAL), np.array([[0] * 4, [17] * 4, [34] * 4]), atol=1e-12)
    kg = np.array([3.0, 20.0, -1.0, 40.0])
    np.testing.assert_allclose(cal.kg(cal.raw_for(kg)), kg, atol=1e-9)
    lin = Calibration(DEFAULT_CAL, method="linear")
    np.testing.assert_allclose(lin.kg(lin.raw_for(kg)), kg, atol=1e-9)
    assert np.abs(lin.kg(DEFAULT_CAL[1]) - 17).max() < 0.2  # slight non-linearity between the two fits


def test_tare_and_recalibration():
    cal = Calibration(DEFAULT_CAL)
    offset = np.array([-0.2, 0.1, -0.3, 0.05])
    gain_err = np.array([0.02, -0.01, 0.015, -0.02])
    cal.tare(cal.raw_for(offset)[None])
    np.testing.assert_allclose(cal.kg(cal.raw_for(offset)), 0, atol=1e-9)
    loads = []
    for c in range(4):
        true = np.eye(4)[c] * 10.0
        loads.append((true, cal.raw_for(true * (1 + gain_err) + offset)[None]))
    cal.recalibrate(loads)
    probe = np.array([5.0, 2.0, 7.0, 1.0])
    np.testing.assert_allclose(cal.kg(cal.raw_for(probe * (1 + gain_err) + offset)), probe, atol=1e-9)


def test_non_increasing_calibration_is_refused():
    bad = DEFAULT_CAL.copy()
    bad[1, 2] = bad[0, 2]
    with pytest.raises(ValueError):
        Calibration(bad)


@pytest.mark.parametrize("x,y", [(0.14, -0.08), (0.14, 0.08), (-0.14, 0.08), (-0.14, -0.08), (0.0, 0.0)])
def test_point_load_cop_recovered(x, y):
    """Oracle 7.6: a point load at (±140, ±80) mm on a board gives back its position (statically determinate
    share on a rigid board: bilinear weights)."""
    a, b = cell_positions()[0]
    u, v = (x + a) / (2 * a), (y + b) / (2 * b)
    w = np.array([u * v, u * (1 - v), (1 - u) * v, (1 - u) * (1 - v)]) * 10.0  # TR, BR, TL, BL
    res = cop(w, cell_positions())
    np.testing.assert_allclose(res.cop, [x, y], atol=1e-12)
    assert res.total_kg == pytest.approx(10.0)


def test_board_poses_compose():
    pose = compose(np.array([0.1, 0.2, np.pi / 2]), np.array([0.05, 0.0, 0.0]))
    np.testing.assert_allclose(pose, [0.1, 0.25, np.pi / 2], atol=1e-12)
    cells = cells_in_base([np.array([0.0, 0.0, np.pi / 2])])
    np.testing.assert_allclose(cells[0], [-0.119, 0.2165], atol=1e-12)  # TR rotated by 90°


@given(st.lists(st.binary(min_size=1, max_size=30), min_size=1, max_size=5), st.binary(max_size=20))
def test_bridge_framing_resyncs_after_garbage(reports, garbage):
    dec = BridgeDecoder()
    stream = garbage.replace(b"\x7e", b"") + b"".join(bridge_frame(r) for r in reports)
    got = []
    for i in range(0, len(stream), 7):  # arbitrary chunking
        got += dec.feed(stream[i : i + 7])
    assert got == reports
