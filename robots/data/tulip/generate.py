"""Generate TUlip's URDF and Table D.4 parameter set from the thesis tables (spec tulip-com.md §1).

Run `python -m robots.data.tulip.generate` to rewrite `tulip.urdf` and `mc.json` beside this file. The model
itself is loaded from the URDF and `tulip.poise.toml` (robots/tulip.py); tests check the loaded model against
the thesis's numbers, so the generated files and these tables cannot drift apart unnoticed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from formats.parameter_set import ParameterSet, parameter_set_to_json
from robots.tree import AXES, Joint, Link, RobotModel, Site, offset3
from robots.urdf_write import model_to_urdf

JOINT_NAMES = [f"theta{i}" for i in range(1, 13)]
JOINT_LABELS = [
    "right hip z", "right hip x", "right hip y", "right knee y", "right ankle y", "right ankle x",
    "left hip z", "left hip x", "left hip y", "left knee y", "left ankle y", "left ankle x",
]  # fmt: skip
LINK_NAMES = [
    "torso",
    "hip_r_z", "hip_r_x", "upper_leg_r", "lower_leg_r", "ankle_r", "foot_r",
    "hip_l_z", "hip_l_x", "upper_leg_l", "lower_leg_l", "ankle_l", "foot_l",
]  # fmt: skip

# Feet (Table D.2): inner 0.0625, outer 0.0875, toe 0.1755, heel 0.0595 m, in the sole frame.
FOOT_RIGHT = (-0.0595, 0.1755, -0.0875, 0.0625)
FOOT_LEFT = (-0.0595, 0.1755, -0.0625, 0.0875)

_LEG_AXES = ["z", "x", "y", "y", "y", "x"]


def _chain() -> tuple[list[Link], list[Joint], list[Site]]:
    links = [Link("torso", "0", (1, 1, 1))]
    joints: list[Joint] = []
    for side, first in (("r", 1), ("l", 7)):
        labels = [str(first + k) for k in range(6)]
        names = LINK_NAMES[first : first + 6]
        links += [Link(n, lab, (1, 1, -1)) for n, lab in zip(names, labels, strict=True)]
        hy = "l0y" if side == "l" else "0"
        knee_y = f"+l{first + 2}y" if side == "r" else f"-l{first + 2}y"
        offsets = [
            offset3(0, hy, 0),
            offset3(0, 0, f"-l{first}z"),
            offset3(0, 0, 0),
            offset3(0, knee_y, f"-l{first + 2}z"),
            offset3(0, 0, f"-l{first + 3}z"),
            offset3(0, 0, f"-l{first + 4}z"),
        ]
        parent = "torso"
        for k in range(6):
            joints.append(Joint(JOINT_NAMES[first - 1 + k], parent, names[k], AXES[_LEG_AXES[k]], offsets[k]))
            parent = names[k]
    sites = [
        Site("sole_r", "foot_r", offset3(0, 0, "-l6z"), FOOT_RIGHT),
        Site("sole_l", "foot_l", offset3(0, 0, "-l12z"), FOOT_LEFT),
    ]
    return links, joints, sites


def _lengths(l3y: float) -> dict[str, float]:
    lz = {1: 0.182, 2: 0.0, 3: 0.32, 4: 0.276, 5: 0.013, 6: 0.04}
    out = {"l0y": 0.15}
    for k, v in lz.items():
        out[f"l{k}z"] = v
        out[f"l{k + 6}z"] = v
    out["l3y"] = out["l9y"] = l3y
    return out


def _param_set(name, desc, torso, hip1, hip2, upper, lower, ankle, foot, l3y, inertia) -> ParameterSet:
    rows = [torso] + [hip1, hip2, upper, lower, ankle, foot] * 2
    mass = {n: r[3] for n, r in zip(LINK_NAMES, rows, strict=True)}
    com = {n: (r[0], r[1], r[2]) for n, r in zip(LINK_NAMES, rows, strict=True)}
    return ParameterSet(name, mass, com, _lengths(l3y), inertia, desc)


# Table D.3: principal inertias about the link CoM (kg·m²).
_INERTIA_ROWS = [
    (0.455591, 0.343455, 0.117961),
    (3.34784e-5, 0.00159022, 9.37395e-4),
    (0.001, 0.001, 0.001),
    (0.0245564, 0.0189823, 0.0024774),
    (0.00662872, 0.00616003, 1.50653e-4),
    (0.001, 0.001, 0.001),
    (0.002, 0.00262805, 0.00343154),
]
_INERTIA = {n: r for n, r in zip(LINK_NAMES, [_INERTIA_ROWS[0]] + _INERTIA_ROWS[1:] * 2, strict=True)}


def parameter_sets() -> dict[str, ParameterSet]:
    """`sim` (Table D.1, Gazebo model and design guess) and `mc` (Table D.4, TUlipMC controller model)."""
    sim = _param_set(
        "sim",
        "Tables D.1, D.3: Gazebo model (masses, CoMs, lengths; inertias about the CoM), the guessed parameters used for design",
        (-0.02, 0.075, 0.17, 12.0),
        (-0.02, 0.0, 0.091, 0.8),
        (-0.03, 0.0, 0.0, 0.01),
        (0.0, 0.0, 0.16, 2.9),
        (0.0, 0.0, 0.138, 0.8),
        (0.0, 0.0, 0.0065, 0.01),
        (0.08775, 0.0, 0.02, 0.8),
        0.01,
        _INERTIA,
    )
    mc = _param_set(
        "mc",
        "Table D.4: TUlipMC, the controller's old model",
        (0.0, 0.075, 0.17, 15.0),
        (0.0, 0.0, 0.091, 1.0),
        (0.0, 0.0, 0.0, 0.0),
        (0.0, 0.0, 0.16, 3.0),
        (0.0, 0.0, 0.138, 1.0),
        (0.0, 0.0, 0.0065, 0.0),
        (0.0, 0.0, 0.02, 1.0),
        0.0,
        {},
    )
    return {"sim": sim, "mc": mc}


def _limits() -> tuple[np.ndarray, np.ndarray]:
    # Table 3.1 (degrees), per leg: hip z, hip x, hip y, knee, ankle y, ankle x.
    right = [(-45, 45), (-30, 22), (-65, 29), (0, 125), (-38, 38), (-20, 17)]
    left = [(-45, 45), (-22, 30), (-65, 29), (0, 125), (-38, 38), (-17, 20)]
    lo = np.radians([a for a, _ in right + left])
    hi = np.radians([b for _, b in right + left])
    return lo, hi


# The thesis gives no velocity or effort limits: placeholders, to be replaced by the real servo data.
VELOCITY_LIMIT = 2.0  # rad/s
EFFORT_LIMIT = 40.0  # N·m


def tables_model() -> RobotModel:
    """TUlip built directly from the tables (only for generating the files)."""
    links, joints, sites = _chain()
    lo, hi = _limits()
    joints = [
        replace(j, lower=float(lo[k]), upper=float(hi[k]), velocity=VELOCITY_LIMIT, effort=EFFORT_LIMIT)
        for k, j in enumerate(joints)
    ]
    A = np.zeros((1, 12))
    A[0, 6], A[0, 0] = 1.0, -1.0  # θ7 − θ1 ≤ 60°: the hip-x motors collide
    simplified_zero = []
    for name in LINK_NAMES[1:]:
        foot = name.startswith("foot")
        if not foot:
            simplified_zero.append((name, "cx"))
        simplified_zero.append((name, "cy"))
    simplified_zero += [("hip_r_x", "cz"), ("hip_l_x", "cz")]
    return RobotModel(
        name="tulip",
        links=links,
        joints=joints,
        sites=sites,
        lower=lo,
        upper=hi,
        params=parameter_sets(),
        bases={"right": "sole_r", "left": "sole_l"},
        coupled_A=A,
        coupled_b=np.radians([60.0]),
        coupled_names=["theta7 - theta1 (hip-x motors collide)"],
        description="TUlip biped, 12 leg joints, 13 links (torso 0, right leg 1-6, left leg 7-12)",
        simplified_zero=simplified_zero,
    )


def main() -> None:
    here = Path(__file__).parent
    model = tables_model()
    text = model_to_urdf(model, "sim")
    note = (
        "<!-- TUlip biped (MSc thesis, Tables 3.1, D.1, D.3), generated by robots/data/tulip/generate.py.\n"
        "     Velocity and effort limits are placeholders: the thesis does not give them. -->\n"
    )
    head, _, rest = text.partition("\n")
    (here / "tulip.urdf").write_text(head + "\n" + note + rest)
    (here / "mc.json").write_text(json.dumps(parameter_set_to_json(model.params["mc"]), indent=2) + "\n")


if __name__ == "__main__":
    main()
