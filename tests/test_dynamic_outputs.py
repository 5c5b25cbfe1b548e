"""`identify dynamic` outputs the audit found untested: `--ols` against the default per-joint weighted LS, the most
correlated pairs of estimates (`top_correlations`), the parameters a rank-deficient recording names, and the
static identification's printed correlations.

The arm is the UR5 of example-robot-data on a hand-written 10 s Fourier motion (no design run), its efforts from
MuJoCo's inverse dynamics (independent of poise's RNEA) with viscous and Coulomb friction, exact encoders, and
effort noise added here, per joint."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import UR5

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts
from formats.dynamic_recording import DynamicRecording, write_dynamic_recording
from formats.static_recording import write_recording
from identify.dynamic import DynamicEstimator
from identify.synthetic import simulate_static
from poise.cli import main
from robots.params_io import perturbed, save_parameter_set
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory
from trajectories.verify import sample_grid

Q0 = np.array(
    [0.0, -1.2, 1.2, -1.5, -1.5, 0.0]
)  # rad: the arm bent, clear of the joint limits (±2π, elbow ±π)
RATE_HZ = 200.0
QUIET = 0.02  # N·m effort noise on every joint
# N·m per joint: shoulder and elbow 100× noisier than the wrist (efforts of 15–55 N·m against 1–3 N·m)
MIXED = np.array([2.0, 2.0, 2.0, 0.02, 0.02, 0.02])
LOUD, SOFT = slice(0, 3), slice(3, 6)


def _motion(frozen: int | None = None) -> FourierTrajectory:
    """Period 5 s, twice, three harmonics of random coefficients (|q̇| < 2.6 rad/s); `frozen`: that joint still."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.0, 0.5, (6, 3)), rng.normal(0.0, 0.5, (6, 3))
    if frozen is not None:
        a[frozen] = b[frozen] = 0.0
    return FourierTrajectory(5.0, 10.0, Q0, a, b)


def _twin(model, truth, traj):
    """(t, measured q, noise-free efforts): MuJoCo's inverse dynamics, viscous 0.3 N·m·s/rad, Coulomb 0.8 N·m."""
    t = sample_grid(traj, 1.0 / RATE_HZ)
    q, qd, qdd = traj.sample(t)
    qm, tau = arm_efforts(model, truth, q, qd, qdd, ArmImperfections(viscous=0.3, coulomb=0.8))
    return t, qm, tau


def _recording(model, t, q, tau) -> DynamicRecording:
    return DynamicRecording(
        model.name, model.root, list(model.joint_names), t, q, tau, meta={"robot_source": str(UR5)}
    )


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    """The model, its true parameters (file), the quiet recording (file) and the mixed-noise recording."""
    d = tmp_path_factory.mktemp("dynamic_outputs")
    model = get_model(str(UR5))
    truth = perturbed(model.parameter_set("urdf"), np.random.default_rng(7), 0.1, 0.01, inertia_rel=0.2)
    t, q, tau = _twin(model, truth, _motion())
    noise = np.random.default_rng(1).normal(0.0, 1.0, tau.shape)
    quiet = d / "quiet.csv"
    write_dynamic_recording(_recording(model, t, q, tau + QUIET * noise), quiet)
    truth_file = d / "truth.json"
    save_parameter_set(truth, truth_file)
    return model, truth, truth_file, quiet, _recording(model, t, q, tau + MIXED * noise)


@pytest.fixture(scope="module")
def mixed_fits(arm):
    """The mixed-noise recording fitted by weighted and by ordinary LS."""
    model, _, _, _, rec = arm
    return {w: DynamicEstimator(model, weighted=w).fit(rec) for w in (True, False)}


