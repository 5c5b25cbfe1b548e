"""Base parameters and kinematics on a tree that is not TUlip: a branching chain with oblique axes."""

import numpy as np

from robots.com_base import derive_base, numeric_base, standard_names, standard_regressor
from robots.kinematics import com_position
from robots.tree import Joint, Link, ParameterSet, RobotModel, Site, offset3


def branching_tree() -> RobotModel:
    links = [Link("base", "0"), Link("a", "1"), Link("b", "2"), Link("c", "3"), Link("d", "4")]
    s = 1 / np.sqrt(2)
    joints = [
        Joint("j1", "base", "a", (0.0, 0.0, 1.0), offset3(0, 0, "h")),
        Joint("j2", "a", "b", (0.0, 1.0, 0.0), offset3("la", 0, 0)),
        Joint("j3", "b", "c", (0.0, 1.0, 0.0), offset3("lb", 0, 0)),
        Joint("j4", "base", "d", (s, s, 0.0), offset3(0, "w", 0)),
    ]
    sites = [Site("ground", "base", offset3(0, 0, 0))]
    rng = np.random.default_rng(5)
    names = [lk.name for lk in links]
    ps = ParameterSet(
        "p",
        {n: float(rng.uniform(0.5, 2)) for n in names},
        {n: tuple(rng.uniform(-0.1, 0.1, 3)) for n in names},
        {"h": 0.3, "la": 0.4, "lb": 0.25, "w": 0.2},
    )
    return RobotModel(
        "branch", links, joints, sites, -np.ones(4), np.ones(4), {"p": ps}, {"ground": "ground"}
    )


def test_generic_tree_base_parameters_reproduce_com_and_rank():
    m = branching_tree()
    bm = derive_base(m, "ground")
    q = np.random.default_rng(1).uniform(-np.pi, np.pi, size=(60, 4))
    com = np.einsum("bij,j->bi", bm.regressor(q), bm.values("p"))
    assert np.abs(com - com_position(m, q, "p", "ground")).max() < 1e-12
    Y = standard_regressor(m, q, "ground", "p")
    nb = numeric_base(Y, standard_names(m))
    assert bm.n == nb.rank == np.linalg.matrix_rank(bm.regressor(q).reshape(-1, bm.n))
    # fixed-base links: the base link's columns are constant, merged with each other where equal
    assert bm.n < 4 * len(m.links)
