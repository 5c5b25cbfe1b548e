"""Base parameters of definite sign (robots/base_sign.py), checked by brute force: over many random physically
consistent robots (point-mass clouds and random second moments per link, pseudo-inertias J ⪰ 0) a base parameter
flagged ≥ 0 (≤ 0) is never negative (positive), and one flagged neither takes both signs; and `identify dynamic`
naming the estimates of the wrong sign, within noise or not."""

import json

import numpy as np
import pytest

from identify.dynamic import IMPOSSIBLE_SE, DynamicFit
from robots.base_params import RegressorSpec, cached_dynamic_base, parse_regressor
from robots.base_sign import _OFF_DIAGONAL, definite_signs, link_matrix, signs_within
from robots.consistent_set import pseudo_inertia
from robots.registry import get_model

SAMPLES = 6000


def _standard(J: np.ndarray) -> np.ndarray:
    """A link's standard parameters [m, m·c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] of its pseudo-inertia J."""
    S = J[:3, :3]
    inertia = np.trace(S) * np.eye(3) - S
    return np.array(
        [J[3, 3], *J[:3, 3], *(inertia[r, c] for r, c in ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)))]
    )


def _consistent_robots(rng, links: int, zero: set[int], n: int) -> np.ndarray:
    """n random physically consistent standard vectors (n, 10·links): half with one link's body, half with a
    random third of the links'; each body 1–3 point masses (10 g…10 kg, 1 mm…2 m from the origin), some with a
    random second moment added; `zero`'s entries held at zero (J's off-diagonal entries, J shifted back into the
    PSD cone along the identity)."""
    out = np.zeros((n, 10 * links))
    for s in range(n):
        active = [rng.integers(links)] if rng.random() < 0.5 else np.flatnonzero(rng.random(links) < 0.3)
        for lk in active:
            J = np.zeros((4, 4))
            for _ in range(rng.integers(1, 4)):
                p = rng.standard_normal(3)
                p *= 10 ** rng.uniform(-3, 0.3) / np.linalg.norm(p)
                v = np.append(p, 1.0)
                J += 10 ** rng.uniform(-2, 1) * np.outer(v, v)
            if rng.random() < 0.3:
                L = rng.standard_normal((4, 4)) * 10 ** rng.uniform(-2, 0)
                L[3] = 0.0
                J += L @ L.T
            for i in range(10 * lk, 10 * lk + 10):
                if i in zero:
                    r, c = _OFF_DIAGONAL[i % 10]
                    J[r, c] = J[c, r] = 0.0
            J += max(0.0, -np.linalg.eigvalsh(J)[0]) * np.eye(4)
            assert np.linalg.eigvalsh(J)[0] >= -1e-12
            out[s, 10 * lk : 10 * lk + 10] = _standard(J)
    return out


def test_the_coefficient_matrix_reproduces_the_functional(rng):
    for _ in range(200):
        k, phi = rng.standard_normal(10), rng.standard_normal(10)
        C = link_matrix(k)
        assert np.allclose(C, C.T)
        assert np.trace(C @ pseudo_inertia(phi)) == pytest.approx(k @ phi, rel=1e-12, abs=1e-12)
        assert np.allclose(_standard(pseudo_inertia(phi)), phi)


@pytest.mark.parametrize(
    ("robot", "regressor", "simplified"),
    [
        ("ur5", "torque", False),
        ("tulip", "base-wrench:fz,mx,my", True),
        ("tulip", "base-wrench:fz,mx,my", False),
    ],
)
def test_signs_hold_over_random_consistent_robots(robot, regressor, simplified):
    model = get_model(robot)
    spec = RegressorSpec("torque", model.root) if regressor == "torque" else parse_regressor(regressor, model)
    db = cached_dynamic_base(model, spec, simplified)
    K = db.combination_matrix()
    signs = definite_signs(K, db.assumed_zero)
    assert np.count_nonzero(signs) >= 3 and np.count_nonzero(signs == 0) >= 10
    phis = _consistent_robots(np.random.default_rng(7), len(model.links), set(db.assumed_zero), SAMPLES)
    assert np.abs(phis[:, db.assumed_zero]).max(initial=0.0) == 0.0
    values = phis @ K.T
    tol = 1e-9 * np.abs(values).max(axis=0)
    wrong = [db.symbols[a] for a in range(db.rank) if np.any(signs[a] * values[:, a] < -tol[a])]
    assert wrong == []
    either = [db.symbols[a] for a in np.flatnonzero(signs == 0)
              if not (values[:, a].min() < -tol[a] and values[:, a].max() > tol[a])]  # fmt: skip
    assert either == []


