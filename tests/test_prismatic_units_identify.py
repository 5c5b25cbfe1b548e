"""A prismatic joint in `identify dynamic`: the velocity under which a joint's rows around its velocity reversals
are dropped (the Coulomb friction's sign is not trusted there) is named in m/s on a slide, rad/s on a hinge."""

from __future__ import annotations

import numpy as np
import pytest

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError, IdentifiabilityError
from identify.dynamic import DynamicEstimator, reversal_velocity_for
from robots import dynamics as dyn
from robots.registry import get_model
from tests.test_prismatic_review import LIFT  # the reviewer's robot: a 0.5 m lift, then two hinges

CUTOFF_HZ = 2.0


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "lift.urdf"
    path.write_text(LIFT)
    return get_model(str(path))


def _recording(model, lift_amplitude: float, seconds: float = 20.0, rate: float = 200.0) -> DynamicRecording:
    """The hinges swing through several harmonics; the lift oscillates by `lift_amplitude` m at 0.2 Hz; efforts
    from poise's inverse dynamics with viscous 0.3 and Coulomb 0.8 friction on every joint."""
    t = np.arange(0.0, seconds, 1.0 / rate)
    w = 2 * np.pi * np.array([0.2, 0.3, 0.5, 0.7])
    phase = np.array([[0.0, 0.4, 1.1, 2.0], [0.7, 1.9, 0.2, 2.8]])
    amp = np.array([[0.0, 0.5, 0.3, 0.2], [0.6, 0.2, 0.3, 0.25]])
    q = np.zeros((t.size, 3))
    qd = np.zeros_like(q)
    qdd = np.zeros_like(q)
    q[:, 0] = 0.25 + lift_amplitude * np.sin(w[0] * t)
    qd[:, 0] = lift_amplitude * w[0] * np.cos(w[0] * t)
    qdd[:, 0] = -lift_amplitude * w[0] ** 2 * np.sin(w[0] * t)
    for j in (1, 2):
        arg = np.outer(t, w) + phase[j - 1]
        q[:, j] = np.sin(arg) @ amp[j - 1]
        qd[:, j] = np.cos(arg) @ (amp[j - 1] * w)
        qdd[:, j] = -np.sin(arg) @ (amp[j - 1] * w**2)
    tau = dyn.rnea(model, q, qd, qdd, next(iter(model.params))) + 0.3 * qd + 0.8 * np.sign(qd)
    return DynamicRecording(model.name, model.root, list(model.joint_names), t, q, tau)


def test_a_slow_lift_is_refused_with_its_threshold_in_metres_per_second(model):
    """The lift never moves faster than the reversal threshold: every row carrying its friction is dropped, and
    the refusal names that threshold in m/s for the lift (and rad/s for the hinges), not in rad/s alone."""
    v = reversal_velocity_for(CUTOFF_HZ)
    rec = _recording(model, lift_amplitude=0.2 * v / (2 * np.pi * 0.2))  # peak speed 0.2 v
    est = DynamicEstimator(model, cutoff_hz=CUTOFF_HZ)
    with pytest.raises((IdentifiabilityError, DataError)) as info:
        est.fit(rec)
    msg = str(info.value)
    assert "fc@lift" in msg or "fv@lift" in msg, msg
    assert f"{v:.3g} m/s on the prismatic joint lift" in msg, msg
    assert f"slower than {v:.3g} rad/s" in msg, msg


def test_a_lift_that_moves_is_fitted_and_its_unit_label_is_m_per_s(model):
    """The same robot with the lift moving well above the threshold fits (so the refusal above is the slow lift's),
    and the estimator states each joint's velocity unit: m/s on the lift, rad/s on the hinges."""
    v = reversal_velocity_for(CUTOFF_HZ)
    rec = _recording(model, lift_amplitude=0.1)  # peak 0.126 m/s, 10× the threshold
    est = DynamicEstimator(model, cutoff_hz=CUTOFF_HZ).fit(rec)
    assert est.fit_.reversal_rows > 0
    assert est.velocity_units() == {"lift": "m/s", "j1": "rad/s", "j2": "rad/s"}
    assert est.reversal_text() == f"{v:.3g} rad/s, {v:.3g} m/s on the prismatic joint lift"
