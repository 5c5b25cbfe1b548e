"""Find balance boards on this host, as the `--boards` endpoints that open them (`poise boards list`).

Three places are looked at: the evdev nodes Linux's hid-wiimote creates for balance boards (the only ones that
count as a board found), the hidraw nodes of Bluetooth HID devices with the Wii Remote's ids (a board among them
or not: the board reports as a Wii Remote), and serial ports (a serial bridge is only a candidate: it cannot be
recognised without opening it). Nothing is opened but evdev nodes (to read
their name), and a missing or unreadable directory is an empty result, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from drivers.wbb.board import BOARD_EVDEV_NAME, is_board_evdev  # noqa: F401 (the name re-exported)

# hid-wiimote sets no phys or uniq on a board's input device: the board's Bluetooth address is the parent HID
# device's HID_UNIQ.
NINTENDO_VENDOR = 0x057E
BUS_BLUETOOTH = 0x0005  # HID_ID bus of a Bluetooth HID device (BUS_BLUETOOTH in linux/input.h)
# hid-wiimote's id table (wiimote_hid_devices in drivers/hid/hid-wiimote-core.c) holds 0x0306 (Wii Remote RVL-CNT-01;
# the balance board RVL-WBC-01 reports it too) and 0x0330 (Wii Remote Plus RVL-CNT-01-TR, never a board).
WII_REMOTE_PRODUCT = 0x0306
HIDRAW_NOTE = "Wii device: may be a balance board"
SERIAL_NOTE = "candidate (a serial bridge cannot be recognised without opening it)"


@dataclass(frozen=True)
class Found:
    """One thing `--boards` could open: the endpoint to pass, where it was found, and what is known about it."""

    endpoint: str  # what to pass to --boards
    kind: str  # "evdev", "hidraw" or "serial"
    name: str  # the device's own name (kernel input name, HID_NAME, serial port description)
    address: str | None  # the board's Bluetooth address when known
    note: str = ""  # e.g. a permission problem, or why the endpoint is only a candidate

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class EvdevInfo:
    """What an evdev node says about itself; `readable` False when only sysfs could be read (no permission)."""

    name: str
    phys: str = ""
    uniq: str = ""
    readable: bool = True


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _uevent(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a sysfs uevent file ({} if it cannot be read)."""
    text = _read_text(path) or ""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _sysfs_evdev(node: Path, sys_input_root: Path) -> EvdevInfo | None:
    """The name/phys/uniq sysfs gives for an event node (readable without access to /dev/input)."""
    dev = sys_input_root / node.name / "device"
    name = _read_text(dev / "name")
    if name is None:
        return None
    return EvdevInfo(name, _read_text(dev / "phys") or "", _read_text(dev / "uniq") or "", readable=False)


def read_evdev(node: Path, sys_input_root: Path = Path("/sys/class/input")) -> EvdevInfo | None:
    """Name, phys and uniq of an evdev node through python-evdev; on permission denied, from sysfs (readable=False);
    None when neither can be read."""
    try:
        import evdev

        dev = evdev.InputDevice(str(node))
    except PermissionError:
        return _sysfs_evdev(node, sys_input_root)
    except (OSError, ImportError):
        return None
    try:
        return EvdevInfo(dev.name, dev.phys or "", dev.uniq or "")
    finally:
        dev.close()


def _parent_hid_uniq(node: Path, sys_input_root: Path) -> str:
    """HID_UNIQ of the HID device an event node's input device hangs off (hid-wiimote: the board's address)."""
    return _uevent(sys_input_root / node.name / "device" / "device" / "uevent").get("HID_UNIQ", "")


def _mac(text: str) -> str | None:
    text = text.strip()
    return text.upper() if len(text) == 17 and text.count(":") == 5 else None


def _event_nodes(root: Path) -> list[Path]:
    try:
        nodes = [p for p in root.iterdir() if p.name.startswith("event") and p.name[5:].isdigit()]
    except OSError:
        return []
    return sorted(nodes, key=lambda p: int(p.name[5:]))


