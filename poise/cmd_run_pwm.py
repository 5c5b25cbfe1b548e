"""`poise run PWM_PLAN.json`: stream a PWM plan to one joint's Dynamixel servo in PWM control mode and record
the drive recording `poise calibrate friction|pwm-gain` read (drivers/pwm_run.py). Refused (exit 2, nothing
opened) when the plan exceeds the configuration's pwm_limit_pct or its joint is not in the description.
`--robot sim` streams to the emulated bus whose servo in PWM mode is MuJoCo physics (drivers/emulators)."""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.live import Live

from drivers.config import load_config, servo_order
from drivers.pwm_run import preflight, run_pwm
from drivers.run_files import held_run, sigterm_as_interrupt
from formats.pwm_plan import load_pwm_plan
from poise.cmd_run import interrupted_stream
from poise.output import console, print_json, quantity_table, run_progress
from robots.registry import get_model


class _View:
    """One live line while streaming: tick, plan time, PWM, joint angle and velocity."""

    def __init__(self, live: Live | None) -> None:
        self.live, self._last = live, 0.0

    def __call__(self, k: int, n: int, t: float, s) -> None:
        now = time.monotonic()
        if self.live is None or (now - self._last < 0.1 and k < n):
            return
        self._last = now
        self.live.update(
            f"PWM plan tick {k}/{n}  t = {t:6.2f} s  PWM {s.pwm_pct:+6.2f} %  q {s.q:+.3f} rad  "
            f"ω {s.qd:+.3f} rad/s"
        )


def cmd_run_pwm(args: argparse.Namespace) -> int:
    from formats.errors import DataError

    if args.resume or args.time_scale != 1.0:
        raise DataError(
            "--resume and --time-scale apply to posture plans; a PWM plan is streamed in real time"
        )
    if args.boards is not None:
        raise DataError("a PWM plan drives one servo: no --boards")
    for on, option in ((getattr(args, "truth", None) is not None, "--truth"),
                       (getattr(args, "clamp_soles", False), "--clamp-soles"),
                       (getattr(args, "gravity_comp", False), "--gravity-comp"),
                       (getattr(args, "physics", "mujoco") != "mujoco", "--physics kinematic")):  # fmt: skip
        if on:  # the emulated servo: one joint of the description in MuJoCo, its own drive truth
            raise DataError(f"{option} applies to posture and trajectory plans; a PWM plan drives one servo")
    config = load_config(args.config)
    model = get_model(config.robot)
    plan = load_pwm_plan(args.plan)
    margin = args.limit_margin_deg
    stream = preflight(plan, model, config, args.joint, margin)  # refused here: nothing opened
    bus = None
    robot = args.robot
    held = held_run(args.out)
    try:
        if robot.startswith("sim"):
            from drivers.emulators.dxl_bus import DxlBusEmulator
            from drivers.emulators.plant import JointPlant
            from drivers.emulators.pwm_drive import PwmDrive

            q0 = np.clip(np.zeros(model.nq), model.lower, model.upper)
            drive = PwmDrive(model, stream.joint, q0)
            servos = servo_order(config, model.joint_names)
            bus = DxlBusEmulator(servos, JointPlant(q0), drives={stream.servo.id: drive})
            robot = f"dxl:{bus.path}?baud={config.baud}"
        try:
            with sigterm_as_interrupt(), run_progress() as live:
                result, stream, load, run_dir = run_pwm(
                    plan,
                    args.plan,
                    model,
                    config,
                    robot,
                    args.out,
                    args.joint,
                    margin,
                    args.drive_inertia,
                    _View(live),
                )
        except KeyboardInterrupt as exc:
            return interrupted_stream(args, held, "raw.csv", exc)
    finally:
        if bus is not None:
            bus.close()
    summary = {
        "run_dir": str(run_dir),
        "status": result.status,
        "joint": stream.joint,
        "servo_id": stream.servo.id,
        "ticks": result.ticks,
        "ticks_planned": result.planned,
        "rows": result.rows,
        "rate_hz": stream.rate_hz,
        "q_range_rad": list(result.q_range),
        "inertia_link_kg_m2": load.inertia,
        "inertia_drive_kg_m2": args.drive_inertia,
        "period_mean_ms": result.period_mean_ms,
        "period_std_ms": result.period_std_ms,
    }
    if args.json:
        print_json(summary)
        return 0
    rows = [
        ("joint (servo id)", f"{stream.joint} ({stream.servo.id})", "—"),
        ("ticks streamed / planned", f"{result.ticks} / {result.planned}", "—"),
        ("recording rows", str(result.rows), "—"),
        ("period mean ± std", f"{result.period_mean_ms:.2f} ± {result.period_std_ms:.2f}", "ms"),
        ("joint range", f"{result.q_range[0]:.3f} … {result.q_range[1]:.3f}", "rad"),
        ("inertia: link + drive", f"{load.inertia:.4g} + {args.drive_inertia:.4g}", "kg·m²"),
    ]
    t = quantity_table(f"PWM run → {run_dir}/recording.csv", rows)
    console.print(t)
    return 0
