import numpy as np
import pytest

from robots.tulip import tulip


@pytest.fixture(scope="session")
def model():
    return tulip()


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)
