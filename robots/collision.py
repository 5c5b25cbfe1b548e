"""Self-collision geometry: per link, a set of spheres that contains the URDF's collision surface (meshes or
primitives); the link pairs worth checking; link-to-link clearances, exact and smooth (with Jacobian).

Sphere sets are found by clustering points sampled on the collision surface until every sphere is small
(SPHERE_RADIUS); each sphere is grown to contain its cluster and the mesh vertices nearest to it, so a positive
sphere clearance means the surfaces are apart. The clearance of two links is the smallest sphere-to-sphere
distance; its smooth form is a soft minimum, which never exceeds the true one, so constraints on it are
conservative (by at most log(count)/SOFTMIN_SHARPNESS).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import casadi as ca
import numpy as np

from formats.errors import DataError
from robots.interrupt import held
from robots.kinematics import link_frames, link_frames_sym
from robots.memo import per_model
from robots.tree import RobotModel

SPHERE_RADIUS = 0.03  # m: target radius of the spheres that cover a link
MAX_SPHERES = 32  # per link
SURFACE_SAMPLES = 3000  # points sampled on a link's collision surface
SOFTMIN_SHARPNESS = 2000.0  # 1/m
CHUNK = 2000  # postures whose sphere centres `clearance` holds at once


@dataclass(frozen=True)
class SphereSet:
    """Spheres (centres (k, 3) m in the link frame, radii (k,) m) that together contain a link's collision surface."""

    link: str
    centres: tuple[tuple[float, float, float], ...]
    radii: tuple[float, ...]


@dataclass(frozen=True)
class CollisionPairs:
    """The links' sphere sets and which of them are checked against each other (index pairs into `sets`)."""

    sets: tuple[SphereSet, ...]
    pairs: tuple[tuple[int, int], ...]

    def names(self) -> list[str]:
        return [f"{self.sets[i].link}–{self.sets[j].link}" for i, j in self.pairs]


def fit_spheres(
    link: str, surface: np.ndarray, vertices: np.ndarray, target: float = SPHERE_RADIUS
) -> SphereSet:
    """Cluster surface points into spheres of radius about `target` (more spheres until they are that small or
    MAX_SPHERES is reached); every surface point and vertex lies inside some sphere."""
    from scipy.cluster.vq import kmeans2

    pts = np.vstack([surface, vertices])
    k = 1
    while True:
        if k == 1:
            centres = pts.mean(axis=0, keepdims=True)
        else:
            centres, _ = kmeans2(surface, k, minit="++", seed=np.random.default_rng(0))
        d = np.linalg.norm(pts[:, None, :] - centres[None], axis=2)
        owner = d.argmin(axis=1)
        radii = np.array([d[owner == c, c].max() if np.any(owner == c) else 0.0 for c in range(len(centres))])
        if radii.max() <= target or k >= MAX_SPHERES:
            break
        k = min(2 * k, MAX_SPHERES)
    used = radii > 0
    return SphereSet(link, tuple(map(tuple, centres[used].tolist())), tuple(radii[used].tolist()))


# what a user without the collision meshes can do: the links' clearance is the only thing that needs them
NO_MESHES = "; self-collision checks need the collision meshes (`plan trajectory --no-self-collision` designs without)"


