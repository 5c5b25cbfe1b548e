"""CasADi functions compiled to native code by the system C compiler, cached on disk by their generated C.

Compiled code runs 3× (-O0) to 15× (-O1) faster than CasADi's virtual machine, but compiling a large Jacobian
takes seconds (-O0) to tens of seconds (-O1). The library is named by a hash of the C source (with the compiler, flags and CasADi
version), so the same function built again, in another process or another run, loads it instead of compiling.
Without a compiler, or with POISE_NO_JIT=1, the interpreted function comes back: the same results, slower.
The compiled function evaluates only: CasADi cannot differentiate it (callers differentiate before compiling).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import casadi as ca

CACHE_BYTES = 500 * 2**20  # least recently used libraries go beyond this
FLAGS = ("-O1",)  # -O2 took 10× as long on a 215 k-instruction Jacobian (226 s) and ran no faster
# gcc's register allocation at -O1 grows faster than the code: 37 s for a 49 k-instruction Jacobian, which -O0
# compiles in 3.4 s to run 8.5 ms per 64 samples (-O1: 1.6 ms, CasADi's virtual machine: 25 ms)
LARGE = 20_000  # instructions: larger functions are compiled with LARGE_FLAGS
LARGE_FLAGS = ("-O0",)


def compiler() -> str | None:
    """The C compiler: $CC, else gcc or cc on PATH; None if there is none or POISE_NO_JIT is set."""
    if os.environ.get("POISE_NO_JIT"):
        return None
    found = (shutil.which(name) for name in (os.environ.get("CC"), "gcc", "cc") if name)
    return next((path for path in found if path), None)


def cache_dir() -> Path:
    """Where compiled libraries live: $POISE_CACHE_DIR, else $XDG_CACHE_HOME/poise/native (~/.cache)."""
    if os.environ.get("POISE_CACHE_DIR"):
        return Path(os.environ["POISE_CACHE_DIR"])
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "poise" / "native"


def library(fn: ca.Function, cc: str) -> Path:
    """The compiled library of `fn` in the cache, compiled now if no process has done so before."""
    cg = ca.CodeGenerator(f"{fn.name()}.c", {"with_header": False})
    cg.add(fn)
    source = cg.dump()
    flags = LARGE_FLAGS if fn.n_instructions() > LARGE else FLAGS
    tag = "\0".join((ca.__version__, cc, *flags, source))
    path = cache_dir() / f"{fn.name()}_{hashlib.sha256(tag.encode()).hexdigest()[:24]}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build_") as tmp:
            c_file, lib = Path(tmp) / f"{fn.name()}.c", Path(tmp) / path.name
            c_file.write_text(source)
            subprocess.run(
                [cc, "-shared", "-fPIC", *flags, str(c_file), "-o", str(lib), "-lm"],
                check=True,
                capture_output=True,
            )
            os.replace(lib, path)  # atomic: a concurrent process sees no library or a whole one
        prune(path.parent, CACHE_BYTES, keep=path)
    else:
        with contextlib.suppress(OSError):  # a read-only cache still serves
            os.utime(path)  # used: the last to be pruned
    return path


def prune(directory: Path, limit: int, keep: Path | None = None) -> None:
    """Remove the least recently used libraries until the rest take at most `limit` bytes; never `keep` (the one
    just built), and libraries other processes remove meanwhile are skipped."""
    sizes = {}
    for lib in directory.glob("*.so"):
        with contextlib.suppress(FileNotFoundError):
            st = lib.stat()
            sizes[lib] = (st.st_mtime, st.st_size)
    total = sizes[keep][1] if keep in sizes else 0
    for lib in sorted(sizes, key=lambda p: sizes[p][0], reverse=True):
        if lib == keep:
            continue
        total += sizes[lib][1]
        if total > limit:
            lib.unlink(missing_ok=True)


def compiled(fn: ca.Function) -> ca.Function:
    """`fn` (an SX function) as native code, or `fn` itself if there is no compiler or compiling fails."""
    cc = compiler()
    if cc is None:
        return fn
    try:
        return ca.external(fn.name(), str(library(fn, cc)))
    except (OSError, RuntimeError, subprocess.CalledProcessError):
        return fn
