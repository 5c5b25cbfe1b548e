"""`poise demo arm|standing`'s closing verdict for a person, in both modes: what was identified, whether it met its
target (the arm: validation torque RMS ≤ 5 % of the measured; standing: every base parameter within 3 SE of the
twin's truth), the figures with units, and where the figures are. The identification runs once, its own text
shown, and writes beside it (`identify dynamic --json-out`) the JSON its --json prints: the verdict's source in
both modes — that file checked here against --json's output on the same simulated recordings. The demo's other
steps are stand-ins (tests/test_demo_review_folder.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import simulated_recording

import poise.cli
import poise.output
from poise.cli import main
from poise.workflows.dynamic_demo import (
    ARM_VALIDATION_TARGET_PCT,
    IDENTIFY_JSON,
    OUTPUTS,
    dynamic_verdict,
    verdict_lines,
)
from tests.test_demo_review_folder import _fake_steps

DATA = Path(__file__).parent / "data"
PLANS = {"arm": DATA / "ur5_6s.json", "standing": DATA / "tulip_double_support_10s.json"}
# the options the demo's identification step adds for each pipeline (dynamic_demo.arm_steps, standing_steps)
FIT_OPTIONS = {"arm": [], "standing": ["--simplified", "--no-friction"]}


@pytest.fixture(scope="module", params=["arm", "standing"])
def recordings(request, tmp_path_factory) -> tuple[str, list[str]]:
    """A pipeline's plan simulated twice on one truth (the second under another noise seed): (pipeline, the
    `identify dynamic` argv the demo's last step would run on them, without --plot)."""
    pipeline = request.param
    folder = tmp_path_factory.mktemp(pipeline)
    truth = folder / "truth.json"
    first = simulated_recording(folder, PLANS[pipeline], 200.0, "--truth-out", str(truth))
    other = simulated_recording(folder, PLANS[pipeline], 200.0, "--truth", str(truth), "--seed", "1",
                                name="validation.csv")  # fmt: skip
    argv = ["identify", "dynamic", str(first), *FIT_OPTIONS[pipeline], "--reference", str(truth), "--validate",
            str(other)]  # fmt: skip
    return pipeline, argv


def test_json_out_writes_what_json_prints_while_the_text_goes_to_stdout(recordings, tmp_path, capsys):
    pipeline, argv = recordings
    written = tmp_path / "fit.json"
    assert main([*argv, "--json-out", str(written)]) == 0
    text = capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    printed = capsys.readouterr().out
    assert written.read_text(encoding="utf-8") == printed  # the same object, serialised the same way
    assert "within 3 SE of" in text and "validation on" in text and not text.lstrip().startswith("{")
    # with --json too: stdout the JSON, the file the same
    both = tmp_path / "both.json"
    assert main([*argv, "--json", "--json-out", str(both)]) == 0
    assert capsys.readouterr().out == printed == both.read_text(encoding="utf-8")
    fit = json.loads(printed)
    said = dynamic_verdict(pipeline, tmp_path, json.loads(written.read_text(encoding="utf-8")))
    assert (said["within_3se"], said["within_3se_of"]) == (
        fit["reference"]["within_3se"],
        fit["reference"]["estimated"],
    )
    assert said["validation_rms_pct"] == fit["validation"]["total_relative_pct"] is not None
    assert (pipeline == "arm") == (said["joints_within_3se"] is not None)  # standing: --no-friction


def _fit(total_pct: float, within: int, of: int = 36, rows=None) -> dict:
    """An `identify dynamic --json` result as the verdict reads it."""
    rows = rows or {"shoulder_pan_joint N·m": 2.04, "wrist_2_joint N·m": 21.06}
    return {
        "well_pct": 15.0, "determined": ["ϑ3", "ϑ10"], "not_determined": [f"ϑ{k}" for k in range(11, 11 + of - 2)],
        "reference": {"estimated": of, "within_3se": within, "max_abs_z": 2.634,
                      "joints": {"estimated": 12, "within_3se": 6}},
        "validation": {"total_relative_pct": total_pct, "rows": list(rows), "relative_pct": list(rows.values())},
    }  # fmt: skip


def test_the_arm_verdict_says_whether_the_validation_met_its_target(tmp_path):
    (tmp_path / "efforts.png").write_text("a figure")
    met = verdict_lines(dynamic_verdict("arm", tmp_path, _fit(4.716, 36)))
    assert (
        met[0]
        == "poise demo arm: identified the UR5's base inertial parameters and joint friction from its motor currents"
    )
    assert met[1] == (
        "validation torque RMS 4.72 % of the measured RMS (target ≤ 5 %): met; per joint 2.0–21.1 %"
    )
    assert met[2] == ("36/36 base parameters within 3 SE of the twin's truth, max |z| 2.63; the joints' friction and "
                      "rotor inertia 6/12")  # fmt: skip
    assert met[3] == "2 of 36 base parameters determined to < 15 % relative SE by the estimation run: ϑ3, ϑ10"
    assert met[-1].startswith(f"figures: {tmp_path / 'efforts.png'} (")
    assert met[-1].endswith(f"plans and runs in {tmp_path}/")
    missed = verdict_lines(dynamic_verdict("arm", tmp_path, _fit(ARM_VALIDATION_TARGET_PCT + 0.01, 36)))
    assert missed[1].startswith("validation torque RMS 5.01 % of the measured RMS (target ≤ 5 %): missed")
    # judged as shown: 5.004 % shows as 5.00 %, as the identification's own text prints it
    shown = verdict_lines(dynamic_verdict("arm", tmp_path, _fit(5.004, 36)))[1]
    assert "5.00 % of the measured RMS (target ≤ 5 %): met" in shown


