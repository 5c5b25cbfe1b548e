"""Argument types for the command line: every number, path and endpoint is validated where it is parsed.

argparse calls these on the option's text; an `ArgumentTypeError` becomes one `poise: error:` line and exit 2
before any work starts. Numbers are always finite (NaN/inf would hang loops or write NaN files); output files
are checked after parsing by `check_outputs` (an existing file needs --force; its folder must exist).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from formats.errors import DataError, DeviceError

__all__ = [
    "OneLineParser",
    "OutputFile",
    "add_force",
    "base_parameter",
    "boards_endpoint",
    "check_outputs",
    "count",
    "image_file",
    "increasing_numbers",
    "integer",
    "nonnegative",
    "number",
    "out_dir",
    "out_file",
    "positive",
    "robot_endpoint",
    "scheduler_address",
    "seed",
    "text_file",
]


def _bound_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    def show(v: float) -> str:
        return str(v) if isinstance(v, int) else f"{v:g}"

    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '≥'} {show(lo)}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '≤'} {show(hi)}")
    return " and ".join(parts)


def integer(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An integer in [lo, hi] (either bound optional)."""

    def parse(text: str) -> int:
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(
                f"must be an integer {_bound_text(lo, hi, False, False)}, got {text!r}"
            )
        return v

    parse.__name__ = "integer"
    return parse


def number(
    lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False
) -> Callable[[str], float]:
    """A finite float in the interval given by lo/hi (closed unless *_open)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        bounds = _bound_text(lo, hi, lo_open, hi_open)
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(
                f"must be a finite number{' ' + bounds if bounds else ''}, got {text!r}"
            )
        below = lo is not None and (v <= lo if lo_open else v < lo)
        above = hi is not None and (v >= hi if hi_open else v > hi)
        if below or above:
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text!r}")
        return v

    parse.__name__ = "number"
    return parse


def increasing_numbers(text: str) -> tuple[float, ...]:
    """'8,64' -> (8.0, 64.0): comma-separated, finite, positive, strictly increasing."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, e.g. 8,64 (got {text!r})"
        ) from None
    if any(not math.isfinite(v) or v <= 0 for v in values) or list(values) != sorted(set(values)):
        raise argparse.ArgumentTypeError(
            f"must be positive and strictly increasing, e.g. 8,64 (got {text!r})"
        )
    return values


def angles(text: str) -> tuple[float, ...]:
    """'0,0.5,-1.2' -> (0.0, 0.5, -1.2): comma-separated finite angles in rad (one per joint, checked later)."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated finite angles in rad, e.g. 0,0.5,-1.2 (got {text!r})"
        )
    return values


def pair_of_nonnegative(text: str) -> tuple[float, float]:
    """'5,2' -> (5.0, 2.0): two comma-separated finite numbers ≥ 0."""
    parts = text.split(",")
    try:
        values = tuple(float(v) for v in parts)
    except ValueError:
        values = ()
    if len(values) != 2 or any(not math.isfinite(v) or v < 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected two numbers ≥ 0 separated by a comma, e.g. 5,2 (got {text!r})"
        )
    return values[0], values[1]


def base_parameter(text: str) -> int:
    """'ϑ5' or '5' -> 4: a base parameter as the tables name it, 0-based. Not 'theta5': robots name joints so
    (TUlip's theta1…theta12), and a joint is no base parameter."""
    digits = text.strip()
    if digits.startswith(("ϑ", "θ")):
        digits = digits[1:]
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"expected a base parameter such as ϑ5 (or 5), got {text!r}")
    return int(digits) - 1


def focus_parameter(text: str) -> int | str:
    """`--focus`: a base parameter (`base_parameter`), or 'auto'."""
    return "auto" if text.strip().lower() == "auto" else base_parameter(text)


seed = integer(0, 2**32 - 1)  # numpy's SeedSequence takes non-negative integers
count = integer(1)
positive = number(0.0, lo_open=True)
nonnegative = number(0.0)


def text_file(text: str) -> str:
    """An existing UTF-8 text file to read (configurations): binary or mis-encoded files are refused here."""
    path = Path(text)
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text}: not a UTF-8 text file") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc.strerror}") from None
    return text


class OutputFile(str):
    """A path the command will write; `check_outputs` refuses existing files without --force."""


