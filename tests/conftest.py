import gc
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does (poise/cli.py); before numpy loads

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from robots.tulip import tulip  # noqa: E402


@pytest.fixture(scope="session")
def model():
    return tulip()


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)


_module = [None]


def pytest_runtest_setup(item):
    """Freeze what earlier test modules left alive (one process holds many CasADi/MuJoCo/Pyomo models): a full
    collection over it stalls every thread for 100–200 ms, and the emulated devices answering the drivers run as
    threads here, unlike real hardware."""
    if item.module is not _module[0]:
        _module[0] = item.module
        gc.collect()
        gc.freeze()
