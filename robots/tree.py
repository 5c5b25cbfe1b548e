"""Kinematic-tree robot description: links, joints, sites, limits, parameter sets.

One description serves numeric (numpy) and symbolic (CasADi) kinematics and the symbolic
grouping of base parameters, so link offsets are kept as linear forms in named lengths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet

# A linear form in named lengths: {"l3y": 1.0, "l3z": -1.0, "": 0.02} ("" is the constant term).
LinForm = dict[str, float]

_TERM = re.compile(r"\s*([+-]?)\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)?\s*\*?\s*([A-Za-z_]\w*)?")


def parse_length(expr: str | float) -> LinForm:
    """Parse '-l3z', '0', '0.02', 'l0y - 2*l3y' into a linear form in named lengths."""
    if isinstance(expr, int | float):
        return {"": float(expr)} if expr else {}
    form: LinForm = {}
    pos, text = 0, expr.strip()
    if text in ("", "0"):
        return {}
    while pos < len(text):
        m = _TERM.match(text, pos)
        if not m or m.end() == pos:
            raise DataError(f"cannot parse length expression {expr!r}")
        sign = -1.0 if m.group(1) == "-" else 1.0
        coef = float(m.group(2)) if m.group(2) else 1.0
        name = m.group(3) or ""
        if not m.group(2) and not name:
            raise DataError(f"cannot parse length expression {expr!r}")
        form[name] = form.get(name, 0.0) + sign * coef
        pos = m.end()
    return {k: v for k, v in form.items() if v != 0.0}


def eval_form(form: LinForm, lengths: dict[str, float]) -> float:
    """Value of a linear form for the given numeric lengths."""
    try:
        return sum(c * (1.0 if k == "" else lengths[k]) for k, c in form.items())
    except KeyError as exc:
        raise DataError(f"parameter set has no length {exc.args[0]!r}") from None


@dataclass(frozen=True)
class Link:
    """A rigid body. `com_sign` maps the stored CoM convention to the link frame (TUlip legs: cz measured down)."""

    name: str
    label: str
    com_sign: tuple[int, int, int] = (1, 1, 1)


JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


@dataclass(frozen=True)
class Mimic:
    """URDF mimic: q = multiplier · q[joint] + offset."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Joint:
    """A URDF joint: child frame = parent frame · origin (translation `offset`, rotation `rpy`) · motion(q).

    The motion is a rotation about `axis` (revolute, continuous), a translation along it (prismatic) or none
    (fixed). Limits are those of the coordinate (rad or m, rad/s or m/s, N·m or N).
    """

    name: str
    parent: str
    child: str
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    offset: tuple[LinForm, LinForm, LinForm] = ({}, {}, {})
    type: str = "revolute"
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    lower: float = -np.inf
    upper: float = np.inf
    velocity: float = np.inf
    effort: float = np.inf
    mimic: Mimic | None = None
    damping: float = 0.0  # URDF <dynamics>: viscous damping (N·m·s/rad) and Coulomb friction (N·m)
    friction: float = 0.0
    acceleration: float = np.inf  # not in URDF; from the robot description (rad/s² or m/s²)

    @property
    def moves(self) -> bool:
        return self.type != "fixed"

    @property
    def is_coordinate(self) -> bool:
        """A joint with its own coordinate in q (moving and not a mimic)."""
        return self.type != "fixed" and self.mimic is None


def _mimic_problem(jt, types: dict[str, str], mimics: set[str]) -> str | None:
    """Why joint `jt`'s mimic cannot be followed (None when it can): q must be a coordinate's multiple."""
    target = jt.mimic.joint
    if target == jt.name:
        return "mimics itself"
    if target not in types:
        return f"mimics {target!r}, which does not exist"
    if types[target] == "fixed":
        return f"mimics {target!r}, which is a fixed joint"
    if target in mimics:
        return f"mimics {target!r}, which is itself a mimic joint (chained mimics are not supported)"
    return None


def _check_links(links: list[str], joints, where: str) -> str:
    """The joints form one tree over `links`: every link named exists, one parent each, no cycle, one root."""
    if len(set(links)) != len(links):
        dup = sorted({n for n in links if links.count(n) > 1})
        raise DataError(f"{where}duplicate <link> names ({', '.join(map(repr, dup))})")
    known, children = set(links), {}
    for jt in joints:
        for role, ln in (("parent", jt.parent), ("child", jt.child)):
            if ln not in known:
                raise DataError(f"{where}joint {jt.name!r}: {role} link {ln!r} does not exist")
        if jt.child in children:
            raise DataError(
                f"{where}link {jt.child!r} is the child of two joints ({children[jt.child]!r}, {jt.name!r})"
            )
        children[jt.child] = jt.name
    parent_of = {jt.child: jt.parent for jt in joints}
    for start in parent_of:
        seen, n = set(), start
        while n in parent_of:
            if n in seen:
                raise DataError(f"{where}the joints form a cycle through link {n!r}")
            seen.add(n)
            n = parent_of[n]
    roots = [n for n in links if n not in parent_of]
    if len(roots) != 1:
        raise DataError(f"{where}a kinematic tree needs exactly one root link, found {sorted(roots)}")
    return roots[0]


