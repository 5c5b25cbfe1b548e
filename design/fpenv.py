"""The thread's floating-point environment (x87 and SSE control words), which a native library can change.

AMPL's solver library — PyNumero reads every Pyomo model through it (the Pyomo backend) — sets the x87
precision control to 53 bits whenever it reads a model (`fpinit_ASL`) and never restores it. OpenBLAS's x87
kernels (dnrm2, and LAPACK's QR and SVD through it; numpy's, SciPy's and IPOPT's copies alike) then round
differently in the last bit, and a design is chaotic in the last bit: after one Pyomo solve a later design in
the same process ended in another local minimum (TUlip single support κ 6 527 instead of 160, a static
multistart's start 0 210.0 instead of 187.2). `kept` restores the environment after such code.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import platform
from collections.abc import Iterator

_FENV_BYTES = 64  # ≥ sizeof(fenv_t) everywhere (glibc and macOS x86-64: 32 bytes; aarch64: 8)


@functools.lru_cache(maxsize=1)
def _libm():
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return lib if lib is not None and hasattr(lib, "fegetenv") and hasattr(lib, "fesetenv") else None


def environment() -> bytes | None:
    """The calling thread's floating-point environment (fegetenv), or None where the C library is not found."""
    lib = _libm()
    if lib is None:
        return None
    buf = ctypes.create_string_buffer(_FENV_BYTES)
    return buf.raw if lib.fegetenv(buf) == 0 else None


def controls() -> tuple[int, int] | None:
    """x86-64: the x87 control word and the MXCSR without its sticky exception flags (the modes: precision,
    rounding, flush-to-zero, masks); None elsewhere."""
    env = environment()
    if env is None or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    return int.from_bytes(env[0:2], "little"), int.from_bytes(env[28:32], "little") & ~0x3F


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """Run a block and put the thread's floating-point environment back as it was, whatever the block did."""
    saved = environment()
    try:
        yield
    finally:
        if saved is not None:
            _libm().fesetenv(ctypes.create_string_buffer(saved, _FENV_BYTES))
