"""URDF import through `yourdfpy` (a maintained, pure-Python URDF parser that keeps every element we need:
origins with rotation, joint types, axes, limits, mimic, inertials, without loading meshes).

`load_urdf` returns a `RobotModel` whose only parameter set (`urdf`) holds the file's inertials. Links without
mass that only carry a frame (sensor, skin and DH frames on fixed joints) become sites of their parent link,
so the dynamics sees the same bodies as Pinocchio and MuJoCo; massive links behind fixed joints (e.g. both
halves of an arm around an F/T sensor) stay separate bodies.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet, check_masses
from robots.interrupt import held
from robots.physical import principal_moments, triangle_gap
from robots.tree import Joint, Link, Mimic, RobotModel, Site, check_structure

URDF_SET = "urdf"


def matrix_rpy(R: np.ndarray) -> tuple[float, float, float]:
    """URDF roll-pitch-yaw of a rotation matrix (inverse of `robots.tree.rpy_matrix`)."""
    pitch = float(np.arctan2(-R[2, 0], np.hypot(R[0, 0], R[1, 0])))
    if np.hypot(R[0, 0], R[1, 0]) > 1e-12:
        roll = float(np.arctan2(R[2, 1], R[2, 2]))
        yaw = float(np.arctan2(R[1, 0], R[0, 0]))
    else:  # gimbal lock: put everything in yaw
        roll = 0.0
        yaw = float(np.arctan2(-R[0, 1], R[1, 1]))
    return roll, pitch, yaw


def _clean(x: float) -> float:
    return 0.0 if abs(x) < 1e-15 else float(x)


def package_search_path(urdf_path: Path) -> list[Path]:
    """Where `package://NAME/...` is looked for: $ROS_PACKAGE_PATH, the URDF's ancestors, icub-models' share."""
    roots = [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
    roots += list(urdf_path.resolve().parents)
    try:
        import icub_models

        roots.append(Path(icub_models.get_models_path()).parent)
    except (ImportError, AttributeError, OSError):
        pass
    return roots


def resolve_package_uri(uri: str, urdf_path: str | Path, hint: str = "") -> Path:
    """File path of a `package://NAME/rel` or `file://` URI or a relative path in a URDF; DataError if missing
    (ending with `hint`, e.g. the caller's option to do without the file)."""
    urdf_path = Path(urdf_path)
    if uri.startswith("file://"):
        p = Path(uri[len("file://") :])
        return p if p.is_absolute() else urdf_path.parent / p
    if not uri.startswith("package://"):
        return urdf_path.parent / uri
    rest = uri[len("package://") :]
    pkg, _, rel = rest.partition("/")
    for root in package_search_path(urdf_path):
        for cand in (root / pkg / rel, root / rel if root.name == pkg else None):
            if cand is not None and cand.exists():
                return cand
    raise DataError(
        f"{urdf_path}: cannot resolve {uri!r} (package {pkg!r} not found; set ROS_PACKAGE_PATH{hint})"
    )


@dataclass(frozen=True)
class UrdfInertial:
    """One link's inertial element in the link frame: mass, CoM, inertia about the CoM (6 entries)."""

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float]


def _inertial(link) -> UrdfInertial | None:
    ine = link.inertial
    if ine is None:
        return None
    T = np.asarray(ine.origin) if ine.origin is not None else np.eye(4)
    mass = float(ine.mass) if ine.mass is not None else 0.0
    I = np.asarray(ine.inertia, dtype=float) if ine.inertia is not None else np.zeros((3, 3))
    R = T[:3, :3]
    Il = R @ I @ R.T  # inertia about the CoM, axes of the link frame
    six = (Il[0, 0], Il[0, 1], Il[0, 2], Il[1, 1], Il[1, 2], Il[2, 2])
    return UrdfInertial(mass, tuple(_clean(v) for v in T[:3, 3]), tuple(_clean(v) for v in six))


INERTIA_ATOL = 1e-10  # kg·m²: a principal moment this far below 0 is rounding (a 1 g, 1 cm body has ~1e-8)


def check_inertial(name: str, ine: UrdfInertial, source: str) -> str | None:
    """DataError naming the link for a negative mass or a non-positive-definite inertia; a warning (returned)
    for principal moments that violate the triangle inequality (physically impossible, but CAD exports and
    thesis tables contain them)."""
    if not np.isfinite(ine.mass) or ine.mass < 0:
        raise DataError(f"{source}: link {name!r}: <mass value> must be ≥ 0, got {ine.mass}")
    if not np.all(np.isfinite(ine.inertia)):
        raise DataError(f"{source}: link {name!r}: <inertia> has non-finite entries")
    ev, tol = principal_moments(ine.inertia)
    tol = max(tol, INERTIA_ATOL)  # massive or massless link alike: rounding noise of a printed tensor passes
    if ev.min() < -tol:
        raise DataError(
            f"{source}: link {name!r}: <inertia> is not positive definite (eigenvalues {', '.join(f'{e:.3g}' for e in ev)})"
        )
    a, b, c = ev
    if ine.mass > 0 and triangle_gap(ev, tol):
        return f"link {name!r}: principal inertias {a:.3g}, {b:.3g}, {c:.3g} kg·m² violate the triangle inequality"
    return None