def check_structure(links: list[str], joints, source: str = "", require_motion: bool = False) -> str:
    """The one check of a joint structure (URDF import and every RobotModel): names, types, axes, mimics and the
    tree; DataError naming `source` and the element. `joints` need name, parent, child, type, axis and mimic
    (with .joint). Returns the root link."""
    where = f"{source}: " if source else ""
    names = [jt.name for jt in joints]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DataError(f"{where}duplicate joint names ({', '.join(map(repr, dup))})")
    for jt in joints:
        if jt.type not in JOINT_TYPES:
            raise DataError(
                f"{where}joint {jt.name!r}: type {jt.type!r} is not supported ({', '.join(JOINT_TYPES)})"
            )
        axis = (1.0, 0.0, 0.0) if jt.axis is None else jt.axis  # URDF's default axis
        if jt.type != "fixed" and not np.linalg.norm(np.asarray(axis, dtype=float)) > 0:
            raise DataError(f"{where}joint {jt.name!r}: <axis> is zero")
    types = {jt.name: jt.type for jt in joints}
    mimics = {jt.name for jt in joints if jt.mimic is not None}
    for jt in joints:
        if jt.mimic is not None and (why := _mimic_problem(jt, types, mimics)):
            raise DataError(f"{where}joint {jt.name!r} {why}")
    root = _check_links(links, joints, where)
    if require_motion and not any(jt.type != "fixed" and jt.mimic is None for jt in joints):
        raise DataError(f"{where}no moving joint (every joint is fixed or mimics another): nothing to move")
    return root


def rpy_matrix(rpy) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) · Ry(pitch) · Rx(roll)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


