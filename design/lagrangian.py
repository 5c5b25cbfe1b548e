"""Exact Hessian of the design NLP's Lagrangian, evaluated numerically in one callback.

CasADi's generic MX Hessian sweeps the mapped kinematics once per colour of the Hessian (≈ 20 ms an
iteration at 50 postures). Here the chain rule is taken by hand over small SX pieces instead:
    ∇²L = Σᵢ Sᵢᵀ ∇²_y(wᵢ·Fᵢ) Sᵢ + Tᵀ ∇²_z(λ·geometry) T + λ_f ∇²f,
with Fᵢ = (eq, CoP, G) of posture i as a function of y = (qᵢ, poseᵢ), wᵢ its multipliers (the CoP and G
ones are the geometry's gradient), z = (CoP, G, placements) and T = ∂z/∂x. Every piece is exact.
"""

from __future__ import annotations

from functools import lru_cache

import casadi as ca
import numpy as np
import scipy.sparse as sps

from design.objective import Cached
from robots.interrupt import in_callback


@lru_cache(maxsize=16)
def second_order(posture: ca.Function, N: int) -> ca.Function:
    """Per posture, mapped over N: ∇²_y (w·(eq, CoP, G)) (dense ny×ny) and ∂(CoP, G)/∂y (5×ny), y = (q, pose)."""
    q = ca.SX.sym("q", posture.size1_in(0))
    pose = ca.SX.sym("pose", posture.size1_in(1))
    eq, cop, G = posture(q, pose)
    out = ca.vertcat(eq, cop, G)
    w = ca.SX.sym("w", out.shape[0])
    y = ca.vertcat(q, pose)
    hy = ca.hessian(ca.dot(w, out), y)[0]
    jz = ca.jacobian(ca.vertcat(cop, G), y)
    return ca.Function("posture_second_order", [q, pose, w], [ca.densify(hy), ca.densify(jz)]).map(N)


def _geometry_second_order(geometry: ca.Function) -> ca.Function:
    """(CoP, G, placements, λ) ↦ (∂(λ·g)/∂CoP, ∂(λ·g)/∂G, ∇²_z(λ·g)) with z = (vec CoP, vec G, vec PL)."""
    cop, G, PL = (ca.SX.sym(n, geometry.sparsity_in(k)) for k, n in enumerate(("cop", "G", "pl")))
    lam = ca.SX.sym("lam", geometry.size1_out(0))
    z = ca.vertcat(ca.vec(cop), ca.vec(G), ca.vec(PL))
    L = ca.dot(lam, geometry(cop, G, PL))
    grad = ca.gradient(L, z)
    n_cop, n_G = cop.numel(), G.numel()
    return ca.Function(
        "geometry_second_order",
        [cop, G, PL, lam],
        [
            ca.reshape(grad[:n_cop], cop.shape),
            ca.reshape(grad[n_cop : n_cop + n_G], G.shape),
            ca.hessian(L, z)[0],
        ],
    )


