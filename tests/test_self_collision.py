"""Self-collision: sphere sets around the URDF collision meshes (iCubGenova04 right arm), the checked pairs,
exact and symbolic clearances, and the trajectory verification that reports links coming too close."""

from __future__ import annotations

from pathlib import Path

import casadi as ca
import numpy as np
import pytest
import trimesh
import yourdfpy

from formats.trajectory_plan import TrajectoryPlan
from poise.cmd_plan_trajectory import _standing_rows
from robots.collision import (
    SOFTMIN_SHARPNESS,
    clearance,
    collision_pairs,
    link_spheres,
    near_pairs,
    soft_clearance,
)
from robots.kinematics import link_frames_sym
from robots.registry import get_model
from robots.urdf import resolve_package_uri
from trajectories.fourier import FourierTrajectory
from trajectories.plan import check_plan
from trajectories.verify import check_trajectory


@pytest.fixture(scope="module")
def arm():
    return get_model("icub-right-arm")


def _symbolic_soft_clearance(model, cp) -> ca.Function:
    """The test's reference: q ↦ each pair's soft minimum of sphere distances built as one CasADi SX expression
    (what the optimiser evaluated before soft_clearance), so CasADi's AD gives an independent Jacobian."""
    q = ca.SX.sym("q", model.nq)
    frames = link_frames_sym(model, q, next(iter(model.params)), model.root)
    index = {lk.name: k for k, lk in enumerate(model.links)}

    def centres(n):
        s = cp.sets[n]
        R, p = frames.R[index[s.link]], frames.p[index[s.link]]
        return [p + R @ ca.DM(c) for c in s.centres]

    outs = []
    for i, j in cp.pairs:
        v = ca.vertcat(*[ca.sqrt(ca.dot(ci - cj, ci - cj) + 1e-12) - ri - rj
                         for ci, ri in zip(centres(i), cp.sets[i].radii, strict=True)
                         for cj, rj in zip(centres(j), cp.sets[j].radii, strict=True)])  # fmt: skip
        m = ca.mmin(v)  # shift: exp(−k·v) underflows for links a few decimetres apart
        outs.append(m - ca.log(ca.sum1(ca.exp(-SOFTMIN_SHARPNESS * (v - m)))) / SOFTMIN_SHARPNESS)
    return ca.Function("clearance", [q], [ca.vertcat(*outs)])


def _mesh_vertices(model, link: str) -> np.ndarray:
    """The link's collision mesh vertices in the link frame, read independently of robots.collision."""
    robot = yourdfpy.URDF.load(model.source, load_meshes=False, build_scene_graph=False)
    out = []
    for col in robot.link_map[link].collisions:
        mesh = trimesh.load(
            str(resolve_package_uri(col.geometry.mesh.filename, Path(model.source))), force="mesh"
        )
        v = np.asarray(mesh.vertices) * np.asarray(col.geometry.mesh.scale)
        T = np.asarray(col.origin)
        out.append(v @ T[:3, :3].T + T[:3, 3])
    return np.vstack(out)


def test_spheres_contain_every_collision_vertex(arm):
    sets = {s.link: s for s in link_spheres(arm)}
    assert {"r_hand", "r_forearm", "chest"} <= set(sets)
    for link in ("r_hand", "r_forearm", "chest"):
        v = _mesh_vertices(arm, link)
        c, r = np.asarray(sets[link].centres), np.asarray(sets[link].radii)
        inside = np.linalg.norm(v[:, None, :] - c[None], axis=2) <= r[None] + 1e-12
        assert inside.any(axis=1).all(), link
        assert r.max() <= 0.06  # small spheres: the set follows the shape, not one fat ball


def test_checked_pairs_exclude_neighbours_and_rigid_parts(arm):
    names = collision_pairs(arm).names()
    assert "chest–r_forearm" in names and "chest–r_hand" in names  # the hand can hit the chest
    assert (
        "r_forearm–r_hand" not in names
    )  # neighbours through the wrist's small links are not both moving apart
    assert "r_elbow_1–r_forearm" not in names  # joined by one joint
    assert not any(n.startswith("root_link–torso") or n.startswith("torso_1–chest") for n in names)  # rigid
    zero = clearance(arm, collision_pairs(arm), np.zeros((1, arm.nq)))
    assert zero.min() > 0


def test_soft_clearance_is_a_tight_lower_bound(arm):
    cp = near_pairs(arm, None, 0.01)
    assert 0 < len(cp.pairs) <= len(collision_pairs(arm).pairs)
    q = np.random.default_rng(2).uniform(arm.lower, arm.upper, size=(300, arm.nq))
    exact = clearance(arm, cp, q)
    soft = soft_clearance(arm, cp, q, jacobian=False)[0]
    assert np.all(soft <= exact + 1e-9)
    assert np.max(exact - soft) < 0.005
    assert (exact.min(axis=1) < 0).any() and (exact.min(axis=1) > 0).any()  # the sample has both kinds


