"""⊞-manifolds for least squares: Rⁿ, SO(3), S² and products (vectorised numpy + CasADi first-order retraction).

Values are stored as flat *ambient* vectors (rows of a (K, ambient_dim) array): Rⁿ as itself, SO(3) as the
column-major flattened 3×3 matrix (CasADi's `reshape` order), S² as a unit 3-vector. Increments live in the
tangent space: R ⊞ δ = R·Exp(δ), R2 ⊟ R1 = Log(R1ᵀR2); x ⊞ δ = Exp(B(x)δ)·x on S² with an orthonormal tangent
basis B(x). Jacobians w.r.t. δ at δ = 0 only need the first-order retraction, which `plus_linear_sym` gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

_SMALL = 1e-8


def hat(v: np.ndarray) -> np.ndarray:
    """Skew matrices of vectors: (..., 3) → (..., 3, 3) with hat(v) @ u = v × u."""
    v = np.asarray(v, dtype=float)
    out = np.zeros(v.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2] = -v[..., 2], v[..., 1]
    out[..., 1, 0], out[..., 1, 2] = v[..., 2], -v[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -v[..., 1], v[..., 0]
    return out


def so3_exp(v: np.ndarray) -> np.ndarray:
    """Rodrigues' formula, vectorised: rotation vectors (..., 3) → rotation matrices (..., 3, 3)."""
    v = np.asarray(v, dtype=float)
    th = np.linalg.norm(v, axis=-1)[..., None, None]
    small = th < 1e-6
    ths = np.where(small, 1.0, th)
    a = np.where(small, 1.0 - th**2 / 6.0, np.sin(ths) / ths)
    b = np.where(small, 0.5 - th**2 / 24.0, (1.0 - np.cos(ths)) / ths**2)
    K = hat(v)
    return np.eye(3) + a * K + b * (K @ K)


