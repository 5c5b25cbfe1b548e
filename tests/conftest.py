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
