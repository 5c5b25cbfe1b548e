"""User-facing errors: raised for bad input anywhere, printed as one line by the CLI."""


class PoiseError(Exception):
    """An error caused by the user's input or environment (not a bug): shown without a traceback. `details`: what
    a command found before it failed, for its `--json` error object beside "ok" and "error"."""

    def __init__(self, *args: object, **details: object) -> None:
        super().__init__(*args)
        self.details = details


class DataError(PoiseError):
    """Malformed or inconsistent data (files, arrays, NaNs, shapes, units)."""


class IdentifiabilityError(PoiseError):
    """The data cannot determine some parameters; the message names them."""


class DeviceError(PoiseError):
    """A device is unreachable, disconnected or speaks garbage."""
