"""Base parameters of the dynamic regressors: TUlip's ZMP-model ranks (spec tulip-com.md §6, oracle 4), the
base form reproduces the regressor, motion classes, and `poise model show --regressor`."""

import json

import numpy as np
import pytest

from poise.cli import main
from robots import dynamics as dyn
from robots.base_params import cached_dynamic_base, parse_regressor, random_states, zero_set
from robots.motion_class import sample_states
from robots.tulip import tulip


@pytest.fixture(scope="module")
def model():
    return tulip()


def test_zmp_model_ranks_85_full_and_44_simplified(model):
    spec = parse_regressor("base-wrench:fz,mx,my", model)
    assert spec.base == "right" and spec.rows == ("fz", "mx", "my")
    assert cached_dynamic_base(model, spec).rank == 85
    assert cached_dynamic_base(model, spec, simplified=True).rank == 44


def test_base_form_reproduces_the_regressor(model, rng):
    spec = parse_regressor("base-wrench:fz,mx,my", model)
    db = cached_dynamic_base(model, spec)
    phi = dyn.standard_parameters(model, "sim")
    q, qd, qdd = random_states(model, 7, rng)
    W = dyn.base_wrench_regressor(model, q, qd, qdd, "right")[:, [2, 3, 4], :]
    direct = W @ phi
    assert np.abs(direct).max() > 1.0  # Fz ≈ M g: not a trivial comparison
    assert np.allclose(db.reduce(W) @ db.values(phi), direct, rtol=0, atol=1e-9)
    # the simplified base form holds for parameters that obey the simplification
    simp = cached_dynamic_base(model, spec, simplified=True)
    phi_s = phi.copy()
    phi_s[simp.assumed_zero] = 0.0
    assert np.allclose(simp.reduce(W) @ simp.values(phi_s), W @ phi_s, rtol=0, atol=1e-9)
    # ... and not for parameters that do not
    assert not np.allclose(simp.reduce(W) @ simp.values(phi), direct, atol=1e-6)


def test_zmp_total_mass_group_and_torso_offset_match_table_5_1(model):
    """ϑb,2 = c0x·m0 = −0.240 kg·m and ϑb,5 = c0y·m0 − l0y·(m0 + … + m6) = −1.698 kg·m (thesis Table 5.1)."""
    db = cached_dynamic_base(model, parse_regressor("base-wrench:fz,mx,my", model), simplified=True)
    values = dict(
        zip(
            [db.formula(a) for a in range(db.rank)],
            db.values(dyn.standard_parameters(model, "sim")),
            strict=True,
        )
    )
    by_lead = {f.split(" ")[0]: v for f, v in values.items()}
    assert by_lead["mcx@torso"] == pytest.approx(-0.240, abs=5e-4)
    assert by_lead["mcy@torso"] == pytest.approx(-1.698, abs=5e-4)


def test_torque_regressor_base_parameters_name_what_never_enters(model):
    spec = parse_regressor("torque", model)
    db = cached_dynamic_base(model, spec)
    names = set(db.names[i] for i in db.vanishing)
    # the fixed torso never moves; a hip-z link turns about the vertical: only its Izz enters the torques
    assert {n for n in db.names if n.endswith("@torso")} <= names
    assert {n for n in db.names if n.endswith("@hip_r_z")} - names == {"Izz@hip_r_z"}
    assert db.rank == 72 and db.rank <= 130 - len(names)


def test_double_support_states_keep_the_other_sole_still(model, rng):
    q, qd, qdd = sample_states(model, "double-support", 4, rng, "right")
    J = dyn.frame_jacobian(model, q, "sole_l", "right")
    assert np.abs(np.einsum("bij,bj->bi", J, qd)).max() < 1e-12
    assert np.abs(dyn.frame_acceleration(model, q, qd, qdd, "sole_l", "right")).max() < 1e-12
    assert np.abs(qd).max() > 0.1 and np.abs(qdd).max() > 0.1


def test_frame_acceleration_is_the_time_derivative_of_the_jacobian_velocity(model, rng):
    q, qd, qdd = (x[0] for x in random_states(model, 1, rng))
    h = 1e-6

    def vel(qq, vv):
        return dyn.frame_jacobian(model, qq, "sole_l", "right") @ vv

    num = (
        vel(q + h * qd + h * h / 2 * qdd, qd + h * qdd) - vel(q - h * qd + h * h / 2 * qdd, qd - h * qdd)
    ) / (2 * h)
    assert np.allclose(num, dyn.frame_acceleration(model, q, qd, qdd, "sole_l", "right"), atol=1e-7)


def test_double_support_identifies_fewer_zmp_parameters(model):
    spec = parse_regressor("base-wrench:fz,mx,my", model)
    free = cached_dynamic_base(model, spec).rank
    ds = cached_dynamic_base(model, spec, False, "double-support").rank
    assert 44 < ds < free


def test_symbolic_regressors_equal_numeric(model, rng):
    q, qd, qdd = random_states(model, 3, rng)
    f = dyn.base_wrench_regressor_function(model, "right").map(3)
    Ws = np.array(f(q.T, qd.T, qdd.T)).reshape(6, 3, 130).transpose(1, 0, 2)
    assert np.allclose(Ws, dyn.base_wrench_regressor(model, q, qd, qdd, "right"), atol=1e-11)
    g = dyn.subtree_wrench_regressor_function(model, "theta4")
    W = dyn.subtree_wrench_regressor(model, q, qd, qdd, "theta4")
    assert np.allclose(np.array(g(q[0], qd[0], qdd[0])), W[0], atol=1e-11)


def test_zero_set_patterns_and_errors(model):
    idx = zero_set(model, ["mcz@hip_?_x"])
    assert [dyn.standard_names(model)[i] for i in idx] == ["mcz@hip_r_x", "mcz@hip_l_x"]
    with pytest.raises(Exception, match="matches no standard parameter"):
        zero_set(model, ["Ixx@wing"])


def test_model_show_regressor_json(capsys):
    assert (
        main(["model", "show", "tulip", "--regressor", "base-wrench:fz,mx,my", "--simplified", "--json"]) == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["rank"] == 44 and d["rows"] == ["fz", "mx", "my"] and len(d["base_parameters"]) == 44
    assert d["warnings"]  # Table D.3's hip-z and leg inertias violate the triangle inequality


@pytest.mark.parametrize("arg", ["bogus", "ft:", "base-wrench:fq"])
def test_model_show_bad_regressor_is_a_clear_error(arg, capsys):
    assert main(["model", "show", "tulip", "--regressor", arg]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("poise: error:") and "Traceback" not in err
