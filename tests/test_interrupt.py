"""Ctrl-C stops a design: CasADi swallowed the KeyboardInterrupt raised in a Python callback and a multi-stage design
went on with its next stage (a UR5 design interrupted at 15 s finished at 98 s and wrote its plan); with starts in
worker processes the interrupted CLI waited for its workers at exit for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import casadi as ca
import numpy as np
import pytest

from robots.interrupt import interruptible
from robots.parallel import in_processes


@pytest.fixture(autouse=True)
def _python_ctrl_c_handler():
    """Each test starts from Python's own Ctrl-C handler. In one `make test` of four (2026-12-02) an earlier module
    in the same worker had left SIGINT ignored (every test here failed, the CLI subprocesses inherited it and
    ignored Ctrl-C); the module was not found again in a run that checked the handler after every test."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


class _Slow(ca.Callback):
    """Σx², interrupting its own process at the `at`-th evaluation (as Ctrl-C would, mid-solve)."""

    def __init__(self, at: int) -> None:
        ca.Callback.__init__(self)
        self.calls, self.at = 0, at
        self.construct("slow", {"enable_fd": True})

    def get_n_in(self) -> int:
        return 1

    def get_n_out(self) -> int:
        return 1

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        return ca.Sparsity.dense(3, 1)

    def eval(self, arg):
        self.calls += 1
        if self.calls == self.at:
            signal.raise_signal(signal.SIGINT)
        return [ca.sumsqr(arg[0] - 1)]


def _solver(cb: _Slow) -> ca.Function:
    x = ca.MX.sym("x", 3)
    opts = {
        "ipopt.print_level": 0,
        "print_time": False,
        "ipopt.sb": "yes",
        "ipopt.tol": 1e-30,
        "ipopt.max_iter": 200,
    }
    return ca.nlpsol("slow", "ipopt", {"x": x, "f": cb(x) + ca.sumsqr(ca.sin(x))}, opts)


def test_casadi_alone_swallows_the_interrupt():
    """The premise: without `interruptible` the solve returns as a failure and nothing is raised."""
    cb = _Slow(at=5)
    solver = _solver(cb)
    solver(x0=np.zeros(3))
    assert not solver.stats()["success"] and cb.calls == 5


def test_an_interrupted_solve_raises_after_it_returns():
    cb = _Slow(at=5)
    solver = _solver(cb)
    with pytest.raises(KeyboardInterrupt), interruptible():
        solver(x0=np.zeros(3))
    assert cb.calls == 5  # it stopped where interrupted
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler put back
    with interruptible():  # and a solve without Ctrl-C runs as before
        solver(x0=np.zeros(3))


def _fails(x: int) -> int:
    if x == 2:
        raise ValueError("start 2 failed")
    return x * x


def _sleeps(x: float) -> float:
    time.sleep(x)
    return x


def test_calls_in_processes_finish_or_raise_the_workers_error():
    assert dict(in_processes(_fails, {"a": (1,), "b": (3,)}, 2)) == {"a": 1, "b": 9}
    with pytest.raises(ValueError, match="start 2 failed"):
        dict(in_processes(_fails, {"a": (1,), "b": (2,)}, 2))


def _dies(x: int) -> int:
    if x == 2:
        os._exit(9)  # as the kernel's OOM killer or a crash in native code would end it
    return x


def test_a_worker_that_dies_is_an_error_not_a_hang():
    """multiprocessing.Pool waited for ever for a dead worker's result; the executor names it."""
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises(BrokenProcessPool):
        dict(in_processes(_dies, {"a": (1,), "b": (2,)}, 2))