def _identify(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["identify", "dynamic", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_ols_and_wls_both_recover_the_truth_and_say_which_they_are(arm, capsys):
    """`--ols` on the CLI: the JSON names the estimator; on equal low noise both estimates lie within 3 SE of the
    true base parameters, and within a fraction of an SE of each other (near-equal weights)."""
    _, _, truth_file, quiet, _ = arm
    wls = _identify(capsys, str(quiet), "--reference", str(truth_file))
    ols = _identify(capsys, str(quiet), "--reference", str(truth_file), "--ols")
    assert (wls["estimator"], wls["weighted"]) == ("wls", True)
    assert (ols["estimator"], ols["weighted"]) == ("ols", False)
    for out in (wls, ols):
        ref = out["reference"]
        assert ref["estimated"] == 36 and ref["within_3se"] >= 0.9 * ref["estimated"], ref["z"]
        assert ref["max_abs_z"] < 4
        fric = {p["symbol"]: p["value"] for p in out["parameters"] if p["symbol"].startswith(("fv@", "fc@"))}
        assert len(fric) == 12
        assert all(v == pytest.approx(0.3 if s.startswith("fv") else 0.8, rel=0.05) for s, v in fric.items())
    assert [p["symbol"] for p in wls["parameters"]] == [p["symbol"] for p in ols["parameters"]]
    shift = [
        abs(w["value"] - o["value"]) / o["se"]
        for w, o in zip(wls["parameters"], ols["parameters"], strict=True)
    ]
    assert max(shift) < 1.0
    # the pairs in the JSON: [a, b, ρ], distinct estimates, |ρ| ≤ 1, most correlated first
    for out in (wls, ols):
        top = out["top_correlations"]
        symbols = {p["symbol"] for p in out["parameters"]}
        assert len(top) == 5 and all(len(c) == 3 and c[0] != c[1] and {c[0], c[1]} <= symbols for c in top)
        rho = np.abs([c[2] for c in top])
        assert np.all(rho <= 1.0) and np.all(np.diff(rho) <= 0)
    # the text report says which estimator ran and prints the first three pairs (no more)
    for extra, name, out in (([], "weighted least squares", wls), (["--ols"], "ordinary least squares", ols)):
        capsys.readouterr()
        assert main(["identify", "dynamic", str(quiet), *extra]) == 0
        text = capsys.readouterr().out
        assert name in text
        shown = [f"ρ({a},{b}) = {r:+.4f}" for a, b, r in out["top_correlations"]]
        assert all(p in text for p in shown[:3]) and shown[3] not in text


def test_adaptive_window_differentiation_on_the_command_line(arm, capsys):
    """`--differentiation adaptive`: q̇, q̈ by the iCub paper's adaptive windowing; the JSON and the report say so,
    and the estimates (another path to them) still lie within 3 SE of the truth."""
    _, _, truth_file, quiet, _ = arm
    low = _identify(capsys, str(quiet), "--reference", str(truth_file))
    out = _identify(capsys, str(quiet), "--reference", str(truth_file), "--differentiation", "adaptive")
    assert (low["differentiation"], out["differentiation"]) == ("butterworth", "adaptive")
    ref = out["reference"]
    assert ref["within_3se"] >= 0.9 * ref["estimated"], ref["z"]
    assert [p["value"] for p in out["parameters"]] != [p["value"] for p in low["parameters"]]
    assert main(["identify", "dynamic", str(quiet), "--differentiation", "adaptive"]) == 0
    assert "q̇, q̈ by adaptive windowing, zero-phase Butterworth cut-off" in capsys.readouterr().out


def test_weighted_ls_follows_the_per_joint_noise(arm, mixed_fits):
    """Noise 100× larger on three joints than on the other three. Recomputed from the estimator's own rows
    (regressor and filtered efforts): OLS is lstsq(A, b); WLS weights each joint's rows by 1/(its OLS residual σ),
    which here follow the noise; WLS then fits the quiet joints far better and determines what they see far
    better (smaller SEs), no parameter much worse — and both estimates stay within their SEs of the truth."""
    model, truth, _, _, rec = arm
    wls, ols = mixed_fits[True], mixed_fits[False]
    est = DynamicEstimator(model)
    A, joint, sample = est.prepare(rec)
    b = est.filtered_rows(rec.tau, rec.rate_hz)[sample, joint]  # each row: its sample's filtered effort
    x_ols = np.linalg.lstsq(A, b, rcond=None)[0]
    r = b - A @ x_ols
    w = 1.0 / np.array([r[joint == j].std() for j in range(model.nq)])
    x_wls = np.linalg.lstsq(A * w[joint][:, None], b * w[joint], rcond=None)[0]
    assert ols.fit_.samples == wls.fit_.samples == len(b)
    assert np.allclose(ols.fit_.values, x_ols, rtol=1e-9, atol=1e-12)
    assert np.allclose(wls.fit_.values, x_wls, rtol=1e-9, atol=1e-12)
    assert not np.allclose(wls.fit_.values, ols.fit_.values, rtol=1e-3)
    # the weights follow the noise: the quiet joints' rows count > 4× as much (noise ratio 100; filtering and the
    # loud joints' misfit leaking into the quiet ones' residuals shrink it)
    assert w[SOFT].min() > 4 * w[LOUD].max()  # measured 5.7
    assert wls.fit_.sigma[SOFT].max() < ols.fit_.sigma[SOFT].min() / 3
    assert wls.fit_.sigma[LOUD].min() > 10 * wls.fit_.sigma[SOFT].max()
    ratio = wls.fit_.se / ols.fit_.se
    assert np.median(ratio) < 0.5 and ratio.max() < 1.3, np.round(ratio, 2)
    nb = wls.fit_.inertial
    quiet_friction = [k for k, s in enumerate(wls.fit_.symbols) if s.startswith(("fv@wrist", "fc@wrist"))]
    assert np.all(ratio[quiet_friction] < 0.5)
    for e in (wls, ols):
        z = (e.fit_.values[:nb] - e.reference_values(truth)) / e.fit_.se[:nb]
        assert np.mean(np.abs(z) <= 3) >= 0.9 and np.abs(z).max() < 4, np.round(z, 1)


@pytest.mark.parametrize("weighted", [True, False], ids=["wls", "ols"])
def test_top_correlations_are_the_covariances_largest(mixed_fits, weighted):
    """`top_correlations`: the five pairs of estimates whose correlation — recomputed here from the fit's covariance
    as C_ij/√(C_ii C_jj) — is largest in magnitude, with that ρ, most correlated first; the SEs are the same
    covariance's."""
    fit = mixed_fits[weighted].fit_
    C = fit.cov
    sd = np.sqrt(np.diag(C))
    assert np.allclose(sd, fit.se, rtol=1e-12)
    R = C / np.outer(sd, sd)
    assert np.allclose(np.diag(R), 1.0) and np.allclose(R, R.T)
    assert np.all(np.abs(R) <= 1.0 + 1e-12)  # a covariance matrix: positive semi-definite
    assert np.linalg.eigvalsh(C).min() > 0
    index = {s: k for k, s in enumerate(fit.symbols)}
    top = fit.top_correlations
    assert len(top) == 5
    for a, b, rho in top:
        assert a != b
        assert rho == pytest.approx(R[index[a], index[b]], abs=1e-12)
    mags = np.abs([rho for *_, rho in top])
    assert np.all(mags <= 1.0) and np.all(np.diff(mags) <= 0)
    listed = {frozenset((index[a], index[b])) for a, b, _ in top}
    assert len(listed) == 5
    iu = np.triu_indices(len(fit.symbols), 1)
    others = [abs(R[i, j]) for i, j in zip(*iu, strict=True) if frozenset((i, j)) not in listed]
    assert max(others) <= mags[-1]
    # the same pairs in the result document
    assert fit.to_dict()["top_correlations"] == [[a, b, rho] for a, b, rho in top]


def test_a_joint_that_never_moves_names_a_complement_of_what_is_identifiable(arm, tmp_path, capsys):
    """The wrist_3 joint held still: its friction columns vanish (and its rows, all below the reversal velocity,
    are dropped) and the link's inertia merges with the wrist_2 link's. The refusal names exactly rank-deficiency
    many parameters, among them wrist_3's friction, and without the named ones the regressor has full rank."""
    model, truth, _, _, _ = arm
    t, q, tau = _twin(model, truth, _motion(frozen=5))
    tau += QUIET * np.random.default_rng(2).normal(0.0, 1.0, tau.shape)
    rec = _recording(model, t, q, tau)
    path = tmp_path / "frozen.csv"
    write_dynamic_recording(rec, path)
    capsys.readouterr()
    assert main(["identify", "dynamic", str(path)]) == 2
    err = capsys.readouterr().err
    m = re.search(r"does not excite (\d+) parameter\(s\): ([^(]*?)(?: \(|$)", err.strip())
    assert m, err
    named = m.group(2).split(", ")
    assert int(m.group(1)) == len(named) == len(set(named))
    est = DynamicEstimator(model)
    A, joint, _ = est.prepare(rec)
    symbols = est._names()[0]
    assert len(symbols) == A.shape[1] == 48
    assert model.nq - 1 not in set(joint)  # no row of the still joint is fitted
    rank = np.linalg.matrix_rank(A)
    assert len(named) == A.shape[1] - rank and rank < A.shape[1]
    assert {"fv@wrist_3_joint", "fc@wrist_3_joint"} <= set(named) <= set(symbols)
    keep = [k for k, s in enumerate(symbols) if s not in named]
    assert np.linalg.matrix_rank(A[:, keep]) == len(keep) == rank


def test_static_identification_prints_the_three_most_correlated_pairs(tulip, tmp_path, capsys):
    """`identify static`: the text names the three most correlated pairs with their ρ (4 decimals), the JSON's;
    the JSON's pairs carry its correlation matrix's entries, most correlated first."""
    path = tmp_path / "static.csv"
    write_recording(path, simulate_static(tulip, 16, "mc", cop_noise=0.003, seed=5))
    capsys.readouterr()
    assert main(["identify", "static", str(path), "--model", "simplified", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    top = doc["top_correlations"]
    syms, R = doc["correlation"]["symbols"], np.array(doc["correlation"]["matrix"])
    assert len(top) == 5
    for c in top:
        assert c["rho"] == pytest.approx(R[syms.index(c["a"]), syms.index(c["b"])], abs=1e-12)
    mags = np.abs([c["rho"] for c in top])
    assert np.all(mags <= 1.0) and np.all(np.diff(mags) <= 0)
    iu = np.triu_indices(len(syms), 1)
    assert np.sort(np.abs(R[iu]))[::-1][:5] == pytest.approx(mags, abs=1e-12)
    assert main(["identify", "static", str(path), "--model", "simplified"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    expected = ", ".join(f"ρ({c['a']},{c['b']}) = {c['rho']:+.4f}" for c in top[:3])
    assert f"most correlated: {expected}" in text, text
    assert f"ρ({top[3]['a']},{top[3]['b']})" not in text  # three, not more


def test_every_estimate_carries_its_unit(mixed_fits):
    """Units in the table and the JSON: a base parameter's is its leading standard parameter's (kg, kg·m, kg·m²),
    friction's N·m·s/rad and N·m on revolute joints."""
    fit = mixed_fits[True].fit_
    assert len(fit.units) == len(fit.symbols)
    lead = {"m": "kg", "mcx": "kg·m", "mcy": "kg·m", "mcz": "kg·m"}
    for s, f, u in zip(fit.symbols[: fit.inertial], fit.formulas, fit.units, strict=False):
        assert u == lead.get(f.split("@")[0], "kg·m²"), (s, f, u)
    assert {u for u in fit.units[: fit.inertial]} == {
        "kg·m",
        "kg·m²",
    }  # UR5: no lone mass is a base parameter
    friction = dict(zip(fit.symbols[fit.inertial :], fit.units[fit.inertial :], strict=True))
    assert {u for s, u in friction.items() if s.startswith("fv@")} == {"N·m·s/rad"}
    assert {u for s, u in friction.items() if s.startswith("fc@")} == {"N·m"}
    assert [p["unit"] for p in fit.to_dict()["parameters"]] == fit.units
