"""Declaring a least-squares problem: variables (families of manifold elements) and factors (residual blocks).

A *variable* is a family of `count` elements of one manifold, e.g. all N robot states or one rotation. Families
marked `eliminate=True` (per-time-step states) are eliminated by the structured solver; the rest form the dense
parameter border. A *factor* is one CasADi function of the variables it touches (plus per-instance data),
instantiated K times with index arrays saying which element of each variable instance k touches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from formats.errors import PoiseError
from identify.slom.loss import Loss


@dataclass
class Variable:
    """A family of `count` manifold elements; `values` is (count, ambient_dim)."""

    name: str
    manifold: object
    values: np.ndarray
    eliminate: bool
    fixed: bool = False
    labels: list[str] | None = None  # one name per tangent component, for reports

    @property
    def count(self) -> int:
        return self.values.shape[0]

    def __getitem__(self, idx) -> VarRef:
        return VarRef(self.name, np.arange(self.count)[idx])

    def component_labels(self) -> list[str]:
        if self.labels is not None:
            return list(self.labels)
        return [f"{self.name}[{self.manifold.label(i)}]" for i in range(self.manifold.tangent_dim)]


@dataclass(frozen=True)
class VarRef:
    """Which element of variable `name` each factor instance touches (`index` is None → element 0 for all)."""

    name: str
    index: np.ndarray | None = None


@dataclass
class Factor:
    """K instances of a residual block r = fn(variables…, data…), whitened by the covariance `cov`."""

    name: str
    fn: ca.Function
    variables: list[VarRef]
    data: list[np.ndarray]
    sqrt_info: np.ndarray  # L with LᵀL = Σ⁻¹ (d×d); whitened residual = L r
    count: int
    loss: Loss | None = None

    @property
    def dim(self) -> int:
        return self.fn.size1_out(0)


@dataclass
class Problem:
    """Container for variables and factors; see `add_variable`, `add_factor`, `identify.slom.solve`."""

    variables: dict[str, Variable] = field(default_factory=dict)
    factors: list[Factor] = field(default_factory=list)

    def add_variable(
        self,
        name: str,
        manifold,
        initial,
        *,
        eliminate: bool | None = None,
        fixed: bool = False,
        labels: list[str] | None = None,
    ) -> Variable:
        """Add a family; `initial` is (count, ambient) or a single element. Families of > 1 are eliminated."""
        vals = np.atleast_2d(np.asarray(initial, dtype=float))
        if vals.shape[1] != manifold.ambient_dim:
            raise PoiseError(
                f"variable {name!r}: expected ambient dim {manifold.ambient_dim}, got {vals.shape[1]}"
            )
        if name in self.variables:
            raise PoiseError(f"variable {name!r} declared twice")
        if eliminate is None:
            eliminate = vals.shape[0] > 1
        var = Variable(name, manifold, manifold.normalize(vals), eliminate, fixed, labels)
        self.variables[name] = var
        return var

    def add_factor(
        self,
        name: str,
        fn: ca.Function,
        variables: list[VarRef | Variable],
        data: list | None = None,
        *,
        cov=None,
        sigma=None,
        loss: Loss | None = None,
        count: int | None = None,
    ) -> Factor:
        """Add K instances of `fn`; give the noise as `sigma` (std per component) or `cov` (d×d)."""
        refs = [v[:] if isinstance(v, Variable) and v.count > 1 else _as_ref(v) for v in variables]
        data = [np.asarray(d, dtype=float) for d in (data or [])]
        counts = {len(r.index) for r in refs if r.index is not None}
        counts |= {d.shape[0] for d in data if d.ndim == 2}
        if count is not None:
            counts.add(count)
        if len(counts) > 1:
            raise PoiseError(f"factor {name!r}: inconsistent instance counts {sorted(counts)}")
        K = counts.pop() if counts else 1
        d = fn.size1_out(0)
        if fn.n_in() != len(refs) + len(data):
            raise PoiseError(
                f"factor {name!r}: function takes {fn.n_in()} inputs, got {len(refs) + len(data)}"
            )
        for i, r in enumerate(refs):
            var = self.variables[r.name]
            if fn.size1_in(i) != var.manifold.ambient_dim:
                raise PoiseError(f"factor {name!r}: input {i} does not match variable {r.name!r}")
            if r.index is not None and (r.index.min() < 0 or r.index.max() >= var.count):
                raise PoiseError(f"factor {name!r}: index out of range for variable {r.name!r}")
        if cov is None:
            s = np.broadcast_to(np.asarray(1.0 if sigma is None else sigma, float), (d,))
            L = np.diag(1.0 / s)
        else:
            cov = np.asarray(cov, float)
            L = np.linalg.inv(np.linalg.cholesky(cov))  # (L Σ Lᵀ = I)
        f = Factor(name, fn, refs, data, L, K, loss)
        self.factors.append(f)
        return f

    def value(self, name: str) -> np.ndarray:
        return self.variables[name].values


def _as_ref(v) -> VarRef:
    if isinstance(v, VarRef):
        return v
    if isinstance(v, Variable):
        return VarRef(v.name, None)
    if isinstance(v, str):
        return VarRef(v, None)
    raise TypeError(f"not a variable reference: {v!r}")
