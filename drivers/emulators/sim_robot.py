"""Simulated TUlip standing on two boards: its *true* parameters differ from the design guess (Table D.1).

Given the plant's joint positions, it computes the true CoM (right-sole base) and spreads the robot's
weight over the 8 cells of the two boards so that the cells' CoP equals the CoM's ground projection
(minimum-norm deviation from an even split; a static double-support robot's load split is otherwise
indeterminate). Board poses follow the plan's placement, optionally with a "measurement" error.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np

from drivers.emulators.plant import JointPlant
from drivers.wbb.geometry import board_poses_for, cells_in_base
from robots.kinematics import com_position
from robots.tree import ParameterSet, RobotModel

# The simulated robot's true parameters: Table D.1 with these changes (m, kg). They keep the simplified
# model exact (leg links except the feet: cx = cy = 0; feet cy = 0; hip-x cz = 0), so the demo can check
# the 13 simplified base parameters against known truth.
TRUE_CHANGES = {
    "torso": ((-0.008, 0.072, 0.150), 13.2),
    "hip_r_z": ((0.0, 0.0, 0.085), 0.85),
    "hip_l_z": ((0.0, 0.0, 0.085), 0.85),
    "hip_r_x": ((0.0, 0.0, 0.0), 0.01),
    "hip_l_x": ((0.0, 0.0, 0.0), 0.01),
    "upper_leg_r": ((0.0, 0.0, 0.150), 3.1),
    "upper_leg_l": ((0.0, 0.0, 0.150), 3.1),
    "lower_leg_r": ((0.0, 0.0, 0.130), 0.9),
    "lower_leg_l": ((0.0, 0.0, 0.130), 0.9),
    "foot_r": ((0.072, 0.0, 0.024), 0.95),
    "foot_l": ((0.072, 0.0, 0.024), 0.95),
}


def true_parameters(model: RobotModel, guess: str | None = None) -> ParameterSet:
    """The simulated robot's parameter set ('true'), derived from the guess (default: the description's `sim`
    set, else its first) by TRUE_CHANGES (TUlip's links; another robot's guess stays as it is)."""
    if guess is None:
        guess = "sim" if "sim" in model.params else next(iter(model.params))
    base = model.parameter_set(guess)
    mass, com = dict(base.mass), dict(base.com)
    for link, (c, m) in TRUE_CHANGES.items():
        if link in mass:
            mass[link], com[link] = m, c
    return replace(base, name="true", mass=mass, com=com, description="simulated robot's true parameters")


def twin_truth(model: RobotModel, spec: str | None = None) -> ParameterSet:
    """The emulated robot's true parameters: None → `true_parameters`; the name of one of the description's
    published estimates (e.g. `thesis`) → the physical robot behind them (robots/realise.py, from the first
    parameter set, CoMs moved ≤ 10 cm); else a parameter set name or JSON file (robots.params_io)."""
    if spec is None:
        return true_parameters(model)
    if spec in model.published_estimates:
        from robots.realise import load_published, realise

        prior = model.parameter_set(next(iter(model.params)))
        return realise(model, load_published(model.published_estimates[spec]), prior, 0.1, name=spec)[0]
    from robots.params_io import resolve_params

    return resolve_params(spec, model, also=list(model.published_estimates))


def distribute(total_kg: float, com_xy: np.ndarray, cells_xy: np.ndarray) -> np.ndarray:
    """Cell loads (n,) summing to total_kg whose CoP is com_xy, closest to an even split."""
    n = len(cells_xy)
    a = np.vstack([np.ones(n), cells_xy.T])  # (3, n)
    f0 = np.full(n, total_kg / n)
    b = np.array([total_kg, total_kg * com_xy[0], total_kg * com_xy[1]])
    return f0 + a.T @ np.linalg.solve(a @ a.T, b - a @ f0)


class SimRobot:
    def __init__(
        self,
        model: RobotModel,
        plant: JointPlant,
        params: ParameterSet,
        placement_error: tuple[float, float] = (0.0, 0.0),  # std of board placement error (m, rad)
        seed: int = 0,
        cache_s: float = 0.002,
    ) -> None:
        self.model = model
        self.plant = plant
        self.params = params
        self.total_kg = params.total_mass
        self.placement_error = placement_error
        self.rng = np.random.default_rng(seed)
        self.cache_s = cache_s
        self.placed = False
        self.cells = np.zeros((8, 2))
        self.board_poses: list[np.ndarray] = []
        self._cache = (-1.0, np.zeros(8))
        self._lock = threading.Lock()

    def place(self, left_foot, right_offset, left_offset, lifted: bool = False) -> None:
        """Stand the robot on the boards for a placement (plan's left-foot pose, boards' offsets); `lifted` (a
        single-support start) changes nothing here: the loads follow the model's CoM either way."""
        poses = board_poses_for(np.asarray(left_foot), np.asarray(right_offset), np.asarray(left_offset))
        s_xy, s_psi = self.placement_error
        if s_xy > 0 or s_psi > 0:
            poses = [p + np.r_[self.rng.normal(0, s_xy, 2), self.rng.normal(0, s_psi)] for p in poses]
        with self._lock:
            self.board_poses = poses
            self.cells = cells_in_base(poses)
            self.placed = True
            self._cache = (-1.0, np.zeros(8))

    def lift(self) -> None:
        with self._lock:
            self.placed = False

    def true_cop(self) -> np.ndarray:
        return com_position(self.model, self.plant.step(), self.params, "right")[:2]

    def cell_loads(self) -> np.ndarray:
        """True per-cell load (8,) in kg: board 0 cells then board 1 cells."""
        now = time.monotonic()
        with self._lock:
            t, loads = self._cache
            if now - t < self.cache_s:
                return loads
            if not self.placed:
                loads = np.zeros(8)
            else:
                loads = distribute(self.total_kg, self.true_cop(), self.cells)
            self._cache = (now, loads)
            return loads

    def board_load(self, board: int):
        return lambda: self.cell_loads()[4 * board : 4 * board + 4]