def find_evdev(
    input_root: Path = Path("/dev/input"),
    sys_input_root: Path = Path("/sys/class/input"),
    read: Callable[[Path], EvdevInfo | None] | None = None,
) -> list[Found]:
    """Balance boards bound to hid-wiimote: `evdev:/dev/input/eventN` endpoints, with the board's address."""
    read = read or (lambda node: read_evdev(node, sys_input_root))
    out = []
    for node in _event_nodes(Path(input_root)):
        info = read(node)
        if info is None or not is_board_evdev(info.name):
            continue
        address = _mac(info.uniq) or _mac(_parent_hid_uniq(node, Path(sys_input_root))) or _mac(info.phys)
        note = (
            "" if info.readable else f"permission denied on {node}: add yourself to its group (ls -l {node})"
        )
        out.append(Found(f"evdev:{node}", "evdev", info.name, address, note))
    return out


def _hid_id(value: str) -> tuple[int, int, int] | None:
    """HID_ID=BBBB:VVVVVVVV:PPPPPPPP -> (bus, vendor, product)."""
    try:
        bus, vendor, product = (int(x, 16) for x in value.split(":"))
    except ValueError:
        return None
    return bus, vendor, product


def find_hidraw(hidraw_root: Path = Path("/sys/class/hidraw")) -> list[Found]:
    """Kernel-connected Bluetooth HID devices with the Wii Remote's ids (a board among them, or a Wii Remote), as
    `bt:ADDR`; one without a Bluetooth address (HID_UNIQ) gives no endpoint `--boards` takes, so it is left out.

    `bt:` opens the board's own L2CAP channels by address (drivers.wbb.transports.open_bluetooth), not the hidraw
    node; while the kernel holds the connection it cannot, so the note says to use evdev: or disconnect first."""
    try:
        entries = sorted(Path(hidraw_root).iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        ev = _uevent(entry / "device" / "uevent")
        address = _mac(ev.get("HID_UNIQ", ""))
        if (
            _hid_id(ev.get("HID_ID", "")) != (BUS_BLUETOOTH, NINTENDO_VENDOR, WII_REMOTE_PRODUCT)
            or not address
        ):
            continue
        note = (
            f"{HIDRAW_NOTE} (/dev/{entry.name}); connected through the kernel: use its evdev: endpoint if it is "
            f"a board, or disconnect it (bluetoothctl disconnect {address}) so bt:{address} can open it"
        )
        out.append(Found(f"bt:{address}", "hidraw", ev.get("HID_NAME", "?"), address, note))
    return out


def boards_found(found: list[Found]) -> bool:
    """Whether a balance board is among the endpoints: only hid-wiimote's evdev board name says so for sure."""
    return any(f.kind == "evdev" for f in found)


def find_serial(comports: Callable[[], list] | None = None) -> list[Found]:
    """Serial ports, as `serial:PORT` candidates for the serial bridge."""
    if comports is None:
        from serial.tools.list_ports import comports
    try:
        ports = comports()
    except OSError:
        return []
    return [Found(f"serial:{p.device}", "serial", p.description or "", None, SERIAL_NOTE) for p in ports]


def find_boards(
    input_root: Path = Path("/dev/input"),
    hidraw_root: Path = Path("/sys/class/hidraw"),
    sys_input_root: Path = Path("/sys/class/input"),
    read_evdev_info: Callable[[Path], EvdevInfo | None] | None = None,
    comports: Callable[[], list] | None = None,
) -> list[Found]:
    """Everything `--boards` could open here: hid-wiimote boards, then kernel-connected Wii HID devices, then
    serial ports."""
    return (
        find_evdev(input_root, sys_input_root, read_evdev_info)
        + find_hidraw(hidraw_root)
        + find_serial(comports)
    )
