"""SLOM-style sparse least squares on manifolds: declare variables and residual blocks, then `solve`."""

from identify.slom.loss import Cauchy, Huber, Loss
from identify.slom.problem import Factor, Problem, Variable, VarRef
from identify.slom.solver import BlockStats, IterationLog, Options, RankReport, SolveResult, solve

__all__ = [
    "BlockStats",
    "Cauchy",
    "Factor",
    "Huber",
    "IterationLog",
    "Loss",
    "Options",
    "Problem",
    "RankReport",
    "SolveResult",
    "VarRef",
    "Variable",
    "solve",
]
