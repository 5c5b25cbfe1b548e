"""Write identified inertial parameters back into a copy of the robot's own URDF, changing nothing else.

Only the attribute values inside the `<inertial>` elements of links whose parameters changed are replaced
(mass value, origin xyz, inertia ixx…izz), at their character offsets in the original text; every other byte
stays as it was (comments, formatting, meshes, other links). Conventions:

- CoMs: a `ParameterSet` stores each link's CoM in the description's convention (`Link.com_sign`); the URDF
  gets the CoM in the link frame (`com · com_sign`).
- Inertias are about the CoM in link-frame axes (as `robots.urdf` imports them). An `<inertial>` whose origin
  has rpy ≠ 0 keeps its rpy: the tensor is written in that rotated frame (Rᵀ·I·R), the input's convention.
- A link without `<inertial>` gets one (rpy 0) only if its new mass or inertia is non-zero.
- The importer keeps every massive link a body (fixed-joint bodies are not merged) and turns massless leaf
  links into sites, so each model link maps to exactly one `<link>`; sites and links outside a sub-model
  (e.g. the iCub arm's dropped legs) are left as they are.
- Numbers are written with `repr` (shortest text that reads back to the same double).
The result is re-imported and checked against the intended parameters (1e-12) before it is returned.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet
from robots.physical import Violation, inertia_matrix, six, violations
from robots.tree import RobotModel, rpy_matrix
from robots.urdf import URDF_SET, load_urdf
from robots.urdf_xml_spans import Element, parse_spans

_I_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
_SYM = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


@dataclass(frozen=True)
class Inertial:
    """Mass (kg), CoM in the link frame (m), inertia about the CoM in link-frame axes (kg·m², 6 entries)."""

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float]


@dataclass
class UrdfExport:
    """The new URDF text and what changed (edits are (start, end) spans of the original text)."""

    text: str
    changed: list[str]
    inserted: list[str]
    edits: list[tuple[int, int]]
    max_change: dict[str, float]
    violations: list[Violation] = field(default_factory=list)  # of written links (only with force)
    inherited: list[Violation] = field(default_factory=list)  # of links left as the input has them
    check_error: float = 0.0  # max |re-imported − intended| over all model links
    encoding: str = "utf-8"  # the input's (its XML declaration's): `data` encodes the text in it
    paths_rewritten: int = 0  # relative mesh `filename`s rewritten for the output's folder

    @property
    def data(self) -> bytes:
        """The new URDF as bytes in the input's encoding."""
        return self.text.encode(self.encoding)

    def to_dict(self) -> dict:
        return {
            "links_changed": self.changed,
            "inertials_inserted": self.inserted,
            "edits": len(self.edits),
            "max_change": self.max_change,
            "consistent": not self.violations,
            "violations": [{"link": v.link, "problem": v.what} for v in self.violations],
            "inherited_violations": [{"link": v.link, "problem": v.what} for v in self.inherited],
            "reimport_max_error": self.check_error,
            "mesh_paths_rewritten": self.paths_rewritten,
        }


def fmt(x: float) -> str:
    """Shortest round-tripping text of a float ('0.0', not '-0.0')."""
    x = float(x)
    return repr(x if x != 0 else 0.0)


def file_inertials(urdf_path: str | Path) -> dict[str, Inertial]:
    """The URDF's own inertials per body link, as the importer reads them."""
    ps = load_urdf(urdf_path).params[URDF_SET]
    return {n: Inertial(ps.mass[n], tuple(ps.com[n]), six(ps.inertia[n])) for n in ps.mass}  # type: ignore[arg-type]


def target_inertials(model: RobotModel, ps: ParameterSet, prior: dict[str, Inertial]) -> dict[str, Inertial]:
    """A parameter set's inertials in URDF conventions (link-frame CoM); missing inertias keep the file's."""
    out = {}
    for lk in model.links:
        com = tuple(float(c * s) for c, s in zip(ps.com[lk.name], lk.com_sign, strict=True))
        inertia = six(ps.inertia[lk.name]) if lk.name in ps.inertia else prior[lk.name].inertia
        mass = float(ps.mass[lk.name])
        if mass == 0 and not any(inertia):  # no body: its CoM means nothing (m·c = 0), keep the file's
            com = prior[lk.name].com
        out[lk.name] = Inertial(mass, com, inertia)  # type: ignore[arg-type]
    return out


SAME_TOL = 1e-12  # a value within this (relative to max(1, |value|)) of the file's is the file's: float noise