def out_file(text: str) -> OutputFile:
    """A file to write (JSON, CSV ...): not a directory, in an existing folder (checked by `check_outputs`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty file name")
    return OutputFile(text)


def _image_suffixes() -> set[str]:
    from matplotlib.backend_bases import FigureCanvasBase

    return {f".{s}" for s in FigureCanvasBase.get_supported_filetypes()}


def image_file(text: str) -> OutputFile:
    """A figure file whose suffix matplotlib can write (png, pdf, svg, ...)."""
    path = out_file(text)
    suffixes = _image_suffixes()
    if Path(path).suffix.lower() not in suffixes:
        shown = ", ".join(sorted(suffixes))
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown image type {Path(path).suffix or '(no suffix)'!r}; use {shown}"
        )
    return path


def out_dir(text: str) -> str:
    """A directory to write into: may exist (commands decide about reuse) but must not be a file; a new one is
    made in a folder that exists (as output files are: a mistyped path makes no tree of folders)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty directory name")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, expected a directory")
    if not path.exists() and not path.absolute().parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: folder {str(path.absolute().parent)!r} does not exist")
    return text


def add_twin_truth(parser: argparse.ArgumentParser, scope: str) -> None:
    """--truth: the emulated robot's true parameters (drivers.emulators.sim_robot.twin_truth)."""
    parser.add_argument("--truth", default=None,
                        help=f"{scope}the emulated robot's true parameters — a published estimate of the robot "
                             "description (tulip: thesis = Table 4.6), a parameter set or JSON file (default: the "
                             "simulated robot's)")  # fmt: skip


def add_gravity_comp(parser: argparse.ArgumentParser, scope: str = "", default: str = "") -> None:
    """--gravity-comp: the executor's gravity-compensation feed-forward (drivers.gravity). With `default` (what
    happens when neither is given) also --no-gravity-comp, and None when neither is given."""
    text = (f"{scope}gravity-compensation feed-forward while standing: each goal offset by τ_ff / kp (as "
            "[executor] gravity_compensation = true; kp from position_p_gain)")  # fmt: skip
    if default:
        parser.add_argument("--gravity-comp", action=argparse.BooleanOptionalAction, default=None,
                            help=f"{text}; default {default}")  # fmt: skip
    else:
        parser.add_argument("--gravity-comp", action="store_true", help=text)


def add_force(parser: argparse.ArgumentParser) -> None:
    """The --force flag every command that writes files carries."""
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def check_outputs(args: argparse.Namespace) -> None:
    """DataError for an output file that exists (without --force), is a directory or has no folder, or is the path
    of another output or of an input given (--force would overwrite the input, two outputs each other)."""

    def is_file_arg(dest: str, value: object) -> bool:  # other outputs, and inputs that are files (not names)
        return isinstance(value, OutputFile) or (isinstance(value, str) and dest != "command"
                                                 and not dest.endswith("_cmd") and _is_file(value))  # fmt: skip

    given = {dest: value for dest, value in vars(args).items() if is_file_arg(dest, value)}
    given |= {f"{dest}[{k}]": v for dest, vs in vars(args).items() if isinstance(vs, list)
              for k, v in enumerate(vs) if is_file_arg(dest, v)}  # fmt: skip
    for dest, value in vars(args).items():
        if not isinstance(value, OutputFile):
            continue
        path, opt = Path(value), "--" + dest.replace("_", "-")
        same = [d for d, v in given.items() if d != dest and _same_path(v, path)]
        if same:
            other = same[0].split("[")[0]
            name = other if other in ("plan", "recording", "robot") else "--" + other.replace("_", "-")
            raise DataError(f"{opt} {value}: the same file as {name}; give another path")
        if path.is_dir():
            raise DataError(f"{opt} {value}: is a directory, expected a file")
        if not path.parent.is_dir():
            raise DataError(f"{opt} {value}: folder {str(path.parent)!r} does not exist")
        if path.exists() and not getattr(args, "force", False):
            raise DataError(f"{opt} {value}: file exists (use --force to overwrite it)")


def _same_path(text: str, path: Path) -> bool:
    """Whether an argument's text names the file `path` (as written, or resolved when both exist)."""
    try:
        other = Path(text)
        return (
            other == path
            or (other.exists() and path.exists() and other.samefile(path))
            or (other.resolve() == path.resolve())
        )
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
        return False


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError, RuntimeError):
        return False


def _baud(value: str, spec: str) -> None:
    try:
        ok = int(value) > 0
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"{spec!r}: baud must be a positive integer, got {value!r}")