_VECTORS = {"origin": ("xyz", "rpy"), "axis": ("xyz",)}
_NUMBERS = {
    "limit": ("lower", "upper", "velocity", "effort"),
    "mass": ("value",),
    "inertia": ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"),
    "mimic": ("multiplier", "offset"),
    "dynamics": ("damping", "friction"),
}
_REQUIRED = {"mass": ("value",), "inertia": _NUMBERS["inertia"]}
_NON_NEGATIVE = {"limit": ("velocity", "effort")}  # a negative mass: check_inertial (read_inertials reads it)


# An element in the xacro namespace (…/xacro, …/xacro/) or an attribute with a ${…} property: searched in C.
_XACRO_LEFT = 'boolean(//*[contains(concat(namespace-uri(), "/"), "/xacro/")] | //@*[contains(., "${")])'


def _check_not_xacro(path: Path, root) -> None:
    """Refuse an unexpanded xacro file (macros or ${…} properties left; an expanded file may keep xmlns:xacro):
    it would load as a broken or smaller robot. One XPath query (lxml, in C) rather than a Python walk."""
    if root.xpath(_XACRO_LEFT):
        raise DataError(f"{path}: a xacro file (macros not expanded): expand it with xacro first "
                        f"(`xacro {path.name} > robot.urdf`)")  # fmt: skip


def _number(text: str, where: str, tag: str, attr: str) -> float:
    """A finite float from attribute `attr` of <tag>; DataError naming `where`, tag and attribute otherwise (the
    message is built only then: thousands of numbers per file)."""
    try:
        x = float(text)
    except ValueError:
        raise DataError(f"{where}: <{tag} {attr}> is not a number ({text!r})") from None
    if not math.isfinite(x):
        raise DataError(f"{where}: <{tag} {attr}> must be finite, got {text!r}")
    return x


def _check_attributes(el, where: str) -> None:
    """One element's numeric attributes: vectors of three finite numbers, required and non-negative values."""
    tag = el.tag
    attrib = el.attrib
    for attr in _VECTORS.get(tag, ()):
        text = attrib.get(attr)
        if text is None:
            continue
        parts = text.split()
        if len(parts) != 3:
            raise DataError(f"{where}: <{tag} {attr}> needs 3 numbers, got {len(parts)} ({text!r})")
        for v in parts:
            _number(v, where, tag, attr)
    for attr in _REQUIRED.get(tag, ()):
        if attr not in attrib:
            raise DataError(f"{where}: <{tag}> lacks its required attribute {attr!r}")
    non_negative = _NON_NEGATIVE.get(tag, ())
    for attr in _NUMBERS.get(tag, ()):
        text = attrib.get(attr)
        if text is not None:
            x = _number(text.strip(), where, tag, attr)
            if x < 0 and attr in non_negative:
                raise DataError(f"{where}: <{tag} {attr}> must be ≥ 0, got {x:g}")


_CHECKED_TAGS = tuple(sorted({*_VECTORS, *_NUMBERS, *_REQUIRED}))


def _check_elements(root, source: str) -> None:
    """Every link's and joint's numbers as written (yourdfpy would default a missing attribute or fail later
    without naming the element): DataError naming the file, the element and the attribute. Only the elements
    that carry numbers are visited (lxml filters the tags)."""
    for top in root.iterchildren("link", "joint"):
        where = f"{source}: {top.tag} {top.get('name')!r}"
        for el in top.iter(*_CHECKED_TAGS):
            _check_attributes(el, where)


