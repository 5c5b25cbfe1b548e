"""Kinematic-tree robot description: links, joints, sites, limits, parameter sets.

One description serves numeric (numpy) and symbolic (CasADi) kinematics and the symbolic
grouping of base parameters, so link offsets are kept as linear forms in named lengths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Joint:
    """A revolute joint: child frame = parent frame translated by `offset`, then rotated about `axis` by q."""

    name: str
    parent: str
    child: str
    axis: tuple[float, float, float]
    offset: tuple[LinForm, LinForm, LinForm]


@dataclass(frozen=True)
class Site:
    """A frame fixed to a link (e.g. a sole), with an optional contact rectangle in its x-y plane."""

    name: str
    link: str
    offset: tuple[LinForm, LinForm, LinForm]
    rect: tuple[float, float, float, float] | None = None  # xmin, xmax, ymin, ymax


@dataclass(eq=False)
class RobotModel:
    """A kinematic tree with limits, contact sites, named bases and parameter sets."""

    name: str
    links: list[Link]
    joints: list[Joint]
    sites: list[Site]
    lower: np.ndarray
    upper: np.ndarray
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

    def __post_init__(self) -> None:
        names = [lk.name for lk in self.links]
        if len(set(names)) != len(names):
            raise DataError("duplicate link names")
        self._link_index = {n: i for i, n in enumerate(names)}
        self._parent_joint = {}
        for j, joint in enumerate(self.joints):
            if joint.child in self._parent_joint:
                raise DataError(f"link {joint.child!r} has two parent joints")
            for ln in (joint.parent, joint.child):
                if ln not in self._link_index:
                    raise DataError(f"joint {joint.name!r} refers to unknown link {ln!r}")
            self._parent_joint[joint.child] = j
        roots = [n for n in names if n not in self._parent_joint]
        if len(roots) != 1:
            raise DataError(f"a kinematic tree needs exactly one root link, found {roots}")
        self.root = roots[0]
        self.lower = np.asarray(self.lower, dtype=float)
        self.upper = np.asarray(self.upper, dtype=float)
        if self.lower.shape != (self.nq,) or self.upper.shape != (self.nq,):
            raise DataError("joint limit arrays must have one entry per joint")
        self.coupled_A = np.asarray(self.coupled_A, dtype=float).reshape(-1, self.nq)
        self.coupled_b = np.asarray(self.coupled_b, dtype=float).reshape(-1)

    @property
    def nq(self) -> int:
        return len(self.joints)

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    def link_index(self, name: str) -> int:
        return self._link_index[name]

    def site(self, name: str) -> Site:
        for s in self.sites:
            if s.name == name:
                return s
        raise DataError(f"model {self.name!r} has no site {name!r}")

    def base_site(self, base: str) -> Site:
        if base not in self.bases:
            raise DataError(f"model {self.name!r} has no base {base!r} (choose from {sorted(self.bases)})")
        return self.site(self.bases[base])

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
        done = {self.root}
        order: list[int] = []
        pending = list(range(self.nq))
        while pending:
            progressed = False
            for j in list(pending):
                if self.joints[j].parent in done:
                    order.append(j)
                    done.add(self.joints[j].child)
                    pending.remove(j)
                    progressed = True
            if not progressed:
                raise DataError("joint graph has a cycle")
        return order

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
        """Human-readable list of joint-limit and coupled-limit violations of one posture."""
        q = self.check_q(q)
        out = []
        for i, name in enumerate(self.joint_names):
            if q[i] < self.lower[i] - tol or q[i] > self.upper[i] + tol:
                out.append(
                    f"{name} = {np.degrees(q[i]):.2f} deg outside "
                    f"[{np.degrees(self.lower[i]):.1f}, {np.degrees(self.upper[i]):.1f}] deg"
                )
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