def test_numeric_soft_clearance_equals_the_symbolic_one_and_its_derivative(arm):
    """What the optimiser evaluates (numpy, chain rule through the softmax weights) against CasADi's SX graph of
    every sphere pair and its AD Jacobian, at random postures."""
    cp = near_pairs(arm, None, 0.01)
    q = np.random.default_rng(4).uniform(arm.lower, arm.upper, size=(40, arm.nq))
    qs = ca.SX.sym("q", arm.nq)
    h = _symbolic_soft_clearance(arm, cp)(qs)
    v, J = ca.Function("vj", [qs], [h, ca.jacobian(h, qs)]).map(len(q))(q.T)
    v = np.asarray(v).T
    J = np.asarray(J).reshape(len(cp.pairs), len(q), arm.nq).transpose(1, 0, 2)
    values, jac = soft_clearance(arm, cp, q)
    assert values.shape == v.shape and jac.shape == J.shape
    assert np.abs(values - v).max() < 1e-12 and np.abs(jac - J).max() < 1e-10 * np.abs(J).max()
    # and a finite difference of the numeric values, independently of CasADi's AD
    dq = np.zeros(arm.nq)
    dq[2] = 1e-7
    fd = (soft_clearance(arm, cp, q + dq)[0] - soft_clearance(arm, cp, q - dq)[0]) / 2e-7
    assert np.abs(fd - jac[:, :, 2]).max() < 1e-5


def test_exact_below_only_skips_pairs_that_are_far(arm):
    cp = collision_pairs(arm)
    q = np.random.default_rng(3).uniform(arm.lower, arm.upper, size=(200, arm.nq))
    full = clearance(arm, cp, q)
    fast = clearance(arm, cp, q, exact_below=0.05)
    assert np.all(fast <= full + 1e-12)
    near = full < 0.05
    assert np.allclose(fast[near], full[near])


def test_verification_reports_links_that_meet(arm):
    cp = collision_pairs(arm)
    q = np.random.default_rng(5).uniform(arm.lower, arm.upper, size=(4000, arm.nq))
    q = q[np.all(q @ arm.coupled_A.T <= arm.coupled_b, axis=1)]
    d = clearance(arm, cp, q)
    bad = q[np.argmin(d.min(axis=1))]
    pair = cp.names()[int(np.argmin(d[np.argmin(d.min(axis=1))]))]
    zeros = np.zeros((arm.nq, 1))
    still = FourierTrajectory(1.0, 1.0, bad, zeros, zeros)  # standing still in a colliding posture
    check = check_trajectory(arm, still, arm.root, "urdf", 0.01, collision_margin=0.01)
    assert (
        check.closest_links == pair and check.min_self_clearance_m < 0 and check.self_collision == "checked"
    )
    assert any("come" in p and pair in p for p in check.problems)
    unchecked = check_trajectory(arm, still, arm.root, "urdf", 0.01, collision_margin=None)
    assert unchecked.min_self_clearance_m is None and not any("come" in p for p in unchecked.problems)
    assert unchecked.self_collision is None
    ok = FourierTrajectory(1.0, 1.0, np.clip(np.zeros(arm.nq), arm.lower, arm.upper), zeros, zeros)
    assert check_trajectory(arm, ok, arm.root, "urdf", 0.01).min_self_clearance_m > 0
    # a plan designed without self-collision rows is still held by plan check and the run to links that do not meet
    for settings, need in (({"self_collision": True, "collision_margin": 0.01}, "10.0"),
                           ({"self_collision": False}, "0.0")):  # fmt: skip
        plan = TrajectoryPlan(arm.name, arm.root, list(arm.joint_names), still.to_json(), params="urdf",
                              settings=settings)  # fmt: skip
        report = check_plan(plan, arm, still, dt=0.01)
        assert any(p.startswith(f"links {pair} come") and p.endswith(f"(< {need} mm required)")
                   for p in report.problems)  # fmt: skip


def test_robots_without_collision_geometry_are_not_checked():
    tulip = get_model("tulip")
    assert link_spheres(tulip) == () and collision_pairs(tulip).pairs == ()
    # and say so: the check and the designer's table name it, not a silent pass
    zeros = np.zeros((tulip.nq, 1))
    still = FourierTrajectory(1.0, 1.0, np.zeros(tulip.nq), zeros, zeros)
    check = check_trajectory(tulip, still, tulip.root, "sim", 0.01, collision_margin=0.01)
    assert check.self_collision == "no collision geometry" and check.min_self_clearance_m is None
    rows = dict((label, value) for label, value, _ in _standing_rows(check.to_dict()))
    assert rows["self-collision"] == "not checked: the description has no collision geometry"
