"""`poise boards list` over a fake /dev/input + sysfs tree, and the boards' data reporting mode (0x34 by default)."""

import functools
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from drivers.emulators.wbb import WbbEmulator
from drivers.wbb import discover
from drivers.wbb import protocol as P
from drivers.wbb.open import board_drivers, start_all
from poise.cli import main

BOARD = discover.BOARD_EVDEV_NAME
ADDR = "00:1e:35:3b:7c:12"


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _tree(tmp_path):
    """A host with one board on event3 (a keyboard on event1), its HID parent, a Wii Remote hidraw pair and a
    keyboard's hidraw."""
    dev, sys_input, hidraw = (
        tmp_path / "dev/input",
        tmp_path / "sys/class/input",
        tmp_path / "sys/class/hidraw",
    )
    for n in (1, 3):
        _write(dev / f"event{n}", "")
    _write(dev / "mouse0", "")
    _write(sys_input / "event3/device/name", BOARD + "\n")
    _write(sys_input / "event3/device/device/uevent", f"HID_ID=0005:0000057E:00000306\nHID_UNIQ={ADDR}\n")
    _write(sys_input / "event1/device/name", "AT Translated Set 2 keyboard\n")
    _write(hidraw / "hidraw0/device/uevent", f"HID_ID=0005:0000057E:00000306\nHID_NAME=Nintendo RVL-WBC-01\n"
                                             f"HID_UNIQ={ADDR}\n")  # fmt: skip
    _write(
        hidraw / "hidraw1/device/uevent", "HID_ID=0003:0000046D:0000C52B\nHID_NAME=Logitech USB Receiver\n"
    )
    _write(hidraw / "hidraw2/device/uevent", "HID_ID=0005:0000057E:00000330\nHID_NAME=Nintendo RVL-CNT-01-TR\n"
                                             "HID_UNIQ=00:1f:32:aa:bb:cc\n")  # fmt: skip
    return dev, sys_input, hidraw


def _names_from_sysfs(sys_input):
    """An evdev name reader that answers what the kernel would (the node's sysfs name)."""

    def read(node):
        name = (sys_input / node.name / "device/name").read_text().strip()
        return discover.EvdevInfo(name)

    return read


def _use(monkeypatch, dev, sys_input, hidraw, read=None, ports=()):
    find = functools.partial(discover.find_boards, dev, hidraw, sys_input, read, lambda: list(ports))
    monkeypatch.setattr(discover, "find_boards", find)


def _listed(capsys, err: list[str] | None = None) -> list[dict]:
    assert main(["boards", "list", "--json"]) == 0
    cap = capsys.readouterr()
    if err is not None:
        err.append(cap.err)
    return json.loads(cap.out)


def test_list_names_the_evdev_board_with_its_address_and_the_kernel_connected_wii_devices(
    tmp_path, monkeypatch, capsys
):
    dev, sys_input, hidraw = _tree(tmp_path)
    _use(monkeypatch, dev, sys_input, hidraw, _names_from_sysfs(sys_input))
    got = _listed(capsys)
    # the Wii Remote Plus (0x0330) on hidraw2 is never a board: left out
    assert [(g["endpoint"], g["kind"], g["address"]) for g in got] == [
        (f"evdev:{dev / 'event3'}", "evdev", ADDR.upper()),
        (f"bt:{ADDR.upper()}", "hidraw", ADDR.upper()),
    ]
    assert got[0]["name"] == BOARD and got[1]["name"] == "Nintendo RVL-WBC-01"
    assert "may be a balance board" in got[1]["note"]
    assert "disconnect" in got[1]["note"] and "hidraw0" in got[1]["note"]
    # the table shows the same rows
    assert main(["boards", "list"]) == 0
    out = capsys.readouterr().out
    # (the test's long temporary path folds on an 80-column console: the endpoint's characters, not its line)
    folded = "".join(line.split("│")[1].strip() for line in out.splitlines() if line.count("│") > 2)
    assert f"evdev:{dev / 'event3'}" in folded and ADDR.upper() in out and "Logitech" not in out


