"""Robot descriptions: a URDF plus a small TOML file for what a URDF cannot say.

The TOML ("poise robot description") names the URDF and adds: link labels and stored CoM sign conventions,
named lengths (joint-origin components that base-parameter formulas should show by name), sites (soles with
contact rectangles, sensor frames), named bases, coupled joint limits, the simplified CoM model, presentation
conventions of base parameters, extra parameter sets, a sub-model (root link, locked joints) and, for legged
robots, the stance used by static design. Every built-in robot is such a description; so is any lab's robot.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet, parameter_set_from_json
from robots.params_io import keep_lengths
from robots.tree import Joint, Link, RobotModel, Site, parse_length, rpy_matrix
from robots.urdf import PLACEHOLDER_LIMIT, URDF_SET, load_urdf, matrix_rpy

FORMAT = "poise robot description"
SUFFIX = ".poise.toml"
_AXES = {"x": 0, "y": 1, "z": 2}
# Sections kept verbatim on the model for the modules that interpret them (Doggy: robots/doggy.py).
EXTRA_SECTIONS = ("flexible_joints", "sensors", "experiment")


def _fail(source: str, msg: str) -> DataError:
    return DataError(f"{source}: {msg}")


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text (UTF-8) file") from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: not valid TOML ({exc})") from None


def _named_lengths(model: RobotModel, spec: dict, source: str) -> tuple[list, dict[str, float]]:
    """Replace joint-origin components named in [lengths] by symbols; return new joints and length values."""
    joints = list(model.joints)
    values: dict[str, float] = {}
    for name, ref in spec.items():
        if isinstance(ref, int | float) and not isinstance(ref, bool):
            values[name] = float(ref)
            continue
        if not isinstance(ref, str) or "." not in ref:
            raise _fail(source, f"lengths.{name}: expected 'JOINT.x|y|z' (optionally '-JOINT.z') or a number")
        sign = -1.0 if ref.startswith("-") else 1.0
        jname, _, comp = ref.lstrip("+-").rpartition(".")
        if comp not in _AXES:
            raise _fail(source, f"lengths.{name}: component {comp!r} is not x, y or z")
        j = model.joint_index(jname)
        k = _AXES[comp]
        form = joints[j].offset[k]
        if set(form) - {""}:
            raise _fail(source, f"lengths.{name}: {ref} is already named")
        values[name] = sign * form.get("", 0.0)
        offset = list(joints[j].offset)
        offset[k] = {name: sign}
        joints[j] = replace(joints[j], offset=tuple(offset))
    return joints, values


_LIMIT_KEYS = ("lower", "upper", "velocity", "effort", "acceleration")
# rad/s (m/s) or N·m (N): a URDF velocity or effort limit this large is a placeholder (e.g. iCub's 50000), no joint's
PLACEHOLDER_KINDS = ("velocity", "effort")


def placeholder_limits(model: RobotModel) -> dict[str, dict[str, float]]:
    """The velocity and effort limits that are the URDF's placeholders, not the joint's ({kind: {joint: value}}):
    those the description declares so (`placeholder_limits = ["velocity", "effort"]`) or that are implausibly large
    (≥ PLACEHOLDER_LIMIT), unless its [joint_limits] set them. A check against them checks nothing."""
    if "placeholder_limits" in model.extra:
        return model.extra["placeholder_limits"]
    return _placeholders(model.joints, (), set())


def _placeholders(joints: list, declared, overridden: set[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """`placeholder_limits` of `joints`: the `declared` kinds and the implausibly large values, but for the
    (joint, kind) pairs [joint_limits] set (`overridden`)."""
    out: dict[str, dict[str, float]] = {}
    for kind in PLACEHOLDER_KINDS:
        found = {jt.name: float(getattr(jt, kind)) for jt in joints if jt.type != "fixed"
                 and (jt.name, kind) not in overridden and math.isfinite(getattr(jt, kind))
                 and (kind in declared or getattr(jt, kind) >= PLACEHOLDER_LIMIT)}  # fmt: skip
        if found:
            out[kind] = found
    return out


def _declared_placeholders(doc: dict, source: str) -> tuple[str, ...]:
    """The description's `placeholder_limits`: which of the URDF's limits (velocity, effort) are placeholders."""
    kinds = doc.get("placeholder_limits", [])
    if not isinstance(kinds, list) or not set(kinds) <= set(PLACEHOLDER_KINDS):
        raise _fail(
            source, f"placeholder_limits must be a list among {', '.join(PLACEHOLDER_KINDS)}, got {kinds!r}"
        )
    return tuple(kinds)


def _joint_limits(joints: list, spec: dict, source: str) -> list:
    """Override or add joint limits: [joint_limits.NAME] lower, upper (rad or m), velocity, effort, acceleration.

    URDFs often carry placeholder limits (e.g. 50000) and never acceleration limits; the description fixes that.
    """
    names = [jt.name for jt in joints]
    out = list(joints)
    for name, lim in spec.items():
        if name not in names:
            raise _fail(source, f"[joint_limits] names unknown joint {name!r}")
        if not isinstance(lim, dict) or set(lim) - set(_LIMIT_KEYS):
            raise _fail(source, f"[joint_limits.{name}]: keys must be among {', '.join(_LIMIT_KEYS)}")
        vals = {}
        for k, v in lim.items():
            if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                raise _fail(source, f"[joint_limits.{name}] {k} must be a finite number")
            if k in ("velocity", "effort", "acceleration") and v <= 0:
                raise _fail(source, f"[joint_limits.{name}] {k} must be positive")
            vals[k] = float(v)
        i = names.index(name)
        out[i] = replace(out[i], **vals)
        if out[i].lower > out[i].upper:
            raise _fail(source, f"[joint_limits.{name}]: lower > upper")
    return out


def _site(entry: dict, source: str) -> Site:
    try:
        xyz = tuple(parse_length(v) for v in entry.get("xyz", (0, 0, 0)))
        rect = entry.get("rect")
        return Site(
            str(entry["name"]),
            str(entry["link"]),
            xyz,  # type: ignore[arg-type]
            tuple(float(v) for v in rect) if rect is not None else None,  # type: ignore[arg-type]
            tuple(float(v) for v in entry.get("rpy", (0, 0, 0))),  # type: ignore[arg-type]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(source, f"malformed [[sites]] entry {entry!r} ({exc})") from None


def _coupled(model: RobotModel, entries: list, source: str):
    names = model.joint_names
    A = np.zeros((len(entries), len(names)))
    b = np.zeros(len(entries))
    labels = []
    for r, e in enumerate(entries):
        try:
            for jn, c in e["coefficients"].items():
                if jn not in names:
                    raise _fail(source, f"coupled limit {e.get('label', r)!r}: unknown joint {jn!r}")
                A[r, names.index(jn)] = float(c)
            b[r] = math.radians(float(e["upper_deg"])) if "upper_deg" in e else float(e["upper"])
            labels.append(str(e.get("label", f"coupled limit {r}")))
        except (KeyError, TypeError, ValueError) as exc:
            raise _fail(source, f"malformed [[coupled_limits]] entry ({exc})") from None
    return A, b, labels


def _locked(jt: Joint, val: float) -> Joint:
    """`jt` turned fixed at coordinate `val` (rad or m): its motion folded into the origin."""
    axis = np.asarray(jt.axis, dtype=float) / np.linalg.norm(jt.axis)
    if jt.type == "prismatic":
        shift = rpy_matrix(jt.rpy) @ axis * val
        offset = tuple(
            {k: c for k, c in ({**f, "": f.get("", 0.0) + d}).items() if c != 0.0}
            for f, d in zip(jt.offset, shift, strict=True)
        )
        return replace(jt, type="fixed", offset=offset, mimic=None)
    kx = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    Rq = np.eye(3) + np.sin(val) * kx + (1 - np.cos(val)) * kx @ kx
    return replace(jt, type="fixed", rpy=matrix_rpy(rpy_matrix(jt.rpy) @ Rq), mimic=None)


def _reduce(model: RobotModel, spec: dict, source: str) -> RobotModel:
    """A sub-model: the sub-tree below `root` without the sub-trees of `drop` joints, `lock` joints fixed."""
    root = spec.get("root")
    lock = {str(k): float(v) for k, v in spec.get("lock", {}).items()}
    joints = list(model.joints)
    dropped = set()
    for jn in spec.get("drop", []):
        dropped.add(joints[model.joint_index(str(jn))].child)
    for jt in joints:  # a joint that mimics a locked one is locked where the mimic puts it
        if jt.mimic is not None and jt.mimic.joint in lock and jt.name not in lock:
            lock[jt.name] = jt.mimic.multiplier * lock[jt.mimic.joint] + jt.mimic.offset
    for jn, val in lock.items():
        j = model.joint_index(jn)
        jt = joints[j]
        if jt.type == "fixed":
            raise _fail(source, f"reduce.lock: joint {jn!r} is fixed already")
        if not jt.lower - 1e-12 <= val <= jt.upper + 1e-12:
            raise _fail(
                source, f"reduce.lock: {jn} = {val:g} is outside its limits [{jt.lower:g}, {jt.upper:g}]"
            )
        joints[j] = _locked(jt, val)
    keep = None
    if root is not None or dropped:
        root = root if root is not None else model.root
        if not model.has_link(root):
            raise _fail(source, f"reduce.root: no link {root!r}")
        keep, stack = set(), [root]
        while stack:
            n = stack.pop()
            keep.add(n)
            stack += [jt.child for jt in joints if jt.parent == n and jt.child not in dropped]
    links = [lk for lk in model.links if keep is None or lk.name in keep]
    joints = [jt for jt in joints if keep is None or (jt.parent in keep and jt.child in keep)]
    sites = [s for s in model.sites if keep is None or s.link in keep]
    names = [lk.name for lk in links]
    params = {
        k: ParameterSet(
            p.name,
            {n: p.mass[n] for n in names},
            {n: p.com[n] for n in names},
            dict(p.lengths),
            {n: p.inertia[n] for n in names if n in p.inertia},
            p.description,
        )
        for k, p in model.params.items()
    }
    return RobotModel(
        model.name, links, joints, sites, None, None, params, {}, description=model.description,
        source=model.source, warnings=[w for w in model.warnings if any(f"'{n}'" in w for n in names)],
    )  # fmt: skip


def _published(spec: dict, path: Path, what: str = "published base") -> dict[str, Path]:
    """[published_bases] / [published_estimates] NAME = FILE (relative to the description): a publication's
    base-parameter formulas, or its estimates of the CoM base parameters (robots/realise.py)."""
    out = {}
    for name, ref in spec.items():
        file = Path(str(ref)) if Path(str(ref)).is_absolute() else path.parent / str(ref)
        if not file.is_file():
            raise _fail(str(path), f"{what} {name!r}: no such file {file}")
        out[str(name)] = file
    return out


def _overridden(doc: dict) -> set[tuple[str, str]]:
    """The (joint, limit) pairs the description's [joint_limits] set (checked when applied)."""
    spec = doc.get("joint_limits", {})
    if not isinstance(spec, dict):
        return set()
    return {(str(j), str(k)) for j, lim in spec.items() if isinstance(lim, dict) for k in lim}


