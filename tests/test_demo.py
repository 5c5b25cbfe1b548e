"""`poise demo` end to end on the physics twin (smaller and faster than the default): design, run through the real
drivers on the emulated bench, identify; every posture must be executed and reported (the kinematic robot's demo:
tests/test_demo_kinematic.py, a module of its own so the two run side by side)."""

import json

import numpy as np
import pytest
from scipy import stats

from poise.cli import main


@pytest.mark.slow
def test_demo_pipeline_on_the_physics_twin(tmp_path, capsys):
    """Poise's design and executor on the twin (the default robot). A run that loses a posture (a lightly loaded
    sole lifts and slides under the stiff legs' internal forces, then the robot tips) must stop like a safety
    trip with every completed posture kept and identified; a complete run must report every posture, give its
    estimates within 3 SE of the twin's truth as a family (issue 12; below) and predict the boards' CoP at least
    as well as the true parameters. Measured (sole pads, moves at the robot's rate) max |z| 2.65 and 1.91 (this
    seed and scale), 1.82 (make demo), 1.65 and 4.16 (seeds 2, 3: README, the physics twin's demo)."""
    argv = [
        "demo",
        "--out",
        str(tmp_path),
        "--postures",
        "18",
        "--hold-s",
        "6",
        "--time-scale",
        "6",  # the drivers follow the twin's simulated time (bench clock): a slower machine only takes longer
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["physics"] == "mujoco" and out["se_bound"] == 3 and out["planned"] == 18
    assert out["standing_count"] == 18  # each posture stood alone on the twin first (deterministic: sim time)
    report = out["execution"]
    assert [r["posture"] for r in report] == list(range(out["executed"]))
    assert all(r["min_margin_mm"] is not None and r["hold_tracking_max_deg"] < 5 for r in report)
    assert out["twin_timing"]["sim_s"] > 0
    if out["stopped"] is not None:  # a fall or tip: stopped like a safety trip, the completed postures kept
        assert "run stopped" in out["stopped"] or "tracking error" in out["stopped"]
        assert out["executed"] >= 1 and (out["executed"] < 13 or len(out["parameters"]) == 13)
        assert {e["kind"] for e in out["twin_events"]} & {"fall", "edge", "lift"}
        return
    assert out["executed"] == 18
    assert not [e for e in out["twin_events"] if e["kind"] in ("fall", "feet-contact")]
    assert np.median([r["min_margin_mm"] for r in report]) > 20.0  # measured CoP well inside, typically
    # within 3 SE as a family of 13 t-statistics on 2·18 − 13 = 23 dof: even an exact model puts one of them beyond
    # 3 in 8 % of realisations, two beyond 3 in 0.3 %, and any beyond the Bonferroni bound (1 %: 3.87) in 1 %. The
    # twin's 4096-tick encoders are most of its CoP misfit (README), fixed per posture, so this seed's realisation
    # repeats: ϑ23 at −2.0…−3.1 SE over eight loaded runs (max |z| 2.39–3.13), −2.8 without noise, 3.65 once in CI
    z = np.array([p["z"] for p in out["parameters"]])
    dof = 2 * out["executed"] - z.size
    assert np.sum(z > 3.0) <= 1 and z.max() <= stats.t.ppf(1 - 0.01 / (2 * z.size), dof), np.round(z, 2)
    err = out["cop_error_m"]
    # rms: least squares' measure (the mean of the norms measured 1.11 mm with the estimates, 0.95 with the truth)
    assert err["estimated"]["rms"] <= 1.1 * err["true"]["rms"]
    assert err["estimated"]["mean"] < err["guess (Table D.1)"]["mean"]