def _endpoint(text: str, schemes: dict[str, set[str]], usage: str):
    from drivers.transports import parse_endpoint
    from formats.errors import DeviceError

    try:
        ep = parse_endpoint(text)
    except DeviceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if ep.scheme not in schemes:
        raise argparse.ArgumentTypeError(f"unknown endpoint {text!r} (use {usage})")
    unknown = sorted(set(ep.options) - schemes[ep.scheme])
    if unknown:
        allowed = ", ".join(sorted(schemes[ep.scheme])) or "none"
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown option(s) {', '.join(unknown)} (allowed: {allowed})"
        )
    if "baud" in ep.options:
        _baud(ep.options["baud"], text)
    return ep


def robot_endpoint(text: str) -> str:
    """--robot: sim | sim:framed | dxl:PORT[?baud=N] | serial:PORT[?baud=N]."""
    usage = "sim, sim:framed, dxl:PORT[?baud=N] or serial:PORT[?baud=N]"
    ep = _endpoint(text, {"sim": set(), "dxl": {"baud"}, "serial": {"baud"}}, usage)
    if ep.scheme == "sim" and ep.target not in ("", "framed"):
        raise argparse.ArgumentTypeError(f"unknown endpoint {text!r} (use {usage})")
    if ep.scheme != "sim" and not ep.target:
        raise argparse.ArgumentTypeError(f"{text!r}: no port given (use {usage})")
    return text.strip()


def boards_endpoint(text: str) -> str:
    """--boards: sim | bt:ADDR,ADDR | evdev:PATH,PATH | serial:PORT,PORT[?baud=N] (+ ?mode=32|34, ?fit=...)."""
    usage = "sim, bt:ADDR,ADDR, evdev:PATH,PATH or serial:PORT,PORT[?baud=N]"
    hid = {"mode", "fit"}
    ep = _endpoint(text, {"sim": set(), "bt": hid, "evdev": set(), "serial": hid | {"baud"}}, usage)
    if ep.scheme == "sim" and ep.target:
        raise argparse.ArgumentTypeError(f"unknown endpoint {text!r} (use {usage})")
    if ep.scheme != "sim" and not [t for t in ep.target.split(",") if t]:
        raise argparse.ArgumentTypeError(f"{text!r}: no board addresses given")
    if ep.options.get("mode", "34") not in ("32", "34"):
        raise argparse.ArgumentTypeError(f"{text!r}: mode must be 32 or 34")
    if ep.options.get("fit", "piecewise") not in ("piecewise", "linear"):
        raise argparse.ArgumentTypeError(f"{text!r}: fit must be piecewise or linear")
    if ep.scheme == "sim":  # in any case: SIM, Sim
        return "sim"
    if ep.scheme == "bt":  # a typo named as such, not met later as a missing Bluetooth stack
        from drivers.wbb.open import check_bt_address

        for address in (t for t in ep.target.split(",") if t):
            try:
                check_bt_address(address)
            except DeviceError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip()


def scheduler_address(text: str) -> str:
    """--scheduler: a Dask scheduler address, tcp://HOST:PORT (or HOST:PORT); reachability is checked on use."""
    url = urlsplit(text if "://" in text else f"tcp://{text}")
    try:
        port = url.port
    except ValueError:
        port = None
    if url.scheme not in ("tcp", "tls", "ws", "wss", "inproc", "ucx") or not url.hostname or port is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a scheduler address like tcp://HOST:8786")
    return text


GIVEN = "_poise_given"  # the namespace's record of the options given so far (dropped once parsed)


class StoreOnce(argparse._StoreAction):
    """`store`, refusing an option given twice: argparse would keep the last value silently (`--time-scale 1 …
    --time-scale 0.25`), and which one the user meant is not ours to guess."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            given = namespace.__dict__.setdefault(GIVEN, {})
            if self.dest in given:
                before, alias = given[self.dest]
                parser.error(f"{option_string} given twice ({alias} {_shown(before)}, then {_shown(values)}): "
                             "give it once")  # fmt: skip
            given[self.dest] = (values, option_string)
        super().__call__(parser, namespace, values, option_string)


def _shown(values) -> str:
    return " ".join(map(str, values)) if isinstance(values, list) else str(values)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one `poise: error:` line (exit 2), like every other user error,
    and whose options are given once each (`StoreOnce`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, rest = super().parse_known_args(args, namespace)
        vars(ns).pop(GIVEN, None)
        return ns, rest

    def error(self, message: str):  # type: ignore[override]
        import sys

        where = self.prog.removeprefix("poise").strip()
        said = f"{where + ': ' if where else ''}{message} (see {self.prog} --help)"
        sys.stderr.write(f"poise: error: {said}\n")
        raise UsageError(said)


class UsageError(SystemExit):
    """A usage error already reported on stderr (exit 2); `said` is its line without `poise: error:`."""

    def __init__(self, said: str):
        super().__init__(2)
        self.said = said
