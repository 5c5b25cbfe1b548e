"""Open everything a run needs from endpoint strings: robot link, boards, and (for `sim`) the emulated bench."""

from __future__ import annotations

import math
import sys

from drivers.clock import HOST_CLOCK, Clock
from drivers.config import RobotConfig
from drivers.emulators.world import SimWorld, WorldOptions
from drivers.executor import Operator
from drivers.link import open_link
from drivers.wbb.open import board_drivers, start_all
from drivers.wbb.recalibrate import apply_cell_gains
from formats.board_gains import BoardGains
from formats.errors import DataError, DeviceError
from robots.stance import other_site
from robots.stance_spec import default_base
from robots.tree import RobotModel


class SimOperator(Operator):
    """The emulated operator: lifts the simulated robot off the boards and re-places it instantly."""

    def __init__(self, world: SimWorld) -> None:
        self.world = world

    def lift(self, placement) -> None:
        self.world.robot.lift()

    def place(self, placement, right_offset, left_offset, lifted: bool = False) -> None:
        self.world.on_placement(placement, right_offset, left_offset, lifted)


def sole_names(model: RobotModel) -> tuple[str, str]:
    """(base, other) contact sites of a standing robot, for the operator's prompts; generic words otherwise."""
    try:
        base = default_base(model)
        return model.base_site(base).name, other_site(model, base)
    except (DataError, KeyError, ValueError):
        return ("the base sole", "the other sole")


def ask_on_stderr(prompt: str) -> str:
    """Ask the person at the bench: the prompt on stderr (stdout may be a command's JSON), their line from stdin."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()


class PromptOperator(Operator):
    """Asks the person at the robot to lift / place it (Enter to continue); `soles`: (base, other) site names."""

    def __init__(
        self, soles: tuple[str, str] = ("the base sole", "the other sole"), ask=ask_on_stderr, out=sys.stderr
    ) -> None:
        self.soles, self.ask, self.out = soles, ask, out

    def lift(self, placement) -> None:
        self.ask("Lift the robot off the boards (on its stand), then press Enter ")

    def place(self, placement, right_offset, left_offset, lifted: bool = False) -> None:
        x, y, psi = placement.other_foot
        base, other = self.soles
        where = f"x={x * 1000:.0f} mm, y={y * 1000:.0f} mm, yaw={math.degrees(psi):.1f} deg from {base}"
        if lifted:
            self.ask(
                f"Placement {placement.index}: stand the robot on {base} alone, on the first board, {other} kept in "
                f"the air above {where}; then press Enter "
            )
        else:
            self.ask(
                f"Placement {placement.index}: {other} at {where}. Place the robot on the boards, then press "
                "Enter "
            )


def check_endpoints(robot: str, boards: str | None, fixed_base: bool) -> None:
    """Refuse a robot and boards that cannot make one bench (DeviceError): boards under a fixed-base arm, or the
    emulated robot with real boards (or the other way round): the simulated robot loads the emulated boards."""
    if fixed_base and boards is not None:
        raise DeviceError("a fixed-base robot runs without boards (--boards is for a robot standing on them)")
    if robot.startswith("sim") != (boards == "sim") and not (robot.startswith("sim") and fixed_base):
        raise DeviceError(
            "--robot sim and --boards sim go together (the simulated robot loads the emulated boards)"
        )


class Session:
    """Context manager: connected link, started boards, operator; closes everything on exit. `clock` is the
    bench clock the drivers pace and stamp by: the host's, or the emulated bench's (`SimWorld.clock`)."""

    def __init__(
        self,
        robot: str,
        boards: str | None,
        model: RobotModel,
        config: RobotConfig,
        world_opts: WorldOptions | None = None,
        prompt: bool = True,
        q0=None,
        board_gains: BoardGains | None = None,
    ) -> None:
        """`board_gains`: per-cell gains measured on these boards (`poise boards calibrate`), set once they start."""
        self.model, self.config = model, config
        sim_robot = robot.startswith("sim")
        fixed = world_opts is not None and world_opts.fixed_base
        check_endpoints(robot, boards, fixed)
        self.world = None
        self.link = None
        self.boards = []
        self.clock: Clock = HOST_CLOCK
        try:
            if sim_robot:
                opts = world_opts or WorldOptions()
                if robot == "sim:framed":
                    opts.bus = "framed"
                self.world = SimWorld(model, config, opts, q0=q0)
                robot = self.world.robot_endpoint
                self.clock = self.world.clock
                openers = self.world.board_openers()
                drivers = board_drivers("sim", openers, clock=self.clock) if openers else []
                self.operator: Operator = Operator() if fixed else SimOperator(self.world)
            else:  # no boards: a fixed-base robot (encoders, and motor currents on a Dynamixel link)
                drivers = board_drivers(boards) if boards is not None else []
                self.operator = PromptOperator(sole_names(model)) if prompt else Operator()
            self.link = open_link(robot, model.joint_names, config)
            self.link.connect()
            self.boards = start_all(drivers)
            if board_gains is not None:
                apply_cell_gains(self.boards, board_gains)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for b in self.boards:
            b.close()
        if self.link is not None:
            self.link.close()
        if self.world is not None:
            self.world.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