class LagrangianHessian(ca.Callback):
    """hess_lag(x, p, λ_f, λ_g) for IPOPT: upper triangle, fixed sparsity, written straight into CasADi's
    buffer. Variables x = (q of every posture, then (x, y, ψ, φ, c) per placement); constraints
    g = (eq (6/posture), coupled limits (linear), geometry)."""

    def __init__(
        self,
        posture: ca.Function,
        geometry: ca.Function,
        placement: np.ndarray,
        nq: int,
        n_linear: int,
        objective: Cached,
    ):
        ca.Callback.__init__(self)
        N, P = len(placement), geometry.size2_in(2)
        self.N, self.P, self.nq, self.objective = N, P, nq, objective
        self.placement = np.asarray(placement)
        self.posture, self.second = posture.map(N), second_order(posture, N)
        self.geo = _geometry_second_order(geometry)
        self.n_eq = posture.size1_out(0)  # per posture
        self.geo_start = self.n_eq * N + n_linear
        nx, ny = N * nq + 5 * P, nq + 3
        self.nx, self.nqx = nx, N * nq
        y_idx = np.array(
            [np.r_[i * nq : (i + 1) * nq, N * nq + 5 * placement[i] + np.arange(3)] for i in range(N)]
        )
        # block i, entry (a, b) of the per-posture Hessian -> x indices (y_idx[i, a], y_idx[i, b])
        self.post_r = np.repeat(y_idx, ny, axis=1).ravel()
        self.post_c = np.tile(y_idx, (1, ny)).ravel()
        zi = np.concatenate(
            [2 * np.arange(N)[:, None] + np.arange(2), 2 * N + 3 * np.arange(N)[:, None] + np.arange(3)],
            axis=1,
        )
        self.t_r = np.repeat(zi, ny, axis=1).ravel()  # ∂z/∂y of posture i: rows zi[i], columns y_idx[i]
        self.t_c = np.tile(y_idx, (1, 5)).ravel()
        n_z = 5 * N + 5 * P
        self.t_id = sps.coo_matrix(
            (np.ones(5 * P), (5 * N + np.arange(5 * P), N * nq + np.arange(5 * P))), (n_z, nx)
        )
        hz = self.geo.sparsity_out(2)
        hz_r, hz_c = hz.get_triplet()
        self.hz_r, self.hz_c, self.n_z = np.array(hz_r, dtype=int), np.array(hz_c, dtype=int), n_z
        pattern = np.zeros((nx, nx), dtype=bool)
        pattern[: N * nq, : N * nq] = True
        pattern[self.post_r, self.post_c] = True
        T = self._T(np.ones(len(self.t_r)))
        Hz = sps.coo_matrix((np.ones(len(self.hz_r)), (self.hz_r, self.hz_c)), (n_z, n_z))
        pattern |= (abs(T).T @ Hz @ abs(T)).toarray() != 0
        r, c = np.nonzero(np.triu(pattern))
        self.sparsity = ca.Sparsity.triplet(nx, nx, r.tolist(), c.tolist())
        r, c = self.sparsity.get_triplet()
        self.out_r, self.out_c = np.array(r, dtype=int), np.array(c, dtype=int)
        self.construct("nlp_hess_l", {})

    def _T(self, jz_values: np.ndarray) -> sps.csr_matrix:
        return (sps.coo_matrix((jz_values, (self.t_r, self.t_c)), (self.n_z, self.nx)) + self.t_id).tocsr()

    def get_n_in(self):
        return 4

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense([self.nx, 1, 1, self.geo_start + self.geo.size1_in(3)][i], 1)

    def get_sparsity_out(self, i):
        return self.sparsity

    def has_eval_buffer(self):
        return True

    @in_callback
    def eval_buffer(self, arg, res):
        N, nq = self.N, self.nq
        x = np.frombuffer(arg[0], dtype=float)
        p = float(np.frombuffer(arg[1], dtype=float)[0])
        lam_f = float(np.frombuffer(arg[2], dtype=float)[0])
        lam_g = np.frombuffer(arg[3], dtype=float)
        Q = x[: N * nq].reshape(N, nq).T
        PL = x[N * nq :].reshape(self.P, 5).T
        poses = PL[:3, self.placement]
        _, cop, G = self.posture(Q, poses)
        w_cop, w_G, Hz = self.geo(cop, G, PL, lam_g[self.geo_start :])
        W = np.vstack([lam_g[: self.n_eq * N].reshape(N, self.n_eq).T, np.asarray(w_cop), np.asarray(w_G)])
        Hy, Jz = self.second(Q, poses, W)
        ny = nq + 3
        H = np.zeros((self.nx, self.nx))
        if lam_f != 0.0:
            H[: self.nqx, : self.nqx] = lam_f * self.objective(x[: self.nqx], p).hess
        np.add.at(H, (self.post_r, self.post_c), np.asarray(Hy).reshape(ny, N, ny).transpose(1, 0, 2).ravel())
        T = self._T(np.asarray(Jz).reshape(5, N, ny).transpose(1, 0, 2).ravel())
        H += (T.T @ (Hz.sparse() @ T)).toarray()
        np.frombuffer(res[0], dtype=float)[:] = H[self.out_r, self.out_c]
        return 0