def test_the_standing_verdict_is_every_parameter_within_3_se(tmp_path):
    rows = {"Fz N": 0.1, "Mx N·m": 2.44, "My N·m": 4.66}
    fit = _fit(0.317, 37, 37, rows) | {"not_determined": [f"ϑ{k}" for k in range(3, 38)]}
    fit["reference"].pop("joints")
    met = verdict_lines(dynamic_verdict("standing", tmp_path, fit))
    assert met[1] == "37/37 base parameters within 3 SE of the twin's truth, max |z| 2.63 (target: all): met"
    assert met[2] == ("validation wrench RMS 0.32 % of the measured RMS, pooled over Fz, Mx, My (mostly Fz's "
                      "weight); per row Fz 0.1 %, Mx 2.4 %, My 4.7 %")  # fmt: skip
    assert met[-1] == f"plans and runs in {tmp_path}/"  # no figure written: none named
    fit["reference"]["within_3se"] = 36
    assert verdict_lines(dynamic_verdict("standing", tmp_path, fit))[1].endswith("(target: all): missed")


def test_a_verdict_the_result_does_not_hold_is_not_known(tmp_path):
    said = dynamic_verdict(
        "arm", tmp_path, {"well_pct": 15.0, "determined": [], "not_determined": ["ϑ1", "ϑ2"]}
    )
    lines = verdict_lines(said)
    assert "(target ≤ 5 %): not known" in lines[1] and "not in the identification's output" in lines[2]
    assert lines[3] == "0 of 2 base parameters determined to < 15 % relative SE by the estimation run: none"


def _demo_with_real_identification(monkeypatch, argv: list[str]) -> list[list[str]]:
    """The demo's steps as stand-ins (`_fake_steps`), but its identification the real one on `argv`'s
    recordings, writing its JSON where the demo's step says (its figure a stand-in where the demo says)."""
    real, ran = main, _fake_steps(monkeypatch)
    fake = poise.cli.main

    def steps(step: list[str]) -> int:
        if step[:2] != ["identify", "dynamic"]:
            return fake(step)
        ran.append(step)
        Path(step[step.index("--plot") + 1]).write_text("a figure")  # not drawn: the demo's own tests draw it
        given = [o for o in ("--json", "--json-out") if o in step]
        return real([*argv, *(["--json"] if "--json" in given else []),
                     *(["--json-out", step[step.index("--json-out") + 1]] if "--json-out" in given else [])])  # fmt: skip

    monkeypatch.setattr(poise.cli, "main", steps)
    return ran


def test_the_demo_prints_its_verdict_after_the_identifications_output(
    recordings, tmp_path, monkeypatch, capsys
):
    pipeline, argv = recordings
    d = tmp_path / pipeline
    ran = _demo_with_real_identification(monkeypatch, argv)
    assert main(["demo", pipeline, "--out", str(d)]) == 0
    out = capsys.readouterr().out
    fits = [a for a in ran if a[:2] == ["identify", "dynamic"]]
    assert len(fits) == 1 and "--json" not in fits[0]  # run once, its text shown
    assert fits[0][-2:] == ["--json-out", str(d / IDENTIFY_JSON)]  # and its JSON written beside it
    fit = json.loads((d / IDENTIFY_JSON).read_text(encoding="utf-8"))
    shown = out.index("within 3 SE of")  # the identification's own output, echoed
    verdict = out.index(f"poise demo {pipeline}: identified")
    assert shown < verdict
    lines = out[verdict:].strip().splitlines()
    assert lines == verdict_lines(dynamic_verdict(pipeline, d, fit))  # the verdict: the file's figures
    figure = d / OUTPUTS[pipeline][-1]
    assert figure.is_file() and lines[-1].startswith("figures: ") and f"{figure} (" in lines[-1]
    assert any(" base parameters within 3 SE of the twin's truth, max |z| " in line for line in lines)
    assert not any("not known" in line or "not in the identification's output" in line for line in lines)
    # --json: stdout its verdict alone (as before), the identification's text and the same lines on stderr
    ran.clear()
    assert main(["demo", pipeline, "--out", str(d), "--json"]) == 0
    io = capsys.readouterr()
    verdict = json.loads(io.out)
    assert verdict["ok"] and verdict["identification"]["validation"]["total_relative_pct"] is not None
    assert verdict["identification"] == json.loads((d / IDENTIFY_JSON).read_text(encoding="utf-8"))
    assert str(d / IDENTIFY_JSON) in verdict["written"]
    assert "within 3 SE of" in io.err and all(line in io.err for line in verdict_lines(verdict))
    step = [a for a in ran if a[:2] == ["identify", "dynamic"]][0]
    assert "--json" not in step and step[-2:] == ["--json-out", str(d / IDENTIFY_JSON)]
    assert verdict_lines(verdict) == lines  # the same numbers either way