def _check_xml(path: Path) -> None:
    """Refuse a file that is not well-formed XML or whose root is not a named <robot>: yourdfpy would recover
    from a truncated file and load a smaller robot."""
    from lxml import etree

    parser = etree.XMLParser(recover=False, resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.parse(str(path), parser).getroot()
    except etree.XMLSyntaxError as exc:
        head = path.read_bytes()[:1_000_000]
        if b"\0" in head[:4096]:
            raise DataError(f"{path}: not a text URDF file") from None
        if b"xacro:" in head:
            raise DataError(f"{path}: a xacro file (xacro: prefix not declared): expand it with xacro first "
                            f"(`xacro {path.name} > robot.urdf`)") from None  # fmt: skip
        msg = re.sub(r", line \d+, column \d+$", "", str(exc.msg))
        raise DataError(f"{path}: not well-formed XML (line {exc.lineno}: {msg})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    _check_not_xacro(path, root)
    if root.tag != "robot":
        raise DataError(f"{path}: not a URDF: the root element is <{root.tag}>, not <robot>")
    if not root.get("name"):
        raise DataError(f"{path}: malformed URDF: <robot> has no name attribute")
    _check_elements(root, str(path))


def _parse(path: Path):
    from lxml import etree

    with held():  # trimesh (yourdfpy imports it) swallows Ctrl-C around its own imports
        import yourdfpy

    _check_xml(path)
    try:
        return yourdfpy.URDF.load(
            str(path),
            build_scene_graph=False,
            load_meshes=False,
            build_collision_scene_graph=False,
            load_collision_meshes=False,
        )
    except etree.XMLSyntaxError as exc:
        raise DataError(f"{path}: not well-formed XML ({exc})") from None
    except KeyError as exc:
        raise DataError(f"{path}: malformed URDF (an element lacks its required attribute {exc})") from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise DataError(f"{path}: malformed URDF ({exc})") from None


def _limit_warnings(robot) -> list[str]:
    """Revolute/prismatic joints whose <limit> range is [0, 0] (what leaving out lower and upper means): the
    joint is pinned, which is rarely what the author meant."""
    return [
        f"joint {jt.name!r}: its <limit> range is [0, 0] (lower and upper default to 0): the joint cannot move; "
        "give lower and upper, or make it continuous"
        for jt in robot.joints
        if jt.type in ("revolute", "prismatic")
        and jt.limit is not None
        and not (jt.limit.lower or 0.0)
        and not (jt.limit.upper or 0.0)
    ]


# URDF limits are radians (rad/s). A revolute bound beyond ±DEGREES_RANGE[0] or a speed above DEGREES_SPEED[0],
# up to the band's top, reads as degrees (±170°, 180°/s) and is refused. Both thresholds keep a margin above the
# placeholders real files use: ±4π written as 12.5664 or 12.57 (and ±3π, ±10 rad) pass below 13 rad; 100 rad/s
# (iCub, Alex) passes below 110 rad/s. Other bounds beyond ±2π and speeds from PLAUSIBLE_SPEED up to
# PLACEHOLDER_LIMIT load with a warning; speeds ≥ PLACEHOLDER_LIMIT are placeholders (robots.description).
DEGREES_RANGE = (13.0, 360.0)  # rad
DEGREES_SPEED = (110.0, 720.0)  # rad/s
PLAUSIBLE_SPEED = 720.0  # rad/s
PLACEHOLDER_LIMIT = (
    1e4  # rad/s or N·m: a velocity or effort limit this large is a placeholder, not the joint's
)


def _in_band(x: float, band: tuple[float, float]) -> bool:
    return bool(band[0] < x <= band[1] + 1e-9)


def _degree_checks(joints: list[Joint], source: str, overridden: frozenset = frozenset()) -> list[str]:
    """DataError naming the first rotary joint whose limits look like degrees; warnings for rotary bounds beyond
    ±2π or speeds from PLAUSIBLE_SPEED up to PLACEHOLDER_LIMIT. Limits a robot description sets instead
    (`overridden`: (joint, 'lower'|'upper'|'velocity') pairs) are not judged: the description's values apply."""
    warnings = []
    for jt in joints:
        if jt.type not in ("revolute", "continuous"):
            continue
        ranged = jt.type == "revolute" and not {(jt.name, "lower"), (jt.name, "upper")} <= overridden
        bound = max(abs(jt.lower), abs(jt.upper)) if ranged else 0.0
        speed = 0.0 if (jt.name, "velocity") in overridden else jt.velocity
        if _in_band(bound, DEGREES_RANGE) or _in_band(speed, DEGREES_SPEED):
            raise DataError(
                f"{source}: joint {jt.name!r}: <limit> lower {jt.lower:g}, upper {jt.upper:g} rad, velocity "
                f"{jt.velocity:g} rad/s look like degrees (URDF limits are radians; refused: a bound beyond "
                f"±{DEGREES_RANGE[0]:g} rad, up to ±{DEGREES_RANGE[1]:g}, or a speed above {DEGREES_SPEED[0]:g} "
                f"rad/s, up to {DEGREES_SPEED[1]:g}): convert the file, or set the joint's limits in a robot "
                f"description (.poise.toml: [joint_limits.{jt.name}] lower, upper, velocity)"
            )
        if bound > 2 * np.pi + 1e-6 and np.isfinite(bound):
            warnings.append(f"joint {jt.name!r}: range [{jt.lower:g}, {jt.upper:g}] rad exceeds ±2π")
        elif PLAUSIBLE_SPEED < speed < PLACEHOLDER_LIMIT:
            warnings.append(f"joint {jt.name!r}: velocity limit {jt.velocity:g} rad/s is implausibly high")
    return warnings


def _joint(jt, source: str) -> Joint:
    T = np.asarray(jt.origin) if jt.origin is not None else np.eye(4)
    rpy = tuple(_clean(v) for v in matrix_rpy(T[:3, :3]))
    xyz = tuple(_clean(v) for v in T[:3, 3])
    jtype = jt.type
    axis = tuple(float(v) for v in (jt.axis if jt.axis is not None else (1.0, 0.0, 0.0)))
    lim = jt.limit
    lower, upper, vel, eff = -np.inf, np.inf, np.inf, np.inf
    if lim is not None:
        if jtype in ("revolute", "prismatic"):
            lower = float(lim.lower) if lim.lower is not None else 0.0
            upper = float(lim.upper) if lim.upper is not None else 0.0
        vel = float(lim.velocity) if lim.velocity is not None else np.inf
        eff = float(lim.effort) if lim.effort is not None else np.inf
    elif jtype in ("revolute", "prismatic"):
        raise DataError(f"{source}: joint {jt.name!r}: a {jtype} joint needs a <limit>")
    if lower > upper:
        raise DataError(f"{source}: joint {jt.name!r}: <limit> lower {lower} > upper {upper}")
    mimic = None
    if jt.mimic is not None:
        mult = 1.0 if jt.mimic.multiplier is None else float(jt.mimic.multiplier)  # 0 is a valid multiplier
        mimic = Mimic(jt.mimic.joint, mult, float(jt.mimic.offset or 0.0))
    damping = friction = 0.0
    if jt.dynamics is not None:
        damping = float(jt.dynamics.damping or 0.0)
        friction = float(jt.dynamics.friction or 0.0)
    return Joint(
        jt.name,
        jt.parent,
        jt.child,
        axis,
        tuple({"": v} if v else {} for v in xyz),
        jtype,
        rpy,
        lower,
        upper,
        vel,
        eff,
        mimic,
        damping,
        friction,
    )


def load_urdf(
    path: str | Path,
    name: str | None = None,
    keep_massless: bool = False,
    overridden: frozenset = frozenset(),
) -> RobotModel:
    """A `RobotModel` from a URDF file; errors name the offending element. `overridden`: the (joint, limit) pairs a
    robot description sets, which the degrees heuristic leaves to it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such URDF file")
    urdf = _parse(path)
    robot = urdf.robot
    source = str(path)
    check_structure([lk.name for lk in robot.links], robot.joints, source, require_motion=True)
    inertials = {lk.name: _inertial(lk) for lk in robot.links}
    warnings = [
        w for n, ine in inertials.items() if ine is not None and (w := check_inertial(n, ine, source))
    ]
    warnings += _limit_warnings(robot)
    joints = [_joint(jt, source) for jt in robot.joints]
    warnings += _degree_checks(joints, source, overridden)
    by_child = {jt.child: jt for jt in joints}
    has_children = {jt.parent for jt in joints}
    # Massless leaves on fixed joints are frames, not bodies.
    frames = set()
    if not keep_massless:
        for lk in robot.links:
            ine = inertials[lk.name]
            jt = by_child.get(lk.name)
            if (
                jt is not None
                and jt.type == "fixed"
                and lk.name not in has_children
                and (ine is None or ine.mass == 0)
            ):
                frames.add(lk.name)
    sites = [Site(n, by_child[n].parent, by_child[n].offset, None, by_child[n].rpy) for n in sorted(frames)]
    links = [Link(lk.name, lk.name) for lk in robot.links if lk.name not in frames]
    joints = [jt for jt in joints if jt.child not in frames]
    kept = [lk.name for lk in links]
    zero = UrdfInertial(0.0, (0.0, 0.0, 0.0), (0.0,) * 6)
    ines = {n: inertials[n] or zero for n in kept}
    check_masses({n: ines[n].mass for n in kept}, source)
    ps = ParameterSet(
        URDF_SET,
        {n: ines[n].mass for n in kept},
        {n: ines[n].com for n in kept},
        {},
        {n: ines[n].inertia for n in kept},
        f"inertial parameters of {path.name}",
    )
    return RobotModel(
        name=name or robot.name or path.stem,
        links=links,
        joints=joints,
        sites=sites,
        lower=None,
        upper=None,
        params={URDF_SET: ps},
        bases={},
        description=f"{robot.name} from {path.name}",
        source=str(path),
        warnings=warnings,
    )
