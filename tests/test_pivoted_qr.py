"""Base parameters do not depend on the machine: the pivoted QR that chooses them breaks ties by column index,
not by the BLAS kernels' rounding (LAPACK's did: the iCub arm's base differed between two CPUs)."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg

from formats.errors import DataError
from robots.base_params import RegressorSpec, evaluate
from robots.com_base import numeric_base, pivoted_qr
from robots.dynamics import standard_names
from robots.motion_class import sample_states
from robots.registry import get_model


def test_the_factorisation_is_a_qr_of_the_permuted_columns():
    Y = np.random.default_rng(0).normal(size=(30, 8)) @ np.diag([1, 5, 2, 9, 3, 7, 4, 6])
    R, piv = pivoted_qr(Y)
    assert sorted(piv) == list(range(8))
    assert np.allclose(R.T @ R, Y[:, piv].T @ Y[:, piv], rtol=1e-12, atol=1e-9)
    assert np.all(np.diff(np.abs(np.diag(R))) <= 1e-12)  # pivots by decreasing remaining norm
    assert piv[0] == 3  # the largest column first


def test_tied_columns_go_to_the_lowest_index_whatever_the_rounding():
    """A column equal to another but for its last bits loses to the lower index; LAPACK takes the larger."""
    rng = np.random.default_rng(1)
    a, b = 3 * rng.normal(size=20), rng.normal(size=20)
    Y = np.column_stack([b, a, a * (1 + 4e-14)])
    assert scipy.linalg.qr(Y, pivoting=True)[2][0] == 2
    _, piv = pivoted_qr(Y)
    assert piv[0] == 1
    nb = numeric_base(Y, ["b", "a", "a'"])
    assert nb.rank == 2 and sorted(nb.names) == ["a", "b"] and nb.dependent == [2]
    assert np.allclose(Y[:, nb.independent] @ nb.beta, Y[:, nb.dependent], rtol=1e-12)


def test_a_regressor_with_nan_is_refused_not_pivoted():
    Y = np.random.default_rng(0).normal(size=(10, 3))
    Y[4, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        numeric_base(Y, ["a", "b", "c"])


@pytest.mark.parametrize("robot", ["icub-right-arm", "tulip"])
def test_the_base_does_not_depend_on_the_order_of_the_rows(robot):
    """Reordering the samples changes every sum's rounding, as another CPU's kernels do. Measured (40 samples,
    eight row orders): LAPACK's pivoting chose 3 different independent sets for the iCub arm and 5 for TUlip's
    joint torques; this QR one each."""
    m = get_model(robot)
    names = standard_names(m)
    q, qd, qdd = sample_states(m, "free", 40, np.random.default_rng(0), None)
    Y = evaluate(m, RegressorSpec("torque", m.root), q, qd, qdd).reshape(-1, len(names))
    norms = np.linalg.norm(Y, axis=0)
    Y = Y[:, norms > 1e-10 * norms.max()]
    labels = [str(i) for i in range(Y.shape[1])]
    first = numeric_base(Y, labels)
    for seed in range(1, 8):
        rows = np.random.default_rng(seed).permutation(Y.shape[0])
        nb = numeric_base(Y[rows], labels)
        assert nb.rank == first.rank and sorted(nb.independent) == sorted(first.independent)


def _avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512f" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(platform.machine() != "x86_64" or not _avx512(), reason="needs a CPU with AVX-512")
def test_the_icub_base_is_the_same_under_two_cpus_kernels():
    """The iCub arm's base parameters under OpenBLAS's Haswell and SkylakeX kernels (before: two different
    sets, so a `--focus ϑN` from one machine meant another combination on the other)."""
    code = (
        "from robots.registry import get_model; from robots.base_params import cached_dynamic_base, "
        "RegressorSpec; m = get_model('icub-right-arm'); "
        "print(cached_dynamic_base(m, RegressorSpec('torque', m.root)).independent)"
    )
    out = []
    for core in ("Haswell", "SkylakeX"):
        env = {**os.environ, "OPENBLAS_CORETYPE": core, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        out.append(run.stdout.strip())
    assert out[0] == out[1] and out[0].startswith("[")