def test_an_unreadable_event_node_is_named_from_sysfs_with_the_permission_problem(
    tmp_path, monkeypatch, capsys
):
    import evdev

    dev, sys_input, hidraw = _tree(tmp_path)

    def denied(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(evdev, "InputDevice", denied)
    _use(monkeypatch, dev, sys_input, hidraw)  # the default reader: python-evdev, then sysfs
    got = [g for g in _listed(capsys) if g["kind"] == "evdev"]
    assert (
        len(got) == 1
        and got[0]["endpoint"] == f"evdev:{dev / 'event3'}"
        and got[0]["address"] == ADDR.upper()
    )
    assert "permission denied" in got[0]["note"]


def _hidraw_only(tmp_path, uevent: str):
    """A host whose only Wii-looking device is one hidraw entry with the given uevent (no evdev board)."""
    hidraw = tmp_path / "sys/class/hidraw"
    _write(hidraw / "hidraw0/device/uevent", uevent)
    return tmp_path / "none", tmp_path / "none", hidraw


def test_a_wii_device_on_hidraw_alone_is_listed_but_is_no_board_found(tmp_path, monkeypatch, capsys):
    wii = f"HID_ID=0005:0000057E:00000306\nHID_NAME=Nintendo RVL-CNT-01\nHID_UNIQ={ADDR}\n"
    _use(monkeypatch, *_hidraw_only(tmp_path, wii))
    err: list[str] = []
    got = _listed(capsys, err)
    assert [(g["endpoint"], g["kind"]) for g in got] == [(f"bt:{ADDR.upper()}", "hidraw")]
    assert "may be a balance board" in got[0]["note"]
    assert (
        "no balance board found" in err[0]
    )  # a Wii Remote looks the same on hidraw: only evdev says "board"


@pytest.mark.parametrize(
    "uevent",
    [
        "HID_ID=0005:0000057E:00000306\nHID_NAME=Nintendo RVL-WBC-01\n",  # no HID_UNIQ: no bt: endpoint
        "HID_ID=0005:0000057E:00000330\nHID_NAME=Nintendo RVL-CNT-01-TR\nHID_UNIQ=00:1f:32:aa:bb:cc\n",  # Remote Plus
    ],
)
def test_no_endpoint_without_an_address_nor_for_a_wii_remote_plus(tmp_path, monkeypatch, capsys, uevent):
    _use(monkeypatch, *_hidraw_only(tmp_path, uevent))
    err: list[str] = []
    assert _listed(capsys, err) == []
    assert "no balance board found" in err[0]


def test_serial_ports_are_listed_as_candidates(tmp_path, monkeypatch, capsys):
    port = SimpleNamespace(device="/dev/ttyUSB0", description="CP2102 USB to UART Bridge Controller")
    _use(monkeypatch, tmp_path / "none", tmp_path / "none", tmp_path / "none", ports=[port])
    err: list[str] = []
    got = _listed(capsys, err)
    assert [(g["endpoint"], g["kind"], g["name"]) for g in got] == [
        ("serial:/dev/ttyUSB0", "serial", port.description)
    ]
    assert "candidate" in got[0]["note"]
    assert "no balance board found" in err[0]  # a serial port is no board found


def test_nothing_found_says_what_to_check_without_a_traceback(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "not-there"
    _use(monkeypatch, missing, missing, missing)
    assert main(["boards", "list"]) == 0
    cap = capsys.readouterr()
    assert "no balance board found" in cap.err and "hid-wiimote" in cap.err and "/dev/input" in cap.err
    assert "Traceback" not in cap.err
    assert main(["boards", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


# ---------------------------------------------------------------- data reporting mode

LOAD = np.array([10.0, 12.0, 8.0, 9.0])


@pytest.fixture
def emu():
    e = WbbEmulator(lambda: LOAD, rate_hz=100)
    yield e
    e.close()


@pytest.mark.parametrize(("mode", "length"), [(P.IN_BUTTONS_EXT8, 12), (P.IN_BUTTONS_EXT19, 23)])
def test_the_emulated_board_answers_both_modes_with_the_real_report_lengths(emu, mode, length):
    tr = emu.connect_socketpair()
    try:
        tr.send(P.report_mode(mode))
        got, end = [], time.monotonic() + 0.2
        while time.monotonic() < end:
            data = tr.recv(0.02)
            if data is not None:
                got.append(data)
    finally:
        tr.close()
    assert len(got) > 5
    # 0xA1 header + report id + 2 button bytes + 8 (0x32) or 19 (0x34) extension bytes
    assert {(r[1], len(r)) for r in got} == {(mode, length)}
    assert all(isinstance(P.decode(r), P.CellReport) for r in got)


@pytest.mark.parametrize(("option", "mode"), [("", 0x34), ("?mode=32", 0x32), ("?mode=34", 0x34)])
def test_serial_boards_ask_for_0x34_unless_told_0x32(emu, option, mode):
    boards = start_all(board_drivers(f"serial:{emu.open_pty()}{option}"))
    try:
        samples = boards[0].collect(0.3)
    finally:
        for b in boards:
            b.close()
    assert set(emu.modes) == {mode}
    assert len(samples) > 10
    np.testing.assert_allclose(samples[-1].kg, LOAD, atol=0.05)