def so3_log(R: np.ndarray) -> np.ndarray:
    """Inverse of `so3_exp` for angles in [0, π]: rotation matrices (..., 3, 3) → rotation vectors (..., 3)."""
    R = np.asarray(R, dtype=float)
    vee = 0.5 * np.stack(
        [R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1
    )
    s = np.linalg.norm(vee, axis=-1)
    c = np.clip((np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    th = np.arctan2(s, c)
    out = np.where((s > 1e-12)[..., None], vee * (th / np.where(s > 1e-12, s, 1.0))[..., None], vee)
    # Near π the antisymmetric part vanishes: recover the axis from the symmetric part.
    near_pi = c < -0.99
    if np.any(near_pi):
        Rp = R[near_pi]
        thp = th[near_pi]
        B = (Rp + np.swapaxes(Rp, -1, -2)) / 2.0 - np.cos(thp)[:, None, None] * np.eye(3)
        cols = np.argmax(np.linalg.norm(B, axis=-2), axis=-1)
        axis = B[np.arange(len(cols)), :, cols]
        axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
        sign = np.sign(np.einsum("ij,ij->i", axis, vee[near_pi]))
        axis *= np.where(sign == 0, 1.0, sign)[:, None]
        out[near_pi] = axis * thp[:, None]
    return out


def orthonormalize(R: np.ndarray) -> np.ndarray:
    """Nearest rotation matrix (SVD), e.g. for 3-digit matrices printed in a paper."""
    U, _, Vt = np.linalg.svd(np.asarray(R, dtype=float))
    D = np.diag([1.0, 1.0, np.linalg.det(U @ Vt)])
    return U @ D @ Vt


def _hat_sym(v: ca.SX) -> ca.SX:
    return ca.vertcat(
        ca.horzcat(0, -v[2], v[1]),
        ca.horzcat(v[2], 0, -v[0]),
        ca.horzcat(-v[1], v[0], 0),
    )


@dataclass(frozen=True)
class Rn:
    """Euclidean space: ⊞ is +, ⊟ is −."""

    n: int

    @property
    def ambient_dim(self) -> int:
        return self.n

    @property
    def tangent_dim(self) -> int:
        return self.n

    aux_dim = 0

    def plus(self, x: np.ndarray, d: np.ndarray) -> np.ndarray:
        return np.asarray(x, float) + d

    def minus(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.asarray(y, float) - x

    def aux(self, x: np.ndarray) -> np.ndarray:
        return np.zeros((len(x), 0))

    def normalize(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, float)

    def plus_linear_sym(self, x: ca.SX, d: ca.SX, aux: ca.SX) -> ca.SX:
        return x + d

    def label(self, i: int) -> str:
        return str(i)


@dataclass(frozen=True)
class SO3:
    """Rotations, stored as column-major flattened matrices; right perturbation R·Exp(δ)."""

    ambient_dim = 9
    tangent_dim = 3
    aux_dim = 0

    @staticmethod
    def to_flat(R: np.ndarray) -> np.ndarray:
        """(…, 3, 3) matrices → (…, 9) ambient vectors (column-major)."""
        R = np.asarray(R, float)
        return np.swapaxes(R, -1, -2).reshape(R.shape[:-2] + (9,))

    @staticmethod
    def to_matrix(x: np.ndarray) -> np.ndarray:
        """(…, 9) ambient vectors → (…, 3, 3) matrices."""
        x = np.asarray(x, float)
        return np.swapaxes(x.reshape(x.shape[:-1] + (3, 3)), -1, -2)

    def plus(self, x: np.ndarray, d: np.ndarray) -> np.ndarray:
        return self.to_flat(self.to_matrix(x) @ so3_exp(d))

    def minus(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        R1, R2 = self.to_matrix(x), self.to_matrix(y)
        return so3_log(np.swapaxes(R1, -1, -2) @ R2)

    def aux(self, x: np.ndarray) -> np.ndarray:
        return np.zeros((len(x), 0))

    def normalize(self, x: np.ndarray) -> np.ndarray:
        return self.to_flat(np.array([orthonormalize(R) for R in self.to_matrix(np.atleast_2d(x))]))

    def plus_linear_sym(self, x: ca.SX, d: ca.SX, aux: ca.SX) -> ca.SX:
        R = ca.reshape(x, 3, 3)
        return ca.reshape(R @ (ca.SX.eye(3) + _hat_sym(d)), 9, 1)

    def label(self, i: int) -> str:
        return "xyz"[i]


def s2_basis(x: np.ndarray) -> np.ndarray:
    """Orthonormal tangent bases B(x) (K, 3, 2) of unit vectors x (K, 3); deterministic in x."""
    x = np.asarray(x, float)
    # Cross with the coordinate axis least aligned with x: well conditioned everywhere.
    e = np.eye(3)[np.argmin(np.abs(x), axis=-1)]
    b1 = np.cross(x, e)
    b1 /= np.linalg.norm(b1, axis=-1, keepdims=True)
    b2 = np.cross(x, b1)
    return np.stack([b1, b2], axis=-1)


@dataclass(frozen=True)
class S2:
    """Unit vectors (directions); 2-D tangent δ, x ⊞ δ = Exp(B(x)δ)·x."""

    ambient_dim = 3
    tangent_dim = 2
    aux_dim = 6

    def plus(self, x: np.ndarray, d: np.ndarray) -> np.ndarray:
        x = np.asarray(x, float)
        v = np.einsum("kij,kj->ki", s2_basis(x), d)
        return np.einsum("kij,kj->ki", so3_exp(v), x)

    def minus(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        x, y = np.asarray(x, float), np.asarray(y, float)
        c = np.cross(x, y)
        s = np.linalg.norm(c, axis=-1)
        th = np.arctan2(s, np.einsum("ki,ki->k", x, y))
        v = c * (th / np.where(s > 1e-15, s, 1.0))[:, None]
        return np.einsum("kij,ki->kj", s2_basis(x), v)

    def aux(self, x: np.ndarray) -> np.ndarray:
        return np.swapaxes(s2_basis(x), -1, -2).reshape(len(x), 6)  # column-major flatten of B

    def normalize(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, float))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    def plus_linear_sym(self, x: ca.SX, d: ca.SX, aux: ca.SX) -> ca.SX:
        B = ca.reshape(aux, 3, 2)
        return x + ca.cross(B @ d, x)

    def label(self, i: int) -> str:
        return "uv"[i]


@dataclass(frozen=True)
class Product:
    """Cartesian product of manifolds; ambient, tangent and aux vectors are concatenated."""

    parts: tuple

    def _slices(self, attr: str) -> list[slice]:
        out, o = [], 0
        for p in self.parts:
            n = getattr(p, attr)
            out.append(slice(o, o + n))
            o += n
        return out

    @property
    def ambient_dim(self) -> int:
        return sum(p.ambient_dim for p in self.parts)

    @property
    def tangent_dim(self) -> int:
        return sum(p.tangent_dim for p in self.parts)

    @property
    def aux_dim(self) -> int:
        return sum(p.aux_dim for p in self.parts)

    def plus(self, x: np.ndarray, d: np.ndarray) -> np.ndarray:
        a, t = self._slices("ambient_dim"), self._slices("tangent_dim")
        return np.concatenate(
            [p.plus(x[:, sa], d[:, st]) for p, sa, st in zip(self.parts, a, t, strict=False)], axis=1
        )

    def minus(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        a = self._slices("ambient_dim")
        return np.concatenate(
            [p.minus(y[:, sa], x[:, sa]) for p, sa in zip(self.parts, a, strict=False)], axis=1
        )

    def aux(self, x: np.ndarray) -> np.ndarray:
        a = self._slices("ambient_dim")
        return np.concatenate([p.aux(x[:, sa]) for p, sa in zip(self.parts, a, strict=False)], axis=1)

    def normalize(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(x)
        a = self._slices("ambient_dim")
        return np.concatenate([p.normalize(x[:, sa]) for p, sa in zip(self.parts, a, strict=False)], axis=1)

    def plus_linear_sym(self, x: ca.SX, d: ca.SX, aux: ca.SX) -> ca.SX:
        a, t, u = self._slices("ambient_dim"), self._slices("tangent_dim"), self._slices("aux_dim")
        return ca.vertcat(
            *[
                p.plus_linear_sym(x[sa.start : sa.stop], d[st.start : st.stop], aux[su.start : su.stop])
                for p, sa, st, su in zip(self.parts, a, t, u, strict=False)
            ]
        )

    def label(self, i: int) -> str:
        for k, s in enumerate(self._slices("tangent_dim")):
            if s.start <= i < s.stop:
                return f"{k}.{self.parts[k].label(i - s.start)}"
        raise IndexError(i)