def load_description(path: str | Path) -> RobotModel:
    """A `RobotModel` from a poise robot description (TOML) and the URDF it names."""
    path = Path(path)
    source = str(path)
    doc = _read_toml(path)
    if doc.get("format") != FORMAT:
        raise _fail(source, f"not a {FORMAT!r} file (format = {doc.get('format')!r})")
    if "urdf" not in doc:
        raise _fail(source, "missing 'urdf' (path of the robot's URDF, relative to this file)")
    urdf_path = _urdf_path(str(doc["urdf"]), path)
    name = str(doc.get("name", path.name.removesuffix(SUFFIX)))
    model = load_urdf(urdf_path, name=name, overridden=frozenset(_overridden(doc)))
    return apply_description(model, doc, path)


def _urdf_path(ref: str, desc_path: Path) -> Path:
    if ref.startswith(
        "icub-models:"
    ):  # a model shipped by the icub-models package, e.g. icub-models:iCubGenova04
        try:
            import icub_models
        except ImportError:
            raise DataError(f"{desc_path}: needs the 'icub-models' package for {ref!r}") from None
        return Path(icub_models.get_model_file(ref.split(":", 1)[1]))
    p = Path(ref)
    return p if p.is_absolute() else desc_path.parent / p


def apply_description(model: RobotModel, doc: dict, path: Path) -> RobotModel:
    """Add a description's extras to a URDF-loaded model."""
    source = str(path)
    if "reduce" in doc:
        model = _reduce(model, doc["reduce"], source)
    joints, lengths = _named_lengths(model, doc.get("lengths", {}), source)
    joints = _joint_limits(joints, doc.get("joint_limits", {}), source)
    overridden = _overridden(doc)
    placeholders = _placeholders(joints, _declared_placeholders(doc, source), overridden)
    link_spec = doc.get("links", {})
    unknown = set(link_spec) - {lk.name for lk in model.links}
    if unknown:
        raise _fail(source, f"[links] names unknown link(s) {sorted(unknown)}")
    links = []
    for lk in model.links:
        spec = link_spec.get(lk.name, {})
        sign = tuple(int(v) for v in spec.get("com_sign", (1, 1, 1)))
        links.append(Link(lk.name, str(spec.get("label", lk.label)), sign))  # type: ignore[arg-type]
    sites = list(model.sites) + [_site(e, source) for e in doc.get("sites", [])]
    set_name = str(doc.get("urdf_set", URDF_SET))
    urdf_ps = model.params[URDF_SET]
    signs = {lk.name: np.asarray(lk.com_sign, dtype=float) for lk in links}
    main = ParameterSet(
        set_name,
        dict(urdf_ps.mass),
        {n: tuple(float(v) for v in np.asarray(c) * signs[n]) for n, c in urdf_ps.com.items()},
        lengths,
        dict(urdf_ps.inertia),
        str(doc.get("urdf_set_description", urdf_ps.description)),
    )
    params = {set_name: main}
    names = [lk.name for lk in links]
    for key, ref in doc.get("parameter_sets", {}).items():
        file = Path(ref) if Path(ref).is_absolute() else path.parent / ref
        try:
            d = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _fail(source, f"parameter set {key!r}: cannot read {file} ({exc})") from None
        ps = parameter_set_from_json(d, names, str(file))
        params[str(key)] = keep_lengths(ps, lengths)
    stub = RobotModel(model.name, links, joints, sites, None, None, params, {})
    A, b, labels = _coupled(stub, doc.get("coupled_limits", []), source)
    simplified = [tuple(x) for x in doc.get("simplified", {}).get("zero", [])]
    bases = {str(k): str(v) for k, v in doc.get("bases", {}).items()}
    out = RobotModel(
        name=model.name,
        links=links,
        joints=joints,
        sites=sites,
        lower=None,
        upper=None,
        params=params,
        bases=bases,
        coupled_A=A,
        coupled_b=b,
        coupled_names=labels,
        description=str(doc.get("description", model.description)),
        base_conventions=doc.get("base_conventions", {}),
        simplified_zero=simplified,  # type: ignore[arg-type]
        simplified_dynamic_zero=[str(x) for x in doc.get("simplified", {}).get("dynamic_zero", [])],
        stance=doc.get("stance"),
        published_bases=_published(doc.get("published_bases", {}), path),
        published_estimates=_published(doc.get("published_estimates", {}), path, "published estimates"),
        extra={k: doc[k] for k in EXTRA_SECTIONS if k in doc} | {"placeholder_limits": placeholders},
        source=model.source,
        warnings=model.warnings,
    )
    for site_name in bases.values():
        out.site(site_name)
    return out
