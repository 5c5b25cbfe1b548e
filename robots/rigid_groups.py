"""Rigid groups: the links welded together by fixed joints move as one body, so their masses, CoMs and inertias
compose (parallel-axis) into one spatial inertia. A link with mass but no inertia (a force-sensor frame, a gripper
mount: a point mass) is physically valid as part of such a group; a physics engine (MuJoCo) needs a positive
inertia only for each group a joint moves, not for each link."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.parameter_set import ParameterSet
from robots.kinematics import _offset
from robots.physical import inertia_matrix
from robots.tree import RobotModel, rpy_matrix

# A group has no inertia for a physics engine when its smallest principal moment is at most MuJoCo's own bound
# (mjMINVAL, kg·m²) or, relative to its largest, rounding (a line of point masses: 0 up to rounding).
MJMINVAL = 1e-15
RELATIVE_ROUNDING = 1e-12


def rigid_groups(model: RobotModel) -> dict[str, list[str]]:
    """Group head → its links (head first, then the links welded below it through fixed joints, top-down). The
    heads are the root and every link a moving joint (coordinate or mimic) carries."""
    groups: dict[str, list[str]] = {model.root: [model.root]}
    head_of = {model.root: model.root}
    for j in model.topo_joints():
        jt = model.joints[j]
        if jt.moves:
            head_of[jt.child] = jt.child
            groups[jt.child] = [jt.child]
        else:
            head_of[jt.child] = head_of[jt.parent]
            groups[head_of[jt.parent]].append(jt.child)
    return groups


@dataclass(frozen=True)
class GroupInertia:
    """A rigid group's composed inertial parameters in its head link's frame."""

    mass: float
    com: np.ndarray  # (3,) m
    inertia: np.ndarray  # (3, 3) kg·m² about `com`

    @property
    def has_inertia(self) -> bool:
        """Every principal moment positive beyond rounding (what MuJoCo needs of a body a joint moves)."""
        lam = np.linalg.eigvalsh(self.inertia)
        return bool(self.mass > 0 and lam[0] > max(MJMINVAL, RELATIVE_ROUNDING * lam[2]))


def group_inertia(model: RobotModel, ps: ParameterSet, head: str, links: list[str]) -> GroupInertia:
    """Mass, CoM and inertia about the CoM of the welded `links` (see `rigid_groups`), in `head`'s frame."""
    pose = {head: (np.eye(3), np.zeros(3))}
    by_child = {jt.child: jt for jt in model.joints}
    parts = []
    for name in links:
        if name not in pose:
            jt = by_child[name]
            Rp, pp = pose[jt.parent]
            pose[name] = (Rp @ rpy_matrix(jt.rpy), pp + Rp @ _offset(jt.offset, ps.lengths))
        m = float(ps.mass.get(name, 0.0))
        if m > 0:
            R, p = pose[name]
            sign = np.asarray(model.links[model.link_index(name)].com_sign, dtype=float)
            c = p + R @ (np.asarray(ps.com[name], dtype=float) * sign)
            parts.append((m, c, R @ inertia_matrix(ps.inertia.get(name, (0.0,) * 6)) @ R.T))
    mass = sum(m for m, _, _ in parts)
    if not mass > 0:
        return GroupInertia(0.0, np.zeros(3), np.zeros((3, 3)))
    com = sum(m * c for m, c, _ in parts) / mass
    inertia = np.zeros((3, 3))
    for m, c, ic in parts:
        d = c - com
        inertia += ic + m * (d @ d * np.eye(3) - np.outer(d, d))  # parallel axis
    return GroupInertia(mass, com, inertia)


def groups_without_inertia(
    model: RobotModel, ps: ParameterSet, floating: bool = False
) -> dict[str, list[str]]:
    """The moving groups (head → its links with mass) that carry mass but no inertia once composed: point masses
    a joint moves, alone or in a line. The root's group moves only when the robot floats (`floating`)."""
    out = {}
    for head, links in rigid_groups(model).items():
        if head == model.root and not floating:
            continue
        gi = group_inertia(model, ps, head, links)
        if gi.mass > 0 and not gi.has_inertia:
            out[head] = [n for n in links if ps.mass.get(n, 0.0) > 0]
    return out