def same_value(a: float, b: float) -> bool:
    """`a` is `b` up to the float noise of the parameter conversions (the re-import check's tolerance)."""
    return abs(a - b) <= SAME_TOL * max(1.0, abs(b))


def same_inertial(a: Inertial, b: Inertial) -> bool:
    """Every mass, CoM and inertia entry of `a` is `b`'s up to float noise."""
    pairs = zip((a.mass, *a.com, *a.inertia), (b.mass, *b.com, *b.inertia), strict=True)
    return all(same_value(x, y) for x, y in pairs)


def _noise_free(target: dict[str, Inertial], prior: dict[str, Inertial]) -> dict[str, Inertial]:
    """The target with each link that only differs from the file by float noise set to the file's values."""
    return {n: prior[n] if same_inertial(t, prior[n]) else t for n, t in target.items()}


def changed_links(urdf_path: str | Path, model: RobotModel, ps: ParameterSet) -> list[str]:
    """The model links whose inertials in `ps` differ from the URDF's (what an export rewrites)."""
    prior = file_inertials(urdf_path)
    missing = [lk.name for lk in model.links if lk.name not in prior]
    if missing:
        raise DataError(f"{urdf_path}: has no body link(s) {', '.join(missing)} of robot {model.name!r}")
    target = target_inertials(model, ps, prior)
    return [lk.name for lk in model.links if not same_inertial(target[lk.name], prior[lk.name])]


def urdf_parameter_set(model: RobotModel, values: dict[str, Inertial], name: str) -> ParameterSet:
    """Inertials back in the model's stored conventions (the inverse of `target_inertials`)."""
    ps0 = model.parameter_set(next(iter(model.params)))
    return ParameterSet(
        name,
        {lk.name: values[lk.name].mass for lk in model.links},
        {lk.name: tuple(c * s for c, s in zip(values[lk.name].com, lk.com_sign, strict=True))
         for lk in model.links},
        dict(ps0.lengths),
        {lk.name: values[lk.name].inertia for lk in model.links},
    )  # fmt: skip


def _floats(text: str) -> list[float] | None:
    try:
        return [float(v) for v in text.split()]
    except ValueError:
        return None


def _same_floats(text: str, values: list[float]) -> bool:
    """An attribute's numbers are `values` up to float noise (it is then left as written)."""
    old = _floats(text)
    return old is not None and len(old) == len(values) and all(map(same_value, values, old))


class _Editor:
    """Collects replacements of original spans; `apply` builds the new text."""

    def __init__(self, text: str):
        self.text = text
        self.nl = "\r\n" if "\r\n" in text else "\n"
        self.edits: list[tuple[int, int, str]] = []

    def indent_at(self, pos: int) -> str:
        line = self.text.rfind("\n", 0, pos) + 1
        head = self.text[line:pos]
        return head[: len(head) - len(head.lstrip())]

    def set_attr(self, el: Element, key: str, value: str, same) -> None:
        """Replace attribute `key`'s value unless `same(old)`; add the attribute if missing."""
        a = el.attrs.get(key)
        if a is None:
            at = el.tag_end - (2 if el.self_closing else 1)
            while self.text[at - 1].isspace():
                at -= 1
            self.edits.append((at, at, f' {key}="{value}"'))
        elif not same(a.value):
            self.edits.append((a.start, a.end, value))

    def add_child(self, parent: Element, xml: str) -> None:
        """Insert a child element before the parent's end tag, on its own line when the parent spans lines."""
        end = parent.content_end
        line = self.text.rfind("\n", 0, end) + 1
        if self.text[line:end].strip() == "" and line > parent.tag_end:
            first = parent.children[0].start if parent.children else None
            ind = self.indent_at(first) if first is not None else self.indent_at(end) + "  "
            self.edits.append((line, line, f"{ind}{xml}{self.nl}"))
        else:
            self.edits.append((end, end, xml))

    def apply(self) -> str:
        out, pos = [], 0
        for s, e, new in sorted(self.edits, key=lambda t: (t[0], t[1])):
            if s < pos:
                raise DataError("overlapping URDF edits (malformed <inertial>?)")
            out += [self.text[pos:s], new]
            pos = e
        return "".join(out) + self.text[pos:]


def _new_inertial(ine: Inertial, ind: str, unit: str, nl: str) -> str:
    i = ine.inertia
    return nl.join([
        f"{ind}<inertial>",
        f'{ind}{unit}<origin xyz="{" ".join(fmt(c) for c in ine.com)}" rpy="0 0 0"/>',
        f'{ind}{unit}<mass value="{fmt(ine.mass)}"/>',
        f"{ind}{unit}<inertia " + " ".join(f'{k}="{fmt(v)}"' for k, v in zip(_I_KEYS, i, strict=True)) + "/>",
        f"{ind}</inertial>",
    ])  # fmt: skip