def test_known_definite_combinations_of_the_ur5():
    model = get_model("ur5")
    db = cached_dynamic_base(model, RegressorSpec("torque", model.root))
    K, signs = db.combination_matrix(), definite_signs(db.combination_matrix())

    def row(terms: dict[str, float]) -> int:
        want = np.zeros(len(db.names))
        for name, c in terms.items():
            want[db.names.index(name)] = c
        (a,) = [a for a in range(db.rank) if np.allclose(K[a], want, atol=1e-9)]
        return int(a)

    # Ixx − Iyy − Izz = −2 Σxx ≤ 0; Iyy alone ≥ 0; Izz + Izz of two links ≥ 0
    w2, w3 = "wrist_2_link", "wrist_3_link"
    assert signs[row({f"Ixx@{w2}": 1, f"Iyy@{w2}": -1, f"Izz@{w2}": -1})] == -1
    assert signs[row({f"Iyy@{w3}": 1})] == 1
    assert signs[row({f"Izz@{w3}": 1, f"Izz@{w2}": 1})] == 1
    # a first moment's coefficient alone makes a sign indefinite
    assert all(signs[a] == 0 for a in range(db.rank) if db.names[db.independent[a]].startswith("mc"))


def test_a_grouped_rotor_inertias_coefficient_decides_too():
    k = np.zeros((1, 10))
    k[0, 6] = 1.0  # Iyy of one link: ≥ 0
    assert definite_signs(k)[0] == 1
    assert definite_signs(k, extra=np.array([[0.5]]))[0] == 1
    assert definite_signs(k, extra=np.array([[-0.5]]))[0] == 0
    assert definite_signs(-k, extra=np.array([[-0.5]]))[0] == -1


def test_held_zero_entries_widen_what_is_definite():
    k = np.zeros((1, 10))
    k[0, 6], k[0, 3] = 1.0, 0.2  # Iyy + 0.2·mcz: a mass at small negative z makes it negative …
    assert definite_signs(k)[0] == 0
    assert definite_signs(k, assumed_zero=[3])[0] == 1  # … unless the model holds mcz at zero


def _fit(values, se, signs, symbols=None, within=None) -> DynamicFit:
    n = len(values)
    symbols = symbols or [f"ϑ{i + 1}" for i in range(n)]
    z = np.zeros(n)
    return DynamicFit(symbols=symbols, formulas=["f"] * n, values=np.asarray(values, float), se=np.asarray(se, float),
                      rel_se_pct=z, sigma=z[:1], cov=np.eye(n), corr=np.eye(n), top_correlations=[], kappa=1.0,
                      rmse=z[:1], samples=10, unidentifiable=[], weighted=False, units=["kg·m²"] * n,
                      signs=list(signs), sign_within_m=within or [])  # fmt: skip


def test_wrong_signs_are_named_with_their_z():
    fit = _fit([-0.004, 0.3, -5.0, 0.2, -0.1, 0.1], [0.003, 0.1, 1.0, 0.03, 0.1, np.nan], [1, 1, 1, -1, 0, 1])
    found = fit.sign_violations()
    assert [d["symbol"] for d in found] == ["ϑ1", "ϑ3", "ϑ4"]
    by = {d["symbol"]: d for d in found}
    assert by["ϑ1"]["z"] == pytest.approx(-0.004 / 0.003) and by["ϑ1"]["within_noise"]
    assert by["ϑ3"]["z"] == pytest.approx(-5.0) and not by["ϑ3"]["within_noise"]
    assert (
        by["ϑ4"]["must_be"] == "≤ 0"
        and by["ϑ4"]["z"] == pytest.approx(0.2 / 0.03)
        and not by["ϑ4"]["within_noise"]
    )
    assert by["ϑ1"]["must_be"] == "≥ 0" and by["ϑ1"]["unit"] == "kg·m²"
    assert [d["symbol"] for d in fit.impossible()] == ["ϑ3", "ϑ4"]
    assert json.dumps(fit.to_dict()["sign_violations"], allow_nan=False)
    assert all(abs(d["z"]) >= IMPOSSIBLE_SE for d in fit.impossible())


