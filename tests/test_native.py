"""Native compilation of CasADi functions (`robots.native`): the same numbers as CasADi's virtual machine, one
compile per function and machine (a second build loads the cached library), and the interpreted function back
whenever no compiler works."""

from __future__ import annotations

import subprocess

import casadi as ca
import numpy as np
import pytest

from robots import native


def _function(name: str = "poise_test_native") -> ca.Function:
    x, y = ca.SX.sym("x", 3), ca.SX.sym("y", 2)
    out = ca.vertcat(ca.sin(x[0]) * y[1], ca.exp(x[1] - y[0]), x[2] ** 3 / (1 + y[0] ** 2))
    return ca.Function(name, [x, y], [out, ca.jacobian(out, ca.vertcat(x, y))], {"cse": True})


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POISE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("POISE_NO_JIT", raising=False)
    monkeypatch.delenv("CC", raising=False)
    if native.compiler() is None:
        pytest.skip("no C compiler on this machine")
    return tmp_path


def test_compiled_gives_the_virtual_machines_numbers(cache):
    fn = _function()
    fast = native.compiled(fn)
    assert fast.class_name() == "External"
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 50)), rng.normal(size=(2, 50))
    for a, b in zip(fn.map(50)(x, y), fast.map(50)(x, y), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_a_second_build_loads_the_library_without_compiling(cache, monkeypatch):
    native.compiled(_function())
    libraries = sorted(cache.glob("*.so"))
    assert len(libraries) == 1

    def refuse(*args, **kwargs):
        raise subprocess.CalledProcessError(1, args[0])  # as a broken compiler: interpreted fallback

    monkeypatch.setattr(subprocess, "run", refuse)
    again = native.compiled(_function())  # rebuilt from scratch: the same C, the same library
    assert again.class_name() == "External" and sorted(cache.glob("*.so")) == libraries
    other = native.compiled(_function("poise_test_native_other"))  # other C: would need the compiler
    assert other.class_name() == "SXFunction"


def test_without_a_working_compiler_the_function_comes_back_interpreted(cache, monkeypatch):
    fn = _function()
    monkeypatch.setenv("CC", "false")  # a "compiler" that fails
    assert native.compiled(fn) is fn
    assert not list(cache.glob("*.so")) and not list(cache.glob(".build_*"))
    monkeypatch.delenv("CC")
    monkeypatch.setenv("POISE_NO_JIT", "1")
    assert native.compiler() is None and native.compiled(fn) is fn


def test_pruning_keeps_the_library_just_built_and_skips_ones_removed_meanwhile(tmp_path, monkeypatch):
    """The cache keeps the most recently used libraries within its bytes, never the one just built (even when it is
    the oldest by its time stamp), and a library another process removes while it is pruned is no error."""
    import os

    libs = []
    for k in range(4):
        lib = tmp_path / f"f{k}.so"
        lib.write_bytes(bytes(100))
        os.utime(lib, (1000 + k, 1000 + k))  # f3 the most recently used
        libs.append(lib)
    stat = type(libs[0]).stat

    def vanishing(path, *args, **kwargs):
        if path.name == "f2.so":
            path.unlink(missing_ok=True)  # removed by another process between the listing and its stat
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(type(libs[0]), "stat", vanishing)
    native.prune(tmp_path, 250, keep=libs[0])
    assert sorted(p.name for p in tmp_path.glob("*.so")) == ["f0.so", "f3.so"]
