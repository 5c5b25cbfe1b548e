"""Write a `RobotModel` with one parameter set as URDF (how the built-in TUlip description was generated)."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

import numpy as np

from formats.parameter_set import ParameterSet
from robots.kinematics import _offset
from robots.tree import RobotModel


def _f(x: float) -> str:
    return repr(float(x)) if x != 0 else "0"


def _vec(v) -> str:
    return " ".join(_f(x) for x in v)


def model_to_urdf(model: RobotModel, params: str | ParameterSet) -> str:
    """URDF text: links with inertials (CoM in the link frame, inertia about the CoM), joints with limits."""
    ps = model.parameter_set(params)
    out = ['<?xml version="1.0"?>', f"<robot name={quoteattr(model.name)}>"]
    for lk in model.links:
        com = np.asarray(ps.com[lk.name], dtype=float) * np.asarray(lk.com_sign, dtype=float)
        inertia = ps.inertia.get(lk.name, (0.0, 0.0, 0.0))
        if len(inertia) == 3:
            inertia = (inertia[0], 0.0, 0.0, inertia[1], 0.0, inertia[2])
        ixx, ixy, ixz, iyy, iyz, izz = inertia
        out += [
            f"  <link name={quoteattr(lk.name)}>",
            "    <inertial>",
            f'      <origin xyz="{_vec(com)}" rpy="0 0 0"/>',
            f'      <mass value="{_f(ps.mass[lk.name])}"/>',
            f'      <inertia ixx="{_f(ixx)}" ixy="{_f(ixy)}" ixz="{_f(ixz)}" iyy="{_f(iyy)}" iyz="{_f(iyz)}"'
            f' izz="{_f(izz)}"/>',
            "    </inertial>",
            "  </link>",
        ]
    for jt in model.joints:
        xyz = _offset(jt.offset, ps.lengths)
        out += [
            f"  <joint name={quoteattr(jt.name)} type={quoteattr(jt.type)}>",
            f"    <parent link={quoteattr(jt.parent)}/>",
            f"    <child link={quoteattr(jt.child)}/>",
            f'    <origin xyz="{_vec(xyz)}" rpy="{_vec(jt.rpy)}"/>',
        ]
        if jt.moves:
            out.append(f'    <axis xyz="{_vec(jt.axis)}"/>')
        if jt.type in ("revolute", "prismatic"):
            k = model.joint_names.index(jt.name) if jt.is_coordinate else None
            lo = model.lower[k] if k is not None else jt.lower
            hi = model.upper[k] if k is not None else jt.upper
            vel = jt.velocity if np.isfinite(jt.velocity) else 100.0
            eff = jt.effort if np.isfinite(jt.effort) else 1000.0
            out.append(
                f'    <limit lower="{_f(lo)}" upper="{_f(hi)}" velocity="{_f(vel)}" effort="{_f(eff)}"/>'
            )
        if jt.mimic is not None:
            m = jt.mimic
            out.append(
                f'    <mimic joint={quoteattr(m.joint)} multiplier="{_f(m.multiplier)}" offset="{_f(m.offset)}"/>'
            )
        out.append("  </joint>")
    out.append("</robot>")
    return "\n".join(out) + "\n"