def test_identify_dynamic_names_the_wrong_signs_within_noise(tmp_path, capsys):
    """A short, very noisy arm recording (effort noise 2 N·m): estimates of a definite sign land on the wrong side
    within noise; the JSON lists them with z and the text names them as within noise."""
    from test_identify_dynamic_review import _arm_recording  # noqa: PLC0415 (that module's recording)

    from poise.cli import main  # noqa: PLC0415

    path = _arm_recording(tmp_path, 5.0, 2.0)
    assert main(["identify", "dynamic", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {p["symbol"]: p for p in out["parameters"]}
    found = out["sign_violations"]
    assert found, "the noisy recording should give some estimate the wrong sign"
    friction = sorted(s for s, p in by.items() if s.startswith(("fv@", "fc@")) and p["value"] < 0)
    assert friction == sorted(d["symbol"] for d in found if d["symbol"].startswith(("fv@", "fc@")))
    model = get_model(out["robot_source"])
    db = cached_dynamic_base(model, RegressorSpec("torque", model.root))
    signs = definite_signs(db.combination_matrix())
    inertial = sorted(db.symbols[a] for a in range(db.rank) if signs[a] * by[db.symbols[a]]["value"] < 0)
    assert inertial == sorted(d["symbol"] for d in found if d["symbol"].startswith("ϑ"))
    for d in found:
        p = by[d["symbol"]]
        assert (
            d["value"] == p["value"] and d["se"] == p["se"] and d["z"] == pytest.approx(p["value"] / p["se"])
        )
        assert d["within_noise"] == (abs(d["z"]) < IMPOSSIBLE_SE)
    assert sorted(d["symbol"] for d in out["impossible"]) == sorted(
        d["symbol"] for d in found if not d["within_noise"]
    )
    assert main(["identify", "dynamic", str(path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    within = [d for d in found if d["within_noise"]]
    assert within and "within noise" in text
    line = text[text.index("within noise") :]
    for d in within:
        assert f"{d['symbol']} = {d['value']:.3g} ± {d['se']:.2g}" in line and f"z {d['z']:+.1f}" in line


def _point_masses(rng, links: int, radius: float, n: int) -> np.ndarray:
    """n random robots (n, 10·links) of point masses (the extreme rays of the mass distributions within `radius` of
    each link's origin): one to three on one link or on a random third of the links, half of them on the sphere."""
    out = np.zeros((n, 10 * links))
    for s in range(n):
        active = [rng.integers(links)] if rng.random() < 0.5 else np.flatnonzero(rng.random(links) < 0.3)
        for lk in active:
            for _ in range(rng.integers(1, 4)):
                p = rng.standard_normal(3)
                p *= radius * (1.0 if rng.random() < 0.5 else rng.random() ** (1 / 3)) / np.linalg.norm(p)
                m = 10 ** rng.uniform(-2, 1)
                inertia = m * (p @ p * np.eye(3) - np.outer(p, p))
                out[s, 10 * lk : 10 * lk + 10] += [m, *(m * p)] + [inertia[r, c] for r, c in
                                                                  ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))]  # fmt: skip
    return out


def test_a_sign_within_a_radius_holds_for_every_robot_that_compact():
    """TUlip's full ZMP base: parameters whose sign holds only for links whose mass lies within a radius (their
    lever arms' first moments) keep it over random point masses inside that radius, and lose it well outside."""
    model = get_model("tulip")
    db = cached_dynamic_base(model, parse_regressor("base-wrench:fz,mx,my", model))
    K = db.combination_matrix()
    signs, radius = signs_within(K)
    assert np.array_equal(np.where(np.isinf(radius), signs, 0), definite_signs(K))
    conditional = [a for a in np.flatnonzero(signs) if 0.05 < radius[a] < np.inf]
    assert len(conditional) >= 5
    rng = np.random.default_rng(11)
    lost = 0
    for a in conditional:
        inside = _point_masses(rng, len(model.links), radius[a], 1500) @ K[a]
        assert np.all(signs[a] * inside >= -1e-9 * np.abs(inside).max()), db.symbols[a]
        outside = _point_masses(rng, len(model.links), 3 * radius[a], 1500) @ K[a]
        lost += bool(np.any(signs[a] * outside < -1e-9 * np.abs(outside).max()))
    assert lost >= len(conditional) // 2


def test_a_sign_that_needs_compact_links_says_so_and_is_not_called_impossible():
    fit = _fit([-5.0, -5.0], [1.0, 1.0], [1, 1], within=[None, 0.45])
    found = {d["symbol"]: d for d in fit.sign_violations()}
    assert found["ϑ1"]["if_mass_within_m"] is None and found["ϑ2"]["if_mass_within_m"] == 0.45
    assert not found["ϑ2"]["within_noise"]
    assert [d["symbol"] for d in fit.impossible()] == ["ϑ1"]
