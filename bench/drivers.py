"""Driver benchmarks: WBB report decoding rate, 100 Hz setpoint-streaming jitter over a pty (emulated bus in
another process), and the CoP error of emulated boards (noise off: driver + geometry only; thesis-like noise)."""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np


def _decode_rate(n: int) -> dict:
    from drivers.emulators.wbb import DEFAULT_CAL
    from drivers.wbb import protocol as P
    from drivers.wbb.calibration import Calibration

    rng = np.random.default_rng(0)
    reports = [P.encode_cells(tuple(int(v) for v in rng.integers(1000, 20000, 4))) for _ in range(n)]
    t0 = time.perf_counter()
    for r in reports:
        P.decode_cells(r)
    t_decode = time.perf_counter() - t0
    cal = Calibration(DEFAULT_CAL)
    t0 = time.perf_counter()
    raw = np.array([P.decode_cells(r) for r in reports], dtype=float)
    cal.kg(raw)
    t_batch = time.perf_counter() - t0
    return {
        "reports": n,
        "decode_reports_per_s": n / t_decode,
        "decode_and_calibrate_batch_reports_per_s": n / t_batch,
    }


def _bus_process(path_q, stop_ev, kind: str) -> None:
    from drivers.config import load_config
    from drivers.emulators.plant import JointPlant

    cfg = load_config()
    plant = JointPlant(np.zeros(12), tau=0.03)
    if kind == "dxl":
        from drivers.emulators.dxl_bus import DxlBusEmulator

        emu = DxlBusEmulator(cfg.servos, plant)
    else:
        from drivers.emulators.framed_controller import FramedControllerEmulator

        emu = FramedControllerEmulator(plant)
    path_q.put(emu.path)
    stop_ev.wait(120)
    emu.close()


def _jitter(kind: str, seconds: float, rate_hz: float = 100.0) -> dict:
    from drivers.config import load_config
    from drivers.link import open_link

    ctx = mp.get_context("fork")
    q, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_bus_process, args=(q, stop, kind), daemon=True)
    proc.start()
    try:
        path = q.get(timeout=20)
        cfg = load_config()
        names = [s.name for s in cfg.servos]
        link = open_link(f"dxl:{path}" if kind == "dxl" else f"serial:{path}", names, cfg)
        link.connect()
        period = 1.0 / rate_hz
        n = int(seconds * rate_hz)
        starts, late, cycle = [], [], []
        cpu0 = time.process_time()  # this process only: the driver, not the bus emulator
        nxt = time.monotonic()
        for k in range(n):
            wait = nxt - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            t = time.monotonic()
            starts.append(t)
            late.append(t - nxt)
            link.command(np.full(12, 0.2 * np.sin(2 * np.pi * 0.5 * k * period)))
            cycle.append(time.monotonic() - t)
            nxt += period
        cpu = time.process_time() - cpu0
        link.close()
    finally:
        stop.set()
        proc.join(5)
    p = np.diff(starts) * 1e3
    late_ms = np.array(late) * 1e3
    return {
        "link": kind,
        "ticks": n,
        "period_mean_ms": float(p.mean()),
        "period_std_ms": float(p.std()),
        "period_min_ms": float(p.min()),
        "period_max_ms": float(p.max()),
        "late_p99_ms": float(np.percentile(late_ms, 99)),
        "late_max_ms": float(late_ms.max()),
        "command_read_cycle_mean_ms": float(np.mean(cycle) * 1e3),
        # the host's CPU spent per tick, waiting for replies included
        "driver_cpu_per_tick_ms": cpu / n * 1e3,
    }


def _cop_error(noise: bool, seconds: float) -> dict:
    """Table 4.3 procedure: 10 kg at (0, 0) and (±140, ±80) mm on each of two emulated boards."""
    from drivers.emulators.wbb import BoardImperfections, WbbEmulator
    from drivers.wbb.board import HidBoard
    from drivers.wbb.geometry import cell_positions, cop

    rng = np.random.default_rng(1)
    a, b = cell_positions()[0]
    errs, weights = [], []
    for board_i in range(2):
        state = {"load": np.zeros(4)}
        imp = BoardImperfections.thesis_like(rng, board_i) if noise else BoardImperfections()
        emu = WbbEmulator(lambda s=state: s["load"], rate_hz=80, imperfections=imp, seed=board_i)
        board = HidBoard(emu.connect_socketpair).start()
        try:
            board.collect(0.1)
            board.tare(seconds)
            for x, y in [(0, 0), (0.14, -0.08), (0.14, 0.08), (-0.14, 0.08), (-0.14, -0.08)]:
                u, v = (x + a) / (2 * a), (y + b) / (2 * b)
                state["load"] = np.array([u * v, u * (1 - v), (1 - u) * v, (1 - u) * (1 - v)]) * 10.0
                board.collect(0.1)
                s = board.collect(seconds)
                res = cop(np.mean([q.kg for q in s], axis=0), cell_positions())
                errs.append(np.abs(res.cop - [x, y]).max())
                weights.append(abs(res.total_kg - 10.0) / 10.0)
        finally:
            board.close()
            emu.close()
    return {"cop_err_max_mm": float(np.max(errs) * 1e3), "cop_err_mean_mm": float(np.mean(errs) * 1e3),
            "weight_err_max_pct": float(np.max(weights) * 100)}  # fmt: skip


def run(quick: bool) -> dict:
    out = {"decode": _decode_rate(50_000 if quick else 300_000)}
    secs = 3.0 if quick else 10.0
    out["jitter_dxl"] = _jitter("dxl", secs)
    out["jitter_framed"] = _jitter("framed", secs)
    out["cop_noise_free"] = _cop_error(False, 0.3 if quick else 1.0)
    out["cop_thesis_like_noise"] = _cop_error(True, 0.3 if quick else 1.0)
    out["targets"] = {
        "decode_ge_50k_per_s": out["decode"]["decode_reports_per_s"] >= 50_000,
        "noise_free_cop_le_0_5_mm": out["cop_noise_free"]["cop_err_max_mm"] <= 0.5,
    }
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run("--quick" in sys.argv), indent=2))