class GeometryUnavailable(DataError):
    """The description's collision geometry cannot be loaded (a mesh file missing or unreadable): `reason` says
    which file and why; the message adds what a design can do without it (NO_MESHES)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason + NO_MESHES)
        self.reason = reason


def _geometry_mesh(geom, origin: np.ndarray, urdf_path: Path):
    """One URDF collision geometry as a trimesh in its link frame (None for an empty geometry); a mesh that
    cannot be found or read is `GeometryUnavailable`."""
    with held():  # trimesh swallows Ctrl-C around its own imports
        import trimesh

    if geom.mesh is not None:
        from robots.urdf import resolve_package_uri

        try:
            path = resolve_package_uri(geom.mesh.filename, urdf_path)
        except DataError as exc:
            raise GeometryUnavailable(str(exc)) from None
        try:
            mesh = trimesh.load(str(path), force="mesh")
        except Exception as exc:  # trimesh raises many kinds on unreadable files
            raise GeometryUnavailable(f"{urdf_path}: collision mesh {path} cannot be read ({exc})") from None
        if geom.mesh.scale is not None:
            mesh.apply_scale(np.broadcast_to(np.asarray(geom.mesh.scale, dtype=float), (3,)))
    elif geom.box is not None:
        mesh = trimesh.creation.box(extents=geom.box.size)
    elif geom.cylinder is not None:
        mesh = trimesh.creation.cylinder(radius=geom.cylinder.radius, height=geom.cylinder.length)
    elif geom.sphere is not None:
        mesh = trimesh.creation.icosphere(subdivisions=2, radius=geom.sphere.radius)
    else:
        return None
    mesh.apply_transform(origin)
    return mesh


def link_spheres(model: RobotModel) -> tuple[SphereSet, ...]:
    """Sphere sets of the links of `model` that have collision elements in its source URDF (none without one);
    `GeometryUnavailable` when a collision mesh cannot be found or read (remembered: not looked for again)."""
    sets, reason = _loaded_spheres(model)
    if reason is not None:
        raise GeometryUnavailable(reason)
    return sets


def unavailable_geometry(model: RobotModel) -> str | None:
    """Why the collision geometry of `model`'s description cannot be loaded (the file, and what is wrong with
    it), or None when it loads (or there is none)."""
    return _loaded_spheres(model)[1]


@per_model
def _loaded_spheres(model: RobotModel) -> tuple[tuple[SphereSet, ...], str | None]:
    """(`link_spheres`' sets, None), or ((), why) when a collision mesh cannot be loaded."""
    try:
        return _link_spheres(model), None
    except GeometryUnavailable as exc:
        return (), exc.reason


def _link_spheres(model: RobotModel) -> tuple[SphereSet, ...]:
    if not model.source or not Path(model.source).exists():
        return ()
    with held():  # trimesh (yourdfpy imports it) swallows Ctrl-C around its own imports
        import trimesh
        import yourdfpy

    urdf_path = Path(model.source)
    robot = yourdfpy.URDF.load(str(urdf_path), load_meshes=False, build_scene_graph=False)
    kept = {lk.name for lk in model.links}
    out = []
    for lk in robot.robot.links:
        if lk.name not in kept or not lk.collisions:
            continue
        meshes = [
            m
            for col in lk.collisions
            if (
                m := _geometry_mesh(
                    col.geometry, np.eye(4) if col.origin is None else np.asarray(col.origin), urdf_path
                )
            )
            is not None
        ]
        if not meshes:
            continue
        mesh = trimesh.util.concatenate(meshes)
        surface, _ = trimesh.sample.sample_surface(mesh, SURFACE_SAMPLES, seed=0)
        out.append(fit_spheres(lk.name, np.asarray(surface), np.asarray(mesh.vertices)))
    return tuple(out)


def _moving_joints(model: RobotModel, link: str) -> frozenset[str]:
    """Names of the non-fixed joints between the root and `link`."""
    by_child = {j.child: j for j in model.joints}
    out: set[str] = set()
    while link in by_child:
        j = by_child[link]
        if j.type != "fixed":
            out.add(j.name)
        link = j.parent
    return frozenset(out)


def _adjacent(model: RobotModel, a: str, b: str) -> bool:
    """Links joined by one moving joint, possibly through fixed joints on either side (they touch by design)."""
    by_child = {j.child: j for j in model.joints}

    def body(link: str) -> str:
        """The topmost link of the rigid group `link` belongs to (walking up through fixed joints)."""
        while link in by_child and by_child[link].type == "fixed":
            link = by_child[link].parent
        return link

    ba, bb = body(a), body(b)
    ja, jb = by_child.get(ba), by_child.get(bb)
    return (ja is not None and body(ja.parent) == bb) or (jb is not None and body(jb.parent) == ba)


def _never_meet(model: RobotModel, a: str, b: str) -> str | None:
    """Why links `a` and `b` are never a pair to check, whatever the posture ("adjacent", "moving together"), or
    None."""
    if _adjacent(model, a, b):
        return "adjacent"
    if _moving_joints(model, a) == _moving_joints(model, b):
        return "moving together"
    return None


@per_model
def collision_pairs(model: RobotModel, params: str | None = None) -> CollisionPairs:
    """Link pairs checked for self-collision: not adjacent, moving relative to each other, and apart in the
    model's zero posture (pairs that touch there are parts that touch by construction)."""
    sets = link_spheres(model)
    if not sets:
        return CollisionPairs((), ())
    cand = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            if _never_meet(model, sets[i].link, sets[j].link) is None:
                cand.append((i, j))
    if not cand:
        return CollisionPairs(sets, ())
    q0 = np.clip(np.zeros(model.nq), model.lower, model.upper)
    d = clearance(model, CollisionPairs(sets, tuple(cand)), q0[None], params)[0]
    return CollisionPairs(sets, tuple(p for k, p in enumerate(cand) if d[k] > 0))


def no_pair_reason(model: RobotModel) -> str:
    """Why `collision_pairs` checks no pair of `model`'s links: no collision geometry, a single link with it, or
    what rules out every pair of links that has it (adjacent, moving together, touching in the zero posture)."""
    sets = link_spheres(model)
    if not sets:
        return "the description has no collision geometry"
    if len(sets) == 1:
        return f"only link {sets[0].link} has collision geometry"
    why = {
        _never_meet(model, sets[i].link, sets[j].link) or "touching in the zero posture"
        for i in range(len(sets))
        for j in range(i + 1, len(sets))
    }
    if why == {"adjacent"}:
        return "no link pair to check (only adjacent links have collision geometry)"
    return f"no link pair to check (each pair of links with collision geometry is {' or '.join(sorted(why))})"


def _world_centres(frames, index: dict[str, int], s: SphereSet) -> np.ndarray:
    R, p = frames.R[:, index[s.link]], frames.p[:, index[s.link]]
    return p[:, None, :] + np.einsum("bij,kj->bki", R, np.asarray(s.centres))


def _bounding(s: SphereSet) -> tuple[np.ndarray, float]:
    c = np.asarray(s.centres)
    centre = c.mean(axis=0)
    return centre, float(np.max(np.linalg.norm(c - centre, axis=1) + np.asarray(s.radii)))


def clearance(
    model: RobotModel,
    cp: CollisionPairs,
    q: np.ndarray,
    params: str | None = None,
    exact_below: float = np.inf,
) -> np.ndarray:
    """Sphere-set clearances (m, negative = penetration) for postures q (B, nq): (B, pairs). Where the links'
    bounding spheres are at least `exact_below` apart, that bounding clearance (a lower bound) is returned."""
    params = params or next(iter(model.params))
    q = np.atleast_2d(np.asarray(q, dtype=float))
    if not cp.pairs:
        return np.zeros((len(q), 0))
    frames = link_frames(model, q, params, model.root)
    index = {lk.name: k for k, lk in enumerate(model.links)}
    bound = {n: _bounding(cp.sets[n]) for pair in cp.pairs for n in pair}
    out = np.empty((len(q), len(cp.pairs)))
    for k, (i, j) in enumerate(cp.pairs):
        (ci, ri), (cj, rj) = bound[i], bound[j]
        wi = frames.p[:, index[cp.sets[i].link]] + frames.R[:, index[cp.sets[i].link]] @ ci
        wj = frames.p[:, index[cp.sets[j].link]] + frames.R[:, index[cp.sets[j].link]] @ cj
        out[:, k] = np.linalg.norm(wi - wj, axis=1) - ri - rj
    near = out < exact_below
    radii = [np.add.outer(np.asarray(cp.sets[i].radii), np.asarray(cp.sets[j].radii)) for i, j in cp.pairs]
    # each set's spheres placed once per chunk of postures, for all its pairs
    for start in range(0, len(q), CHUNK):
        rows = slice(start, start + CHUNK)
        sub = type(frames)(frames.R[rows], frames.p[rows])
        world: dict[int, np.ndarray] = {}
        for k, (i, j) in enumerate(cp.pairs):
            at = np.flatnonzero(near[rows, k])
            if not len(at):
                continue
            for n in (i, j):
                if n not in world:
                    world[n] = _world_centres(sub, index, cp.sets[n])
            diff = world[i][at][:, :, None, :] - world[j][at][:, None, :, :]
            d = np.sqrt((diff * diff).sum(axis=3)) - radii[k][None]  # as np.linalg.norm, to the last bit
            out[start + at, k] = d.reshape(len(at), -1).min(axis=1)
    return out


@per_model
def _frames_with_jacobians(model: RobotModel, links: tuple[str, ...], params: str, K: int) -> ca.Function:
    """q (nq, K) ↦ (each link's p and column-major vec R stacked, their Jacobian w.r.t. q): 12 rows per link,
    mapped over K postures."""
    q = ca.SX.sym("q", model.nq)
    frames = link_frames_sym(model, q, params, model.root)
    index = {lk.name: k for k, lk in enumerate(model.links)}
    out = ca.vertcat(*[ca.vertcat(frames.p[index[n]], ca.vec(frames.R[index[n]])) for n in links])
    return ca.Function("frames", [q], [out, ca.jacobian(out, q)]).map(K)


def soft_clearance(
    model: RobotModel, cp: CollisionPairs, q: np.ndarray, params: str | None = None, jacobian: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per pair, a smooth lower bound of the clearance (m) for postures q (K, nq) — the soft minimum of its sphere
    distances, −log Σ exp(−k d)/k with k = SOFTMIN_SHARPNESS — and its Jacobian: (K, pairs), (K, pairs, nq)
    (None without `jacobian`). What the trajectory optimiser constrains.

    Only the link frames go through CasADi; the sphere distances, soft minimum and chain rule (through its
    softmax weights) are vectorised numpy — an SX graph of every sphere pair made the optimiser 3× slower."""
    params = params or next(iter(model.params))
    q = np.atleast_2d(np.asarray(q, dtype=float))
    K, n = q.shape
    used = sorted({i for pair in cp.pairs for i in pair})
    links = tuple(dict.fromkeys(cp.sets[i].link for i in used))
    vals, jac = _frames_with_jacobians(model, links, params, K)(q.T)
    vals = np.asarray(vals).T.reshape(K, len(links), 12)
    jac = np.asarray(jac).reshape(len(links), 12, K, n).transpose(2, 0, 1, 3)  # K, link, 12, n
    centres, dcentres = {}, {}
    for i in used:
        li = links.index(cp.sets[i].link)
        p, R = vals[:, li, :3], vals[:, li, 3:].reshape(K, 3, 3).transpose(0, 2, 1)
        dp, dR = jac[:, li, :3], jac[:, li, 3:].reshape(K, 3, 3, n).transpose(0, 2, 1, 3)
        c = np.asarray(cp.sets[i].centres)
        centres[i] = p[:, None, :] + np.einsum("krc,sc->ksr", R, c)
        if jacobian:
            dcentres[i] = dp[:, None] + np.einsum("krci,sc->ksri", dR, c)
    values = np.empty((K, len(cp.pairs)))
    jacobians = np.empty((K, len(cp.pairs), n)) if jacobian else None
    k = SOFTMIN_SHARPNESS
    for a, (i, j) in enumerate(cp.pairs):
        diff = centres[i][:, :, None, :] - centres[j][:, None, :, :]  # K, Si, Sj, 3
        norm = np.sqrt(np.einsum("kstr,kstr->kst", diff, diff) + 1e-12)
        v = norm - np.add.outer(np.asarray(cp.sets[i].radii), np.asarray(cp.sets[j].radii))[None]
        m = v.min(axis=(1, 2), keepdims=True)
        e = np.exp(-k * (v - m))
        total = e.sum(axis=(1, 2))
        values[:, a] = m[:, 0, 0] - np.log(total) / k
        if jacobians is None:
            continue
        wu = (e / total[:, None, None] / norm)[..., None] * diff  # softmax weight × unit vector
        jacobians[:, a] = np.einsum("ksr,ksri->ki", wu.sum(axis=2), dcentres[i]) - np.einsum(
            "ktr,ktri->ki", wu.sum(axis=1), dcentres[j]
        )
    return values, jacobians


NEAR = 0.05  # m: pairs that stay this much farther apart than the margin over random postures are not constrained


@per_model
def near_pairs(
    model: RobotModel, params: str | None = None, margin: float = 0.0, samples: int = 4096
) -> CollisionPairs:
    """The checked pairs that come within `margin` + NEAR of each other somewhere in a random sample of postures
    within the joint and coupled limits: the ones worth a constraint (the verification checks all pairs)."""
    cp = collision_pairs(model, params)
    if not cp.pairs:
        return cp
    lo, hi = model.sampling_bounds()
    q = np.random.default_rng(0).uniform(lo, hi, size=(samples, model.nq))
    if len(model.coupled_b):
        q = q[np.all(q @ model.coupled_A.T <= model.coupled_b, axis=1)]
    d = clearance(model, cp, q, params, exact_below=margin + NEAR)
    return CollisionPairs(cp.sets, tuple(p for k, p in enumerate(cp.pairs) if d[:, k].min() < margin + NEAR))
