"""A complete emulated test bench: servo bus (Dynamixel or framed) on a pty, two boards (socket pair and pty),
a simulated robot tying joint positions to cell loads. The real drivers connect to it by endpoint strings."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from drivers.clock import HOST_CLOCK, Clock
from drivers.config import RobotConfig, ServoMap, servo_order
from drivers.emulators.plant import JointPlant
from drivers.emulators.sim_robot import SimRobot, twin_truth
from drivers.emulators.wbb import BoardImperfections, Faults, WbbEmulator
from formats.errors import DataError
from robots.tree import RobotModel


@dataclass
class WorldOptions:
    bus: str = "dxl"  # "dxl" or "framed"
    noise: bool = True  # thesis-like board imperfections and encoder noise; False = ideal sensors
    tau: float = 0.03  # servo time constant (s, wall clock)
    board_rate_hz: float = 80.0
    board_transports: tuple[str, str] = ("socketpair", "pty")
    placement_error: tuple[float, float] = (0.0, 0.0)
    faults: tuple[Faults, Faults] = field(default_factory=lambda: (Faults(), Faults()))
    seed: int = 0  # the emulated hardware: the boards' cell errors and offsets
    # the run's randomness: sensor noise (boards' cells, encoders), the boards' placement error, damaged reports;
    # None: from `seed`. Repeated runs with one noise seed repeat one noise realisation.
    noise_seed: int | None = None
    physics: str = (
        "kinematic"  # "kinematic" (fast, CoP = the true model's CoM) or "mujoco" (the physics twin)
    )
    # the robot's time (the twin's or the kinematic plant's) runs this much faster than the wall clock
    time_scale: float = 1.0
    # twin: the boards convert over fixed windows of simulated time at board_rate_hz, each report one conversion
    # (TwinOptions.board_averaging), instead of the load at the instant the emulator asks on the wall clock
    board_averaging: bool = False
    clamp_soles: bool = False  # twin: soles strapped flat to the boards once standing (dynamic experiments)
    twin_trace: bool = False  # twin: record every physics step while standing (TwinOptions.trace)
    truth: str | None = (
        None  # the robot's true parameters (sim_robot.twin_truth): default, published, set, file
    )
    servo_integral_s: float = (
        0.0  # position I action (integral time, s); 0 = P only (I winds up in closed chains)
    )
    # the clock the drivers pace and stamp by: "twin" = the physics twin's simulated time / time_scale (they
    # keep step with the physics on a slow machine), "host" = the wall clock (real-hardware timing; the
    # setpoints run ahead of a physics that cannot keep up). The kinematic robot always runs on the host clock.
    clock: str = "twin"
    twin_max_steps_per_s: float | None = None  # cap on the twin's physics steps per wall second (tests)
    # a fixed-base robot (an arm on its stand): the physics twin bolted to the world, no boards; its servos report
    # Present Current from the twin's efforts (`torque_constants`)
    fixed_base: bool = False


def motor_constants(servos: list[ServoMap], twin) -> dict[int, float]:
    """Each emulated servo's torque constant (N·m at the joint per A): the configuration's, else a motor sized so
    that the XM430's power-on Current Limit gives the joint's effort limit."""
    from drivers.emulators.dxl_bus import CURRENT_LIMIT_FACTORY, CURRENT_UNIT

    limits = twin.effort_limits()
    return {
        s.id: s.torque_constant
        if s.torque_constant is not None
        else float(limits[k]) / (CURRENT_LIMIT_FACTORY * CURRENT_UNIT)
        for k, s in enumerate(servos)
    }


STANDING_BOARDS = 2  # the emulated bench of a standing robot: one board under each sole


def check_world_options(opts: WorldOptions, robot: str) -> None:
    """Refuse options the emulated bench cannot honour (DataError): a fixed-base arm's bench is the physics twin,
    bolted to the world, without boards to strap soles to or to trace. `poise run` asks before its run directory."""
    if not opts.fixed_base:
        return
    arm = f"{robot!r} runs a fixed-base trajectory, without boards"
    if opts.physics != "mujoco":
        raise DataError("--physics kinematic: a fixed-base arm's emulated bench is the physics twin "
                        "(--physics mujoco); the kinematic plant has no efforts for its motor currents")  # fmt: skip
    if opts.clamp_soles:
        raise DataError(f"--clamp-soles straps a standing robot's soles to the boards; {arm}")
    if opts.twin_trace:
        raise DataError(f"--twin-trace records a robot standing on the boards; {arm}")


class SimWorld:
    def __init__(self, model: RobotModel, config: RobotConfig, opts: WorldOptions | None = None, q0=None):
        self.opts = opts = opts or WorldOptions()
        rng = np.random.default_rng(opts.seed)
        ns = opts.seed if opts.noise_seed is None else opts.noise_seed
        self.model = model
        self.config = config
        q0 = np.zeros(model.nq) if q0 is None else np.asarray(q0, float)
        if opts.clock not in ("twin", "host"):
            raise ValueError(f"unknown bench clock {opts.clock!r} (twin or host)")
        self.clock: Clock = HOST_CLOCK  # what the drivers of this bench pace and stamp by
        check_world_options(opts, model.name)
        if opts.physics == "mujoco":
            from drivers.emulators.mujoco_twin import ServoModel, Twin, TwinOptions, TwinRobot

            # the servos' Position P Gain: an emulated Dynamixel servo powers on at the factory value and holds
            # what the link writes to its register 84 (the bus passes it to the twin); the framed protocol has
            # no gain register, so its emulated controller runs the configured gain, as its firmware would
            p_gain = float(config.executor.position_p_gain) if opts.bus == "framed" else ServoModel().p_gain
            topts = TwinOptions(
                time_scale=opts.time_scale,
                servo=ServoModel(p_gain=p_gain, integral_time_s=opts.servo_integral_s),
                encoder_noise_rad=2e-4 if opts.noise else 0.0,
                board_averaging=opts.board_averaging,
                board_conversion_s=1.0 / opts.board_rate_hz,
                clamp_soles=opts.clamp_soles,
                trace=opts.twin_trace,
                max_steps_per_s=opts.twin_max_steps_per_s,
                fixed_base=opts.fixed_base,
            )
            self.twin = Twin(model, twin_truth(model, opts.truth), topts, q0=q0, seed=ns)
            self.plant = self.twin
            if opts.clock == "twin":
                from drivers.emulators.twin_clock import TwinClock

                self.clock = TwinClock(self.twin)
            self.twin.start()
            self.robot = None if opts.fixed_base else TwinRobot(self.twin, opts.placement_error, seed=ns + 1)
        elif opts.physics == "kinematic":
            self.twin = None
            self.plant = JointPlant(q0, tau=opts.tau, noise_rad=2e-4 if opts.noise else 0.0, seed=ns,
                                    time_scale=opts.time_scale)  # fmt: skip
            self.robot = SimRobot(
                model, self.plant, twin_truth(model, opts.truth), opts.placement_error, seed=ns + 1
            )
        else:
            raise ValueError(f"unknown physics {opts.physics!r}")
        if opts.bus == "dxl":
            from drivers.emulators.dxl_bus import DxlBusEmulator

            servos = servo_order(config, model.joint_names)
            self.torque_constants = motor_constants(servos, self.twin) if opts.fixed_base else {}
            self.bus = DxlBusEmulator(servos, self.plant, torque_constants=self.torque_constants)
            self.robot_endpoint = f"dxl:{self.bus.path}?baud={config.baud}"
        elif opts.bus == "framed":
            from drivers.emulators.framed_controller import FramedControllerEmulator

            self.bus = FramedControllerEmulator(self.plant)
            self.robot_endpoint = f"serial:{self.bus.path}"
        else:
            raise ValueError(f"unknown bus {opts.bus!r}")
        self.boards = []
        for i in range(0 if opts.fixed_base else STANDING_BOARDS):
            imp = BoardImperfections.thesis_like(rng, i) if opts.noise else BoardImperfections()
            self.boards.append(
                WbbEmulator(
                    self.robot.board_load(i),
                    rate_hz=opts.board_rate_hz,
                    imperfections=imp,
                    faults=opts.faults[i],
                    seed=ns + 10 + i,
                    name=f"board{i}",
                    conversions=self.twin.board_conversions(i)
                    if self.twin is not None and opts.board_averaging
                    else None,
                )
            )
        self._board_paths = [
            b.open_pty() if t == "pty" else None
            for b, t in zip(self.boards, opts.board_transports, strict=False)
        ]

    def board_openers(self):
        """Transport factories for the real HID board driver, one per board."""
        from drivers.wbb.transports import open_serial_bridge

        out = []
        for emu, path in zip(self.boards, self._board_paths, strict=True):
            if path is None:
                out.append(emu.connect_socketpair)
            else:
                out.append(lambda p=path: open_serial_bridge(p))
        return out

    def place_weight(self, cell: int | None, kg: float) -> None:
        """A known weight of `kg` right over cell `cell` (0..3: TR, BR, TL, BL) of every board, whatever else
        loads it; None takes the weights off (recalibration, `drivers.wbb.recalibrate`)."""
        for emu in self.boards:
            emu.load_override = None if cell is None else np.eye(4)[cell] * kg

    def on_placement(self, placement, right_offset, left_offset, lifted: bool = False) -> None:
        """The operator lifts the robot and re-places it on the boards (`lifted`: on its base sole alone)."""
        self.robot.place(placement.other_foot, right_offset, left_offset, lifted)

    def close(self) -> None:
        if self.twin is not None:
            self.twin.close()
        self.bus.close()
        for b in self.boards:
            b.close()
