"""Review of `plan forecast`, `plan sample` and `plan reach`: the tare line says where its σ came from and an arm's
--tare-kg is refused; an arm's setpoints declare no `# motion:` (a standing class only), and a torque recording
declaring one is told so; `plan reach --help` says a standing robot needs its motion class; the forecast JSON names
its values `value` and says once what they are (`params`), and the summary is worded from what --params gave."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from formats.dynamic_recording import read_dynamic_recording
from formats.errors import DataError
from poise.cli import main

DATA = Path(__file__).parent / "data"
TULIP = DATA / "tulip_double_support_10s.json"
UR5 = DATA / "ur5_6s.json"
NOISE = ["--noise", "0.49", "1.42", "1.29"]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def tulip_forecast():
    """The standing plan's forecast JSON with the default tare."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["plan", "forecast", str(TULIP), *NOISE, "--json"]) == 0
    return json.loads(buf.getvalue())


# 6. the tare sentence and --tare-kg on an arm


@pytest.mark.parametrize("tare", ["0", "0.05"])
def test_a_given_tare_is_not_called_the_thesis_boards(tare, capsys):
    assert main(["plan", "forecast", str(TULIP), *NOISE, "--tare-kg", tare]) == 0
    out = _flat(capsys.readouterr().out)
    assert "thesis's boards" not in out and "--tare-kg" in out
    if tare == "0":
        assert "σ 0 kg" not in out and "leave out the board tare" in out
    else:
        assert "σ 0.05 kg (--tare-kg)" in out


def test_the_default_tare_says_it_is_the_default(capsys):
    assert main(["plan", "forecast", str(TULIP), *NOISE]) == 0
    out = _flat(capsys.readouterr().out)
    assert "(the default: the thesis's boards tared on 1 s" in out


def test_an_arms_tare_is_refused_in_one_line(capsys):
    assert main(["plan", "forecast", str(UR5), "--noise", "0.1", "--tare-kg", "0.05"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    err = cap.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "--tare-kg" in err and "standing plans" in err and str(UR5) in err


def test_an_arm_forecast_without_tare_still_runs(capsys):
    assert main(["plan", "forecast", str(UR5), "--noise", "0.1", "--json"]) == 0
    assert "tare_mass_sd_kg" not in json.loads(capsys.readouterr().out)


# 7. `plan sample`'s motion line and a torque recording declaring one


def test_an_arms_setpoints_declare_no_motion(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["plan", "sample", str(UR5), "--out", str(out), "--json"]) == 0
    head = [line for line in out.read_text().splitlines() if line.startswith("#")]
    assert head and not any(line.startswith("# motion:") for line in head)
    assert (
        json.loads(capsys.readouterr().out)["motion"] == "free"
    )  # the plan's class, as its settings name it


def test_a_standing_plans_setpoints_still_declare_theirs(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["plan", "sample", str(TULIP), "--out", str(out)]) == 0
    assert "# motion: double-support" in out.read_text().splitlines()


def _recording(path: Path, motion: str, wrench: bool) -> Path:
    cols = "t_s,q:j1," + ("fz_n,mx_nm,my_nm" if wrench else "tau:j1")
    rows = [f"{k * 0.01:g},0.1," + ("250,0.1,0.2" if wrench else "0.5") for k in range(5)]
    path.write_text("\n".join(["# poise dynamic recording v1", "# robot: ur5", "# base: world",
                               f"# motion: {motion}", cols, *rows]) + "\n")  # fmt: skip
    return path


def test_a_torque_recording_declaring_a_motion_is_told_to_drop_the_line(tmp_path):
    path = _recording(tmp_path / "r.csv", "free", wrench=False)
    with pytest.raises(DataError) as exc:
        read_dynamic_recording(path)
    msg = str(exc.value)
    assert "joint efforts" in msg and "drop the line" in msg and "(the default)" not in msg


def test_a_wrench_recordings_unknown_motion_names_the_standing_classes(tmp_path):
    path = _recording(tmp_path / "r.csv", "free", wrench=True)
    with pytest.raises(
        DataError, match=r"motion 'free' unknown: double-support \(the default\) or single-support"
    ):
        read_dynamic_recording(path)


# 8. plan reach --help on --motion


def test_reach_help_says_a_standing_robot_needs_its_motion_class(capsys):
    assert main(["plan", "reach", "--help"]) == 0
    out = _flat(capsys.readouterr().out)
    assert "a standing robot" in out and "needs its class given" in out
    assert "free (a fixed-base arm, the default)" not in out


def test_trajectory_help_keeps_free_as_the_default(capsys):
    assert main(["plan", "trajectory", "--help"]) == 0
    assert "free (a fixed-base arm, the default)" in _flat(capsys.readouterr().out)


# 9. the forecast JSON's names and the summary's words


def test_forecast_parameters_carry_value(tulip_forecast):
    params = tulip_forecast["parameters"]
    assert all("value" in p for p in params)
    assert any(p["value"] not in (None, 0) for p in params)
    assert all("guess" not in p for p in params)  # one name for one number


def test_forecast_json_says_once_what_its_values_are(tulip_forecast):
    assert "against" not in tulip_forecast and tulip_forecast["params"] == "sim"


def _base(doc: dict) -> list[dict]:
    """The forecast's base parameters (before its friction or rotor inertia, if any)."""
    nb = sum(len(doc[k]) for k in ("determined", "determined_if_repeated", "beyond_practical", "zero_guess"))
    return doc["parameters"][:nb]


def test_a_forecast_against_a_result_words_its_summary_from_it(tulip_forecast, tmp_path, capsys):
    result = {"robot": tulip_forecast["robot"], "sigma_nm": [0.3, 0.5, 0.4],
              "parameters": [{"symbol": p["symbol"], "formula": p["formula"], "value": 2.0 * p["value"]}
                             for p in _base(tulip_forecast)]}  # fmt: skip
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(result))
    assert main(["plan", "forecast", str(TULIP), *NOISE, "--params", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert str(path) in doc["params"] and "against" not in doc
    assert [p["value"] for p in _base(doc)] == pytest.approx([r["value"] for r in result["parameters"]])
    assert main(["plan", "forecast", str(TULIP), *NOISE, "--params", str(path)]) == 0
    out = _flat(capsys.readouterr().out)
    assert "guessed 0" not in out and "estimated 0" in out
    assert "give --params with a previous identify dynamic" not in out and "that fit's estimates" in out


def test_a_forecast_against_a_guess_keeps_its_advice(capsys):
    assert main(["plan", "forecast", str(TULIP), *NOISE]) == 0
    out = _flat(capsys.readouterr().out)
    assert "guessed 0" in out and "give --params with a previous identify dynamic --json result" in out