@dataclass(frozen=True)
class Site:
    """A frame fixed to a link (a sole, a sensor), with an optional contact rectangle in its x-y plane."""

    name: str
    link: str
    offset: tuple[LinForm, LinForm, LinForm]
    rect: tuple[float, float, float, float] | None = None  # xmin, xmax, ymin, ymax
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(eq=False)
class RobotModel:
    """A kinematic tree with limits, contact sites, named bases and parameter sets."""

    name: str
    links: list[Link]
    joints: list[Joint]
    sites: list[Site]
    lower: np.ndarray | None
    upper: np.ndarray | None
    params: dict[str, ParameterSet]
    bases: dict[str, str]  # base name -> site name whose frame is the world/base frame
    coupled_A: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    coupled_b: np.ndarray = field(default_factory=lambda: np.zeros(0))
    coupled_names: list[str] = field(default_factory=list)
    description: str = ""
    # Presentation conventions for base parameters (per base): group order and column signs.
    base_conventions: dict[str, dict] = field(default_factory=dict)
    # Standard parameters assumed zero in the simplified model: (link name, 'cx'|'cy'|'cz').
    simplified_zero: list[tuple[str, str]] = field(default_factory=list)
    # Standard dynamic parameters assumed zero in the simplified dynamic model (glob patterns, 'Ixy@hip_*').
    simplified_dynamic_zero: list[str] = field(default_factory=list)
    # How the robot stands for static CoP experiments (see `robots.stance_spec`), if it is legged.
    stance: object | None = None
    # Published base-parameter sets (name -> formula file, see robots.published_base), e.g. a thesis appendix.
    published_bases: dict[str, Path] = field(default_factory=dict)
    # Published CoM base-parameter estimates (name -> file, see robots.realise), e.g. a thesis's from real data.
    published_estimates: dict[str, Path] = field(default_factory=dict)
    # Robot-specific description sections other modules model (e.g. Doggy's flexible joints and sensors).
    extra: dict[str, dict] = field(default_factory=dict)
    source: str = ""  # the URDF file the model was loaded from, if any
    warnings: list[str] = field(default_factory=list)  # e.g. inertias that violate the triangle inequality

    def __post_init__(self) -> None:
        names = [lk.name for lk in self.links]
        self.root = check_structure(names, self.joints, self.source)
        self._link_index = {n: i for i, n in enumerate(names)}
        self._parent_joint = {jt.child: j for j, jt in enumerate(self.joints)}
        self._topo = self._topological_order()
        self.coordinates = [j for j, jt in enumerate(self.joints) if jt.is_coordinate]
        self._coord_of = {self.joints[j].name: k for k, j in enumerate(self.coordinates)}
        coord_joints = [self.joints[j] for j in self.coordinates]
        if self.lower is None:
            self.lower = np.array([jt.lower for jt in coord_joints], dtype=float)
        if self.upper is None:
            self.upper = np.array([jt.upper for jt in coord_joints], dtype=float)
        self.lower = np.asarray(self.lower, dtype=float)
        self.upper = np.asarray(self.upper, dtype=float)
        if self.lower.shape != (self.nq,) or self.upper.shape != (self.nq,):
            raise DataError("joint limit arrays must have one entry per joint")
        self.velocity_limit = np.array([jt.velocity for jt in coord_joints], dtype=float)
        self.effort_limit = np.array([jt.effort for jt in coord_joints], dtype=float)
        self.acceleration_limit = np.array([jt.acceleration for jt in coord_joints], dtype=float)
        self.coupled_A = np.asarray(self.coupled_A, dtype=float).reshape(-1, self.nq)
        self.coupled_b = np.asarray(self.coupled_b, dtype=float).reshape(-1)
        self.memo: dict = {}  # derived data (see robots.memo.per_model)

    def _topological_order(self) -> list[int]:
        done = {self.root}
        order: list[int] = []
        pending = list(range(len(self.joints)))
        while pending:
            ready = [j for j in pending if self.joints[j].parent in done]
            if not ready:
                raise DataError("joint graph has a cycle")
            for j in ready:
                order.append(j)
                done.add(self.joints[j].child)
                pending.remove(j)
        return order

    def coordinate_map(self, j: int) -> tuple[int, float, float] | None:
        """(coordinate index, multiplier, offset) giving joint j's position, or None for a fixed joint."""
        jt = self.joints[j]
        if not jt.moves:
            return None
        if jt.mimic is None:
            return self._coord_of[jt.name], 1.0, 0.0
        return self._coord_of[jt.mimic.joint], jt.mimic.multiplier, jt.mimic.offset

    def joint_index(self, name: str) -> int:
        """Index in `joints` of the joint called `name`."""
        for j, jt in enumerate(self.joints):
            if jt.name == name:
                return j
        raise DataError(f"model {self.name!r} has no joint {name!r}")

    @property
    def nq(self) -> int:
        """Number of coordinates (moving joints that are not mimics)."""
        return len(self.coordinates)

    def sampling_bounds(self, lower=None, upper=None) -> tuple[np.ndarray, np.ndarray]:
        """The joint range (or the given bounds) with ±π where it is unlimited: the one box random postures and
        solver bounds draw from (a continuous joint has no limit; uniform(−∞, ∞) has no meaning)."""
        lo = self.lower if lower is None else np.asarray(lower, dtype=float)
        hi = self.upper if upper is None else np.asarray(upper, dtype=float)
        return np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)

    @property
    def joint_names(self) -> list[str]:
        """Names of the coordinates, in q order."""
        return [self.joints[j].name for j in self.coordinates]

    def link_index(self, name: str) -> int:
        return self._link_index[name]

    def site(self, name: str) -> Site:
        """The site called `name`; a link name gives a site at the link frame."""
        for s in self.sites:
            if s.name == name:
                return s
        if name in self._link_index:
            return Site(name, name, ({}, {}, {}))
        raise DataError(f"model {self.name!r} has no site or link {name!r}")

    def base_site(self, base: str) -> Site:
        """The frame of a named base (e.g. 'right' → the right sole); a site or link name is its own base."""
        if base in self.bases:
            return self.site(self.bases[base])
        if base in self._link_index or any(s.name == base for s in self.sites):
            return self.site(base)
        raise DataError(f"model {self.name!r} has no base {base!r} (choose from {sorted(self.bases)})")

    def joint_path(self, link: str) -> list[int]:
        """Indices of the joints from the root down to `link`, root first."""
        path = []
        while link in self._parent_joint:
            j = self._parent_joint[link]
            path.append(j)
            link = self.joints[j].parent
        return path[::-1]

    def topo_joints(self) -> list[int]:
        """Joint indices ordered so that every parent frame is computed before its children."""
        return list(self._topo)

    def has_link(self, name: str) -> bool:
        return name in self._link_index

    def parameter_set(self, params: str | ParameterSet) -> ParameterSet:
        if isinstance(params, ParameterSet):
            return params
        if params not in self.params:
            raise DataError(f"unknown parameter set {params!r} (choose from {sorted(self.params)})")
        return self.params[params]

    def check_q(self, q: np.ndarray) -> np.ndarray:
        """Validate a (…, nq) array of joint angles in radians."""
        q = np.asarray(q, dtype=float)
        if q.shape[-1:] != (self.nq,):
            raise DataError(f"expected {self.nq} joint angles per posture, got shape {q.shape}")
        if not np.all(np.isfinite(q)):
            raise DataError("joint angles contain NaN or infinite values")
        return q

    def limit_violations(self, q: np.ndarray, tol: float = 1e-9) -> list[str]:
        """Human-readable list of one posture's joint-limit violations (coordinates and mimic joints' own ranges,
        through `robots.joint_limits`, the one such check) and coupled-limit violations."""
        from robots.joint_limits import joint_limits  # it builds on RobotModel

        q = self.check_q(q)
        out = joint_limits(self).violations(q, tol)
        for k in range(len(self.coupled_b)):
            val = float(self.coupled_A[k] @ q)
            if val > self.coupled_b[k] + tol:
                label = self.coupled_names[k] if k < len(self.coupled_names) else f"coupled limit {k}"
                out.append(f"{label}: {np.degrees(val):.2f} deg > {np.degrees(self.coupled_b[k]):.1f} deg")
        return out


def offset3(x: str | float, y: str | float, z: str | float) -> tuple[LinForm, LinForm, LinForm]:
    """Offset vector from three length expressions."""
    return (parse_length(x), parse_length(y), parse_length(z))


AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}