def _rewrite(ed: _Editor, ine_el: Element, new: Inertial) -> None:
    """Replace the values inside one existing, non-empty <inertial> element."""
    mass = ine_el.child("mass")
    if mass is None:
        ed.add_child(ine_el, f'<mass value="{fmt(new.mass)}"/>')
    else:
        ed.set_attr(mass, "value", fmt(new.mass), lambda old: _same_floats(old, [new.mass]))
    origin = ine_el.child("origin")
    R = np.eye(3)
    xyz = " ".join(fmt(c) for c in new.com)
    if origin is None:
        if any(new.com):
            ed.add_child(ine_el, f'<origin xyz="{xyz}" rpy="0 0 0"/>')
    else:
        if "rpy" in origin.attrs:
            rpy = _floats(origin.attrs["rpy"].value)
            if rpy is None or len(rpy) != 3:
                raise DataError(f"inertial origin rpy {origin.attrs['rpy'].value!r} is not 3 numbers")
            R = rpy_matrix(rpy)
        ed.set_attr(origin, "xyz", xyz, lambda old: _same_floats(old, list(new.com)))
    I_in = R.T @ inertia_matrix(new.inertia) @ R if not np.array_equal(R, np.eye(3)) else None
    vals = [float(I_in[r, c]) for r, c in _SYM] if I_in is not None else list(new.inertia)
    inertia = ine_el.child("inertia")
    if inertia is None:
        attrs = " ".join(f'{k}="{fmt(v)}"' for k, v in zip(_I_KEYS, vals, strict=True))
        ed.add_child(ine_el, f"<inertia {attrs}/>")
        return
    for k, v in zip(_I_KEYS, vals, strict=True):
        ed.set_attr(inertia, k, fmt(v), lambda old, v=v: _same_floats(old, [v]))


def _links(root: Element, source: str) -> dict[str, Element]:
    if root.name != "robot":
        raise DataError(f"{source}: the root element is <{root.name}>, not <robot>")
    out = {}
    for el in root.children:
        if el.name == "link" and "name" in el.attrs:
            out[el.attrs["name"].value] = el
    return out


def _max_change(old: dict[str, Inertial], new: dict[str, Inertial], links: list[str]) -> dict[str, float]:
    dm = [abs(new[n].mass - old[n].mass) for n in links]
    dc = [float(np.linalg.norm(np.subtract(new[n].com, old[n].com))) for n in links]
    dI = [float(np.max(np.abs(np.subtract(new[n].inertia, old[n].inertia)))) for n in links]
    return {
        "mass_kg": max(dm, default=0.0),
        "com_m": max(dc, default=0.0),
        "inertia_kgm2": max(dI, default=0.0),
    }


def read_inertials(path: str | Path) -> dict[str, Inertial]:
    """Every <inertial> as the importer reads it, without its consistency checks (a forced export may hold a
    negative mass, which `load_urdf` refuses)."""
    from robots.urdf import _inertial, _parse  # noqa: PLC0415 (the importer's own reading, not its checks)

    out = {}
    for lk in _parse(path).robot.links:
        ine = _inertial(lk)
        if ine is not None:
            out[lk.name] = Inertial(ine.mass, ine.com, six(ine.inertia))
    return out


def _reimport_error(text: str, urdf_path: Path, want: dict[str, Inertial], encoding: str = "utf-8") -> float:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / urdf_path.name
        p.write_text(text, encoding=encoding)
        got = read_inertials(p)
    err = 0.0
    for n, w in want.items():
        g = got.get(n, Inertial(0.0, (0.0,) * 3, (0.0,) * 6))  # type: ignore[arg-type]
        a = np.array([w.mass, *w.com, *w.inertia])
        b = np.array([g.mass, *g.com, *g.inertia])
        err = max(err, float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a)))))
    return err