def test_a_command_run_by_a_command_keeps_its_callers_counter():
    """`poise demo` runs `main` for each step: the inner call must not take out the outer one's Ctrl-C counter."""
    from robots.interrupt import unwatch, watch, watching

    assert watch() and watching()
    try:
        assert not watch()  # already counted: the inner call did not put it in
        assert watching()
    finally:
        unwatch()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_caller_that_stops_ends_the_workers():
    import multiprocessing as mp

    before = set(mp.active_children())
    it = in_processes(_sleeps, {"quick": (0.0,), "slow": (600.0,)}, 2)
    assert next(it) == ("quick", 0.0)
    it.close()  # the 600 s call does not hold it up
    assert set(mp.active_children()) <= before


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_stops_a_design_and_its_workers(tmp_path, workers):
    """Ctrl-C at a terminal signals the whole process group: the CLI says it was interrupted, writes nothing, and no
    worker outlives it."""
    out = tmp_path / "plan.json"
    argv = [sys.executable, "-m", "poise", "plan", "trajectory", "ur5", "--starts", "2", "--workers", workers,
            "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    try:
        time.sleep(10)  # the model built, the starts solving (a start takes ~40 s)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:  # a hung run (as before) does not outlive the test
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "poise: interrupted" in err and "Traceback" not in err
    assert not out.exists()
    for _ in range(20):  # nothing left running in its process group (zombies wait for init to reap them)
        if not _running_in_group(proc.pid):
            break
        time.sleep(0.5)
    assert not _running_in_group(proc.pid)


def _running_in_group(pgid: int) -> list[int]:
    """The processes of group `pgid` that are not zombies, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def test_ctrl_c_during_a_held_import_is_raised_after_it():
    """trimesh catches BaseException around its optional imports: Ctrl-C there was lost and the command ran on."""
    from robots.interrupt import held

    done = []
    with pytest.raises(KeyboardInterrupt), held():
        signal.raise_signal(signal.SIGINT)
        done.append("the body ran to its end")
    assert done and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_import_that_fails_after_ctrl_c_counts_the_interrupt():
    """An import that fails once Ctrl-C came (a half-initialised module) still counts it: the CLI reports the
    interrupt, not the import's error."""
    from robots.interrupt import held, interrupts, unwatch, watch

    watch()
    try:
        before = interrupts()
        with pytest.raises(ImportError), held():
            signal.raise_signal(signal.SIGINT)
            raise ImportError("half initialised")
        assert interrupts() == before + 1
    finally:
        unwatch()


def test_an_error_a_library_made_of_ctrl_c_is_reported_as_interrupted(monkeypatch, capsys):
    """Ctrl-C in the middle of an import leaves a half-initialised module, and the next line fails with an
    AttributeError (seen: shapely's `lib`): the CLI says interrupted (exit 130), not a traceback."""
    import poise.cli as cli

    def swallowing_then_failing(args) -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        except BaseException:  # as trimesh does
            pass
        raise AttributeError("partially initialized module 'shapely' has no attribute 'lib'")

    monkeypatch.setattr(cli, "check_outputs", swallowing_then_failing)
    assert cli.main(["model", "show", "tulip"]) == 130
    assert "poise: interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the CLI's counter taken out again
    monkeypatch.setattr(cli, "check_outputs", lambda args: None)
    assert cli.main(["model", "show", "tulip", "--json"]) == 0  # an earlier Ctrl-C does not count against it


def test_a_ctrl_c_inside_a_callbacks_c_call_comes_out_as_keyboard_interrupt():
    """Python turns a KeyboardInterrupt raised while a C function (numpy reading a CasADi matrix) returns into a
    SystemError, which CasADi prints with its traceback; a callback's eval raises it as the interrupt it was."""
    from robots.interrupt import in_callback

    @in_callback
    def interrupted_in_c():
        raise SystemError("<built-in function array> returned a result with an exception set") from (
            KeyboardInterrupt()
        )

    @in_callback
    def broken():
        raise SystemError("a bug of its own")

    with pytest.raises(KeyboardInterrupt):
        interrupted_in_c()
    with pytest.raises(SystemError, match="a bug of its own"):
        broken()
