"""Doggy as a robot description (robots/data/doggy) loaded by the same code as every robot: the loaded facts
equal the values previously typed into robots/doggy.py (the paper's eqs 10–12, 24–29, 35–37 and Table 1), and
the URDF's rigid bodies reproduce the CAD link inertia M(q) of eq 10."""

from dataclasses import replace

import numpy as np
import pytest

from formats.errors import DataError
from identify import doggy as dg
from robots import doggy
from robots import dynamics as dyn
from robots.registry import get_model

DEG = np.pi / 180.0
P = np.array([[0.0, 0.0, 1.0], [0.0, -1.0, 0.0], [1.0, 0.0, 0.0]])


def _typed_mass_matrix(q) -> np.ndarray:
    """Eq 10 as previously typed (g·m² → kg·m²)."""
    c2, s2, c3, s3 = np.cos(q[1]), np.sin(q[1]), np.cos(q[2]), np.sin(q[2])
    m11 = (1.824 * c2 * s2 - 2.975 * c2**2 - 503.760 * c2**2 * c3**2 + 0.106 * c2**2 * c3 * s3
           + 0.183 * c2 * c3 * s2 - 0.138 * c2 * s2 * s3 + 1012.973)  # fmt: skip
    m12 = (0.8192 * s2 - 8.5760 * c2 + 0.0691 * c3 * s2 + 0.0916 * s2 * s3 - 0.1062 * c2 * c3**2
           - 503.7604 * c2 * c3 * s3)  # fmt: skip
    m13 = 514.2253 * s2 + 0.0916 * c2 * c3 - 0.0691 * c2 * s3
    m22 = 503.7604 * c3**2 - 0.0531 * np.sin(2 * q[2]) + 40.0367
    m23 = 0.0691 * c3 + 0.0916 * s3
    return 1e-3 * np.array([[m11, m12, m13], [m12, m22, m23], [m13, m23, 514.2253]])


def _rx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _orth(R):
    U, _, Vt = np.linalg.svd(R)
    return U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt


def test_doggy_is_a_built_in_description():
    m = get_model("doggy")
    assert m is get_model("doggy") and m.joint_names == ["q1", "q2", "q3"]
    assert {s.name for s in m.sites} >= {"imu1", "imu2", "eof"}
    assert [lk.name for lk in m.links] == ["base", "body1", "body2", "head"] and not m.warnings
    rb = doggy.robot()
    assert rb.model is m and rb.joints == ("q1", "q2", "q3")


def test_loaded_constants_equal_the_previously_typed_ones():
    rb = doggy.robot()
    assert (rb.gear_ratio, rb.supply_voltage, rb.friction_slope, rb.pwm_limit) == (42.092, 32.0, 200.0, 1.0)
    assert doggy.N_GEAR == 42.092 and doggy.U_MAX == 32.0 and doggy.FRICTION_SLOPE == 200.0
    assert doggy.PHYS_NAMES == [
        "k_pwm", "k_mi", "b", "mu_fm1", "mu_fm2", "mu_fm3", "k_s1", "k_s2", "k_s3", "d_s1", "d_s2", "d_s3",
    ]  # fmt: skip
    assert (
        doggy.PHYS_UNITS
        == ["N·m/V", "N·m·s/rad", "kg·m²"] + ["N·m"] * 3 + ["N·m/rad"] * 3 + ["N·m·s/rad"] * 3
    )
    R1 = np.array([[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, -1.0, 0.0]]).T
    assert np.array_equal(doggy.R_IMU1_NOMINAL, R1) and np.array_equal(doggy.R_IMU2_NOMINAL, P.T)
    assert (rb.sigma_encoder, rb.sigma_gyro, rb.rate_hz) == (6.9259e-5, 1.745e-3, 1000.0)
    assert (
        dg.SIGMA_ENC == 6.9259e-5
        and dg.SIGMA_GYRO == 1.745e-3
        and tuple(rb.setpoint_range) == (1.0, 0.6, 0.6)
    )
    var = np.concatenate([np.full(3, 1e-12), np.full(3, 1.21e-4), np.full(3, 1e-12), np.full(3, 6.889e-5)])
    assert np.array_equal(dg.SIGMA_DYN, np.sqrt(var))
    assert np.array_equal(
        dg.SIGMA_INITIAL, np.sqrt(np.concatenate([np.full(3, 0.0076), np.full(6, 6.9259e-5**2)]))
    )