def export_urdf(
    urdf_path: str | Path,
    model: RobotModel,
    ps: ParameterSet,
    force: bool = False,
    rewrite_all: bool = False,
    out: str | Path | None = None,
) -> UrdfExport:
    """A copy of the URDF `model` was loaded from with `ps`'s inertials; DataError for an inconsistent set
    (naming each link and what is violated) unless `force`. `rewrite_all` rewrites every model link's
    inertial even when unchanged (a test of the writer). With `out`, the file the copy goes to, relative mesh
    paths are rewritten to name the same files from there."""
    urdf_path = Path(urdf_path)
    source = str(urdf_path)
    text, encoding = read_urdf_text(urdf_path)
    prior = file_inertials(urdf_path)
    names = [lk.name for lk in model.links]
    missing = [n for n in names if n not in prior]
    if missing:
        raise DataError(f"{source}: has no body link(s) {', '.join(missing)} of robot {model.name!r}")
    target = _noise_free(target_inertials(model, ps, prior), prior)
    # Only what this export writes is checked; a link left as it was keeps the input's (possibly
    # inconsistent) values, reported as `inherited`.
    todo = [n for n in names if target[n] != prior[n] or rewrite_all]
    masses = {n: prior[n].mass for n in names}
    target_ps = urdf_parameter_set(model, target, ps.name)
    bad = violations(target_ps, todo, masses)
    inherited = violations(target_ps, [n for n in names if n not in todo], masses)
    if bad and not force:
        raise DataError(
            "physically inconsistent parameters: " + "; ".join(str(v) for v in bad)
            + " (--nearest writes the nearest consistent set; --inconsistent writes them anyway)"
        )  # fmt: skip
    root = parse_spans(text, source)
    links = _links(root, source)
    ed = _Editor(text)
    changed, inserted = [], []
    for n in todo:
        new = target[n]
        el = links.get(n)
        if el is None:
            raise DataError(f"{source}: cannot locate <link name={n!r}> in the text")
        ine_el = el.child("inertial")
        if ine_el is not None and not ine_el.self_closing:
            _rewrite(ed, ine_el, new)
        elif new.mass > 0 or any(new.inertia):
            ind = ed.indent_at(el.start)
            unit = "  "
            if ine_el is not None:  # <inertial/>: replace it by a full one
                block = _new_inertial(new, "", unit, ed.nl).replace(ed.nl, ed.nl + ed.indent_at(ine_el.start))
                ed.edits.append((ine_el.start, ine_el.end, block))
            elif el.self_closing:
                head = text[el.start : el.tag_end - 2].rstrip()
                body = _new_inertial(new, ind + unit, unit, ed.nl)
                ed.edits.append((el.start, el.tag_end, f"{head}>{ed.nl}{body}{ed.nl}{ind}</link>"))
            else:
                first = el.children[0].start if el.children else None
                cind = ed.indent_at(first) if first is not None else ind + unit
                ed.edits.append((el.tag_end, el.tag_end, ed.nl + _new_inertial(new, cind, unit, ed.nl)))
            inserted.append(n)
        else:
            continue
        changed.append(n)
    inertial_edits = [(s, e) for s, e, _ in sorted(ed.edits)]
    moved = _relocate_paths(ed, root, urdf_path, Path(out)) if out is not None else 0
    new_text = ed.apply()
    err = _reimport_error(new_text, urdf_path, target, encoding) if inertial_edits else 0.0
    if err > 1e-12:
        raise DataError(f"{source}: export check failed: re-imported parameters differ by {err:.3g}")
    return UrdfExport(
        new_text, changed, inserted, inertial_edits, _max_change(prior, target, names), bad, inherited, err,
        encoding, moved,
    )  # fmt: skip


def read_urdf_text(path: Path) -> tuple[str, str]:
    """A URDF's text and encoding: the one its XML declaration names (UTF-8 without one)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    m = re.match(rb"""^(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""", data)
    encoding = m.group(1).decode("ascii") if m else "utf-8"
    try:
        return data.decode(encoding), encoding
    except (LookupError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not text in its declared encoding {encoding} ({exc})") from None


def _relocate_paths(ed: _Editor, root: Element, urdf_path: Path, out: Path) -> int:
    """Rewrite relative `filename` attributes of meshes and textures so they name the same files from the
    output's folder; `package://`, `file://` and absolute paths stay. Returns how many were rewritten."""
    src, dst = urdf_path.resolve().parent, out.resolve().parent
    if src == dst:
        return 0
    n = 0
    stack = [root]
    while stack:
        el = stack.pop()
        stack += el.children
        a = (
            el.attrs.get("filename") if el.name in ("mesh", "texture") else None
        )  # not <plugin filename=lib.so>
        if a is None or "://" in a.value or "&" in a.value or os.path.isabs(a.value) or not a.value:
            continue
        moved = Path(os.path.relpath(src / a.value, dst)).as_posix()
        if moved != a.value:  # e.g. a folder and its sibling of the same name: the text stays
            ed.edits.append((a.start, a.end, moved))
            n += 1
    return n
