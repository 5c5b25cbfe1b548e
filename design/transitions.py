"""Transitions between consecutive postures of one placement, and an ordering that keeps them short.

Plain joint-space interpolation moves the free foot (it is a closed chain). Each waypoint here is the
minimum-norm Gauss–Newton projection of the interpolated angles onto: other foot flat at its placement (6)
and CoP on the straight segment between the two postures' CoPs (2). The CoP region shrunk by the margin is
convex, so the whole motion keeps the margin of its end postures. A solved path the closed chain cannot
follow between its waypoints (`robots.chain_path.ground_transition_issues`: a jump, a posture off the chain)
means the feasible set is split between the two postures; the transition is then marked `lifted`.
"""

from __future__ import annotations

import itertools

import casadi as ca
import numpy as np

from design.problems import Settings, posture_function
from design.uncertainty import design_rule
from formats.plan import Plan, Transition
from robots.chain_path import ground_transition_issues
from robots.interrupt import interruptible
from robots.memo import per_model
from robots.plan_rules import path_theta, rule_balance
from robots.stance_spec import design_params, resolve_base
from robots.tree import RobotModel

WAYPOINTS = 11


def joint_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Largest joint change (rad): it sets the move time at a bounded joint speed."""
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def order_postures(model: RobotModel, ps) -> np.ndarray:
    """Order postures within each placement (placements kept in order) to minimise the summed joint moves."""
    order: list[int] = []
    for j in range(len(ps.poses)):
        idx = list(np.flatnonzero(ps.placement == j))
        if len(idx) <= 7:
            best = min(
                itertools.permutations(idx),
                key=lambda perm: sum(joint_distance(ps.q[a], ps.q[b]) for a, b in itertools.pairwise(perm)),
            )
            order += list(best)
        else:  # greedy nearest neighbour
            path = [idx.pop(0)]
            while idx:
                nxt = min(idx, key=lambda k: joint_distance(ps.q[path[-1]], ps.q[k]))
                path.append(nxt)
                idx.remove(nxt)
            order += path
    return np.array(order, dtype=int)


@per_model
def _constraint_fn(model: RobotModel, params: str, base: str) -> ca.Function:
    q = ca.SX.sym("q", model.nq)
    pose = ca.SX.sym("pose", 3)
    target = ca.SX.sym("cop", 2)
    eq, cop, _ = posture_function(model, params, base)(q, pose)
    c = ca.vertcat(eq, cop - target)
    return ca.Function("transition", [q, pose, target], [c, ca.jacobian(c, q)])


def project(
    model: RobotModel, q0: np.ndarray, pose, cop, params: str | None = None, base: str | None = None,
    iters: int = 30,
) -> tuple[np.ndarray, float]:  # fmt: skip
    """Minimum-norm Gauss–Newton onto foot-at-placement + CoP target; returns q and the final residual."""
    fn = _constraint_fn(model, params or design_params(model), resolve_base(model, base))
    q = np.array(q0, dtype=float)
    res = np.inf
    for _ in range(iters):
        c, J = fn(q, pose, cop)
        c, J = np.asarray(c).ravel(), np.asarray(J)
        res = float(np.abs(c).max())
        if res < 1e-12:
            break
        q = q - np.linalg.lstsq(J, c, rcond=None)[0]
    return q, res


def foot_error(
    model: RobotModel, q: np.ndarray, pose, params: str | None = None, base: str | None = None
) -> float:
    """How far (m) the free sole is from lying flat at its placement (position error incl. lift-off)."""
    from robots.kinematics import site_pose
    from robots.stance import other_site

    params, base = params or design_params(model), resolve_base(model, base)
    R, p = site_pose(model, q, params, other_site(model, base), base)
    return float(np.linalg.norm(p - np.array([pose[0], pose[1], 0.0])))


MAX_EDGES = 8


@per_model
def _path_solver(model: RobotModel, params: str, base: str, inner: int, margin: float, spec):
    """IPOPT (exact Hessian) for a shortest closed-chain joint path between two fixed postures.

    Parameters: placement pose (3), start q (nq), end q (nq), hull edges as rows (nx, ny, offset) so that
    the margin of CoP c is nx·cx + ny·cy − offset (padding rows (0, 0, −1) are inactive).
    """
    nq = model.nq
    X = ca.SX.sym("x", nq * inner)
    P = ca.SX.sym("p", 3 + 2 * nq + 3 * MAX_EDGES)
    pose, qa, qb = P[:3], P[3 : 3 + nq], P[3 + nq : 3 + 2 * nq]
    E = ca.reshape(P[3 + 2 * nq :], 3, MAX_EDGES)
    Q = ca.horzcat(qa, ca.reshape(X, nq, inner), qb)
    fn = posture_function(model, params, base, spec)
    f = 0
    g = []
    for k in range(inner + 1):
        dq = Q[:, k + 1] - Q[:, k]
        f += ca.dot(dq, dq)
    for k in range(1, inner + 1):
        eq, cop, G = fn(Q[:, k], pose)
        g.append(eq)
        if model.coupled_b.size:
            g.append(ca.DM(model.coupled_A) @ Q[:, k] - ca.DM(model.coupled_b))
        for e in range(MAX_EDGES):
            m = E[0, e] * cop[0] + E[1, e] * cop[1] - E[2, e]
            if spec is not None and spec.scale > 0:
                quad = E[0, e] ** 2 * G[0] + 2 * E[0, e] * E[1, e] * G[1] + E[1, e] ** 2 * G[2]
                m = m - spec.scale * ca.sqrt(quad + 1e-12)
            g.append(m - margin)
    g = ca.vertcat(*g)
    per = 6 + len(model.coupled_b) + MAX_EDGES
    lbg = np.concatenate([[0.0] * 6 + [-np.inf] * len(model.coupled_b) + [0.0] * MAX_EDGES] * inner)
    ubg = np.concatenate([[0.0] * 6 + [0.0] * len(model.coupled_b) + [np.inf] * MAX_EDGES] * inner)
    assert lbg.size == per * inner
    opts = {
        "ipopt": {
            "print_level": 0,
            "sb": "yes",
            "tol": 1e-9,
            "constr_viol_tol": 1e-10,
            "bound_relax_factor": 0.0,
            "max_iter": 300,
        },
        "print_time": False,
    }
    solver = ca.nlpsol("transition", "ipopt", {"x": X, "p": P, "f": f, "g": g}, opts)
    return solver, lbg, ubg


def _edges(model: RobotModel, pose, base: str) -> np.ndarray:
    from design.geometry import all_corners, hull_indices

    pts = all_corners(model, pose, base)
    hull = hull_indices(pts)
    E = np.tile([[0.0], [0.0], [-1.0]], (1, MAX_EDGES))
    for k in range(len(hull)):
        a, b = pts[hull[k]], pts[hull[(k + 1) % len(hull)]]
        e = (b - a) / np.linalg.norm(b - a)
        n = np.array([-e[1], e[0]])
        E[:, k] = [n[0], n[1], n @ a]
    return E


def make_transitions(
    model: RobotModel, plan: Plan, s: Settings, waypoints: int = WAYPOINTS
) -> list[Transition]:
    """Closed-chain transitions for every consecutive pair of postures on the same placement.

    Each is the shortest joint path (sum of squared steps) whose waypoints keep the free foot flat at its
    placement, respect all joint limits and keep the required CoP margin; started from the projection of
    plain interpolation. Also records how far plain interpolation would move the free foot (m).
    """
    s = s.resolved(model)
    out = []
    inner = waypoints - 2
    margin = s.required_margin
    solver, lbg, ubg = _path_solver(model, s.params, s.base, inner, margin, s.cop_spec(model))
    theta = path_theta(model, plan)  # the plan's CoP rule, as `plan check` and the executor check the ticks
    nominal = design_rule(model, s.base, 0.0, s.ellipsoid)  # `nominal_cop`'s rule, decided once

    def cop_and_margin(q: np.ndarray):
        return rule_balance(model, s.base, s.params, q, nominal)  # = nominal_cop(model, q, …, s.ellipsoid)

    for a, b in itertools.pairwise(plan.postures):
        if a.placement != b.placement:
            continue
        pose = np.array(plan.placement(a.placement).other_foot)
        ts = np.linspace(0.0, 1.0, waypoints)
        interp = [(1 - t) * a.q + t * b.q for t in ts]
        err_interp = max(foot_error(model, qi, pose, s.params, s.base) for qi in interp)
        # the CoPs recomputed from the postures (never a file's unchecked predicted_cop)
        ca_, cb = (cop_and_margin(p.q)[0] for p in (a, b))
        x0 = []
        for t, qi in zip(ts[1:-1], interp[1:-1], strict=True):
            qp, _ = project(model, qi, pose, (1 - t) * ca_ + t * cb, s.params, s.base)
            x0.append(np.clip(qp, model.lower, model.upper))
        par = np.concatenate([pose, a.q, b.q, _edges(model, pose, s.base).ravel(order="F")])
        lbx = np.tile(model.lower, inner)
        ubx = np.tile(model.upper, inner)
        with interruptible():
            sol = solver(x0=np.concatenate(x0), p=par, lbx=lbx, ubx=ubx, lbg=lbg, ubg=ubg)
        wps = np.vstack([a.q, np.asarray(sol["x"]).reshape(inner, model.nq), b.q])
        what = f"transition {a.index}→{b.index}"
        lifted = bool(ground_transition_issues(model, wps, pose, s.params, s.base, margin, what, theta))
        if lifted:  # the chain's feasible set is split between the postures: lift, air move, set down
            wps = np.array([a.q, b.q])
        margins = [cop_and_margin(qk)[1] for qk in wps]
        out.append(Transition(a.index, b.index, wps, err_interp, float(min(margins)), lifted))
    return out