def test_table_1_sets_equal_the_previously_typed_ones():
    ini, ide = doggy.TABLE1_INITIAL, doggy.TABLE1_IDENTIFIED
    assert np.array_equal(ini.phys(), [3.487, 15.563, 2.681, 2, 2, 2, 400, 400, 600, 1, 1, 1])
    assert np.array_equal(
        ide.phys(),
        [4.696, 31.328, 2.428, 1.599, 2.565, 4.855, 187.555, 120.070, 103.056, 5.335, 4.143, 8.043],
    )
    assert np.array_equal(ini.bias1, DEG * np.array([2.615, 0.014, -1.273]))
    assert np.array_equal(ini.bias2, DEG * np.array([2.723, -0.102, -0.652]))
    assert np.array_equal(ide.bias2, DEG * np.array([2.723, -0.103, -0.652]))
    assert np.array_equal(ini.R_imu1, doggy.R_IMU1_NOMINAL) and np.array_equal(
        ini.R_imu2, doggy.R_IMU2_NOMINAL
    )
    R1 = _orth(np.array([[-0.999, -0.0439, -0.0199], [0.0189, 0.0219, -0.999], [0.044, -0.999, -0.020]]).T)
    R2 = _orth(np.array([[-0.009, 0.027, 0.999], [0.030, -0.999, 0.027], [0.999, 0.030, 0.008]]).T)
    # an SVD apart (multithreaded LAPACK may differ in the last bit between two calls)
    np.testing.assert_allclose(ide.R_imu1, R1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ide.R_imu2, R2, rtol=0, atol=1e-15)


def test_model_functions_equal_the_previously_typed_ones(rng):
    f = doggy.numeric()
    for _ in range(5):
        q, qd = rng.uniform(-np.pi, np.pi, 3), rng.normal(size=3)
        np.testing.assert_allclose(np.asarray(f["M"](q)), _typed_mass_matrix(q), rtol=0, atol=1e-15)
        np.testing.assert_allclose(
            np.asarray(f["head_rotation"](q)), _ry(q[1]) @ _rx(-q[2]) @ P.T, atol=1e-15
        )
        rate = [np.sin(q[2]) * qd[1], -np.cos(q[2]) * qd[1], -qd[2]]
        np.testing.assert_allclose(np.asarray(f["joint_rate_eof"](q, qd)).ravel(), rate, atol=1e-15)
        R = doggy.world_to_frame1(q)
        np.testing.assert_allclose(np.asarray(R, dtype=float), _rz(q[0]).T, atol=1e-15)


def test_urdf_rigid_bodies_reproduce_the_cad_mass_matrix(rng):
    """The URDF's inertias are one consistent rigid-body realisation of eq 10: RNEA's M(q) equals it to the
    print precision of eq 10 (2.5e-4 g·m²)."""
    m = get_model("doggy")
    q = rng.uniform(-np.pi, np.pi, (8, 3))
    zero = np.zeros_like(q)
    for b in range(len(q)):
        M = np.column_stack(
            [
                dyn.rnea(m, q[b], zero[b], np.eye(3)[k], "urdf", gravity=(0.0, 0.0, 0.0)).ravel()
                for k in range(3)
            ]
        )
        np.testing.assert_allclose(M, _typed_mass_matrix(q[b]), rtol=0, atol=2.5e-7)


def test_bad_doggy_descriptions_are_clear_errors():
    m = get_model("doggy")
    with pytest.raises(DataError, match=r"no \[sensors\] section"):
        doggy.from_model(replace(m, extra={k: v for k, v in m.extra.items() if k != "sensors"}))
    fj = dict(m.extra["flexible_joints"], joints=["q2", "q1", "q3"])
    with pytest.raises(DataError, match="must be the model's coordinates"):
        doggy.from_model(replace(m, extra={**m.extra, "flexible_joints": fj}))
    mm = {k: v for k, v in m.extra["flexible_joints"]["mass_matrix"].items() if k != "m23"}
    with pytest.raises(DataError, match="m23"):
        doggy.from_model(
            replace(
                m, extra={**m.extra, "flexible_joints": {**m.extra["flexible_joints"], "mass_matrix": mm}}
            )
        )
    bad = {**m.extra["flexible_joints"]["mass_matrix"], "m33": "514.2253*c7"}
    rb = doggy.from_model(
        replace(m, extra={**m.extra, "flexible_joints": {**m.extra["flexible_joints"], "mass_matrix": bad}})
    )
    with pytest.raises(DataError, match="unknown symbol 'c7'"):
        doggy.mass_matrix(np.zeros(3), rb)
