"""A recording with a gap (samples lost, a logger stalled — on the twin one tick came 0.44 s late under load and
the run's residual σ tripled): the zero-phase filter and the noise model need uniform samples, so `identify
dynamic` fits the pieces either side as recordings of their own, names the gap, and drops a piece too short for
the cut-off. Checked on the stored double-support design with the model's own wrench and white noise."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TEST_DESIGN, design_wrench

from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError
from identify.dynamic import DynamicEstimator
from poise.cli import main

RATE = 100.0
MOMENT_Z = -0.053
SIGMA = np.array([1.0, 0.1, 0.1])  # N, N·m, N·m per sample


@pytest.fixture(scope="module")
def recording():
    tulip, t, q, w = design_wrench(2, RATE, MOMENT_Z)  # two periods of the periodic design
    wrench = np.zeros((t.size, 6))
    wrench[:, 2:5] = w + np.random.default_rng(5).normal(size=w.shape) * SIGMA
    meta = {"motion_band_hz": "0.3", "moment_z_m": str(MOMENT_Z)}
    return tulip, DynamicRecording("tulip", "right", list(tulip.joint_names), t, q, wrench=wrench, meta=meta)


def _cut(rec: DynamicRecording, keep: np.ndarray) -> DynamicRecording:
    return DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t[keep], rec.q[keep],
                            wrench=rec.wrench[keep], meta=rec.meta)  # fmt: skip


def _fit(tulip, recs, cutoff=1.2) -> DynamicEstimator:
    return DynamicEstimator(tulip, "right", True, False, quantity="wrench", cutoff_hz=cutoff).fit(recs)


def test_a_gapped_recording_is_fitted_as_its_pieces(recording):
    tulip, rec = recording
    t = rec.t
    lost = (t > 8.0) & (t < 8.5)  # 0.5 s of samples lost
    gapped = _cut(rec, ~lost)
    est = _fit(tulip, gapped)
    pieces = _fit(tulip, [_cut(rec, t <= 8.0), _cut(rec, t >= 8.5)])
    assert est.fit_.values == pytest.approx(pieces.fit_.values, rel=1e-12, abs=1e-12)
    assert est.fit_.se == pytest.approx(pieces.fit_.se, rel=1e-9)
    assert est.fit_.gaps == [{"recording": 1, "from_s": pytest.approx(8.0), "to_s": pytest.approx(8.5)}]
    assert est.fit_.dropped == []
    # the pieces' time is what is fitted: the gap's 0.5 s less the two extra filter edges
    whole = _fit(tulip, rec)
    edge = whole.fit_.edges_s
    assert est.fit_.fitted_s == pytest.approx(whole.fit_.fitted_s - 0.5 - edge, abs=0.1)
    nb = est.fit_.inertial
    z = (est.fit_.values[:nb] - est.reference_values("sim")) / est.fit_.se[:nb]
    assert np.abs(z).max() < 4.0


def test_a_piece_too_short_for_the_cutoff_is_dropped_and_named(recording):
    tulip, rec = recording
    t = rec.t
    keep = ~(
        ((t > 5.0) & (t < 5.5)) | ((t > 6.5) & (t < 7.0))
    )  # leaves 5.5–6.5 s: under 2 × 1/1.2 Hz of edges
    est = _fit(tulip, _cut(rec, keep))
    assert len(est.fit_.gaps) == 2
    assert est.fit_.dropped == [{"recording": 1, "from_s": pytest.approx(5.5), "to_s": pytest.approx(6.5)}]
    only = _fit(tulip, [_cut(rec, t <= 5.0), _cut(rec, t >= 7.0)])
    assert est.fit_.values == pytest.approx(only.fit_.values, rel=1e-12, abs=1e-12)


def test_a_recording_of_short_pieces_only_is_refused(recording):
    tulip, rec = recording
    keep = (np.arange(rec.t.size) // 60) % 2 == 0  # 0.6 s on, 0.6 s off
    with pytest.raises(DataError, match="too short"):
        _fit(tulip, _cut(rec, keep))


def test_identify_dynamic_names_the_gap(recording, tmp_path, capsys):
    tulip, rec = recording
    path = tmp_path / "gapped.csv"
    write_dynamic_recording(_cut(rec, ~((rec.t > 8.0) & (rec.t < 8.5))), path)
    argv = ["identify", "dynamic", str(path), "--simplified", "--no-friction", "--cutoff-hz", "1.2"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(g["from_s"], g["to_s"]) for g in out["gaps"]] == [(pytest.approx(8.0), pytest.approx(8.5))]
    assert main(argv + ["--plot", str(tmp_path / "fit.png")]) == 0  # the boards' rows, not the joints'
    assert "no samples from 8.000 to 8.500 s" in capsys.readouterr().out
    assert (tmp_path / "fit.png").stat().st_size > 10_000
    # the figure's time axis: each predicted row's recording time, none inside the gap
    gapped = _cut(rec, ~((rec.t > 8.0) & (rec.t < 8.5)))
    est = _fit(tulip, gapped)
    t_rows = est.predicted_times(gapped)
    assert len(t_rows) == len(est.predict(gapped)[0]) and np.all(np.diff(t_rows) > 0)
    assert not np.any((t_rows > 8.0) & (t_rows < 8.5)) and t_rows[0] > rec.t[0] and t_rows[-1] < rec.t[-1]


def test_instruments_follow_the_plan_time_the_run_recorded(recording, tmp_path, capsys):
    """`--instruments` takes the planned angles at `t_plan_s` (the plan time commanded at each sample), not at
    `t_s`: a recording whose run clock runs 0.5 s ahead of its plan (a stall before it) is refused without the
    column — its times leave the plan's span — and fitted with it, the IV estimate within 3 SE of the truth."""
    tulip, rec = recording
    one = rec.t <= 10.0  # the stored plan's one period
    shifted = DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t[one] + 0.5, rec.q[one],
                               wrench=rec.wrench[one], meta=rec.meta)  # fmt: skip
    argv = [
        "identify",
        "dynamic",
        str(tmp_path / "r.csv"),
        "--simplified",
        "--no-friction",
        "--cutoff-hz",
        "1.2",
    ]
    argv += ["--instruments", str(TEST_DESIGN), "--reference", "sim", "--json"]
    write_dynamic_recording(shifted, tmp_path / "r.csv")
    assert main(argv) != 0
    assert "not a recording of this plan" in capsys.readouterr().err
    shifted.t_plan = rec.t[one]
    write_dynamic_recording(shifted, tmp_path / "r.csv")
    assert read_dynamic_recording(tmp_path / "r.csv").t_plan == pytest.approx(rec.t[one])
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["estimator"] == "iv"
    assert out["reference"]["max_abs_z"] < 3.5
