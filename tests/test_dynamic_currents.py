"""`identify dynamic` from motor currents: `i:JOINT` columns (A) × torque constants (N·m/A, the recording's
`# torque_constant:JOINT:` lines or `--torque-constant`) give the estimates of the torque recording they came from;
the columns and constants round-trip; bad currents and constants are one-line CLI errors."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from conftest import UR5

from formats.dynamic_recording import (
    DynamicRecording,
    DynamicRecordingAppender,
    efforts_from_currents,
    read_dynamic_recording,
    write_dynamic_recording,
)
from formats.errors import DataError
from poise.cli import main

K = (12.5, 20.0, 8.0, 3.0, 2.5, 1.5)  # N·m/A at the joints (torque constant × gear ratio × efficiency)


def _as_currents(rec: DynamicRecording, k, recorded: dict[str, float] | None = None) -> DynamicRecording:
    """The torque recording as a current logger would have written it: i = τ / k, `recorded` as its metadata."""
    k = np.broadcast_to(np.asarray(k, dtype=float), (len(rec.joint_names),))
    return replace(rec, tau=None, current=rec.tau / k, torque_constant=dict(recorded or {}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A UR5 plan (few iterations: any exciting motion will do) simulated twice on the twin — the fit and the
    validation recordings in torques — and the same two in currents with the constants K in their metadata."""
    d = tmp_path_factory.mktemp("currents")
    plan, truth = d / "plan.json", d / "truth.json"
    argv = ["plan", "trajectory", str(UR5), "--out", str(plan), "--duration", "10", "--period", "5"]
    assert main(argv + ["--harmonics", "3", "--samples", "24", "--max-iter", "3", "--json"]) == 0
    rec, rec_o = d / "rec.csv", d / "rec_o.csv"
    assert main(["simulate", "trajectory", str(plan), "--out", str(rec), "--truth-out", str(truth)]) == 0
    assert (
        main(["simulate", "trajectory", str(plan), "--out", str(rec_o), "--truth", str(truth), "--seed", "5"])
        == 0
    )
    names = read_dynamic_recording(rec).joint_names
    cur, cur_o = d / "cur.csv", d / "cur_o.csv"
    for src, dst in ((rec, cur), (rec_o, cur_o)):
        write_dynamic_recording(
            _as_currents(read_dynamic_recording(src), K, dict(zip(names, K, strict=True))), dst
        )
    return {"dir": d, "truth": truth, "rec": rec, "rec_o": rec_o, "cur": cur, "cur_o": cur_o, "joints": names}


def _identify(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["identify", "dynamic", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _same_estimates(a: dict, b: dict) -> None:
    """One fit's estimates and SEs equal another's, to 1e-6 of their SEs (the CSV's 10 digits)."""
    assert [p["symbol"] for p in a["parameters"]] == [p["symbol"] for p in b["parameters"]]
    va, vb = (np.array([p["value"] for p in x["parameters"]]) for x in (a, b))
    se = np.array([p["se"] for p in a["parameters"]])
    assert np.all(np.abs(va - vb) <= 1e-6 * se), np.max(np.abs(va - vb) / se)
    assert np.allclose([p["se"] for p in b["parameters"]], se, rtol=1e-6)


def test_currents_times_constants_identify_as_the_torques(runs, capsys):
    """Fit, reference and validation from the currents and their recorded constants: those of the torques."""
    common = ["--reference", runs["truth"]]
    tau = _identify(capsys, runs["rec"], "--validate", runs["rec_o"], *common)
    cur = _identify(capsys, runs["cur"], "--validate", runs["cur_o"], *common)
    _same_estimates(tau, cur)
    assert cur["reference"]["within_3se"] == tau["reference"]["within_3se"]
    assert np.allclose(cur["validation"]["rmse_nm"], tau["validation"]["rmse_nm"], rtol=1e-6)
    assert cur["validation"]["total_relative_pct"] < 5  # the prediction is good, in N·m
    assert "efforts_from_currents" not in tau
    used = cur["efforts_from_currents"]
    assert [(u["recording"], u["role"]) for u in used] == [
        (str(runs["cur"]), "fit"),
        (str(runs["cur_o"]), "validation"),
    ]
    for u in used:
        assert u["torque_constant_nm_per_a"] == dict(zip(runs["joints"], K, strict=True))
        assert set(u["from"].values()) == {"recording"}
    # validated against a torque recording: only the fitted one is named as currents
    mixed = _identify(capsys, runs["cur"], "--validate", runs["rec_o"])
    assert [u["role"] for u in mixed["efforts_from_currents"]] == ["fit"]
    assert np.allclose(mixed["validation"]["rmse_nm"], tau["validation"]["rmse_nm"], rtol=1e-6)
    # and the text report says where the torques came from, with the constants
    assert main(["identify", "dynamic", str(runs["cur"])]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "joint torques from motor currents × torque constants (N·m/A)" in text
    assert f"{runs['joints'][0]} 12.5 (recording)" in text


def test_the_option_overrides_the_recorded_constants(runs, capsys):
    """`--torque-constant JOINT=K,…` over wrong metadata, and one K for every joint without any, give the torques'
    estimates; the wrong metadata alone is warned of (its torques ~10× below the robot's dynamics)."""
    d, names = runs["dir"], runs["joints"]
    rec = read_dynamic_recording(runs["rec"])
    tau = _identify(capsys, runs["rec"])
    wrong = d / "wrong.csv"
    write_dynamic_recording(_as_currents(rec, K, dict.fromkeys(names, 1.0)), wrong)
    far = _identify(capsys, wrong)[
        "effort_scale_far_off"
    ]  # the wrong constants alone: ~10× too small, warned
    assert far and "torque constant" in json.dumps(far)
    option = ",".join(f"{j}={k}" for j, k in zip(names, K, strict=True))
    over = _identify(capsys, wrong, "--torque-constant", option)
    _same_estimates(tau, over)
    assert set(over["efforts_from_currents"][0]["from"].values()) == {"--torque-constant"}
    # partly from the option, partly from the recording
    partial = d / "partial.csv"
    write_dynamic_recording(_as_currents(rec, K, dict(zip(names[2:], K[2:], strict=True))), partial)
    both = _identify(capsys, partial, "--torque-constant", f"{names[0]}={K[0]},{names[1]}={K[1]}")
    _same_estimates(tau, both)
    origin = both["efforts_from_currents"][0]["from"]
    assert [origin[j] for j in names] == ["--torque-constant"] * 2 + ["recording"] * 4
    # one constant for every joint, no metadata
    bare = d / "bare.csv"
    write_dynamic_recording(_as_currents(rec, 4.0), bare)
    one = _identify(capsys, bare, "--torque-constant", "4")
    _same_estimates(tau, one)
    assert one["efforts_from_currents"][0]["torque_constant_nm_per_a"] == dict.fromkeys(names, 4.0)


def test_currents_and_constants_round_trip(tmp_path):
    t = np.arange(40) * 0.01
    q = np.column_stack([np.sin(t), 0.5 * np.cos(t)])
    i = np.column_stack([np.cos(3 * t), 0.1 + t]) / 3
    k = {"a": 0.1 + 0.2, "b": 37.25}  # 0.30000000000000004: the exact float comes back
    rec = DynamicRecording(
        "r", "base", ["a", "b"], t, q, meta={"source": "logger"}, current=i, torque_constant=k
    )
    path = tmp_path / "d.csv"
    write_dynamic_recording(rec, path)
    text = path.read_text()
    assert "# torque_constant:a: 0.30000000000000004\n# torque_constant:b: 37.25\n" in text
    assert "i:a,i:b" in text and "tau:" not in text and "magic" not in text
    back = read_dynamic_recording(path)
    assert back.tau is None and back.wrench is None
    assert (
        back.torque_constant == k
        and back.meta.get("source") == "logger"
        and "torque_constant" not in back.meta
    )
    np.testing.assert_allclose(back.current, i, rtol=1e-9)
    write_dynamic_recording(back, tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_text() == text  # nothing gained or lost on the way
    np.testing.assert_allclose(efforts_from_currents(back).tau, i * [k["a"], k["b"]], rtol=1e-9)
    # the logger's way: written while recorded, the same file
    app = DynamicRecordingAppender(tmp_path / "app.csv", "r", "base", ["a", "b"], tau=False, wrench=False,
                                   meta={"source": "logger"}, current=True, torque_constant=k)  # fmt: skip
    for row in range(len(t)):
        app.append(t[row], q[row], current=i[row])
    with pytest.raises(DataError, match="current missing"):
        app.append(t[-1] + 0.01, q[-1])
    app.close()
    assert (tmp_path / "app.csv").read_text() == text


def test_the_library_refuses_bad_currents_and_constants():
    t = np.arange(20) * 0.01
    z = np.zeros((20, 2))
    make = DynamicRecording
    with pytest.raises(DataError, match="both joint torques"):
        make("r", "b", ["a", "b"], t, z, z, current=z)
    with pytest.raises(DataError, match=r"current is \(20, 1\)"):
        make("r", "b", ["a", "b"], t, z, current=z[:, :1])
    with pytest.raises(DataError, match="torque_constant of b: must be a positive"):
        make("r", "b", ["a", "b"], t, z, current=z, torque_constant={"a": 1.0, "b": -2.0})
    with pytest.raises(DataError, match="torque_constant: no joint c"):
        make("r", "b", ["a", "b"], t, z, current=z, torque_constant={"c": 1.0})
    rec = make("r", "b", ["a", "b"], t, z, current=z + 1, torque_constant={"a": 2.0})
    with pytest.raises(DataError, match="without a torque constant for b:"):
        efforts_from_currents(rec)
    assert np.all(efforts_from_currents(rec, {"b": 3.0}).tau == [2.0, 3.0])
    assert np.all(efforts_from_currents(rec, 5.0).tau == 5.0)  # one for all, over the recorded one
    with pytest.raises(DataError, match="--torque-constant of a: must be a positive"):
        efforts_from_currents(rec, float("nan"))


def _edited(text: str, header=None, value=None, row=None, meta=None) -> str:
    """A recording's text with its header row's names mapped by `header`, the first sample's values set by `value`
    (column name → new text) or mapped by `row`, and `meta` lines (`# key: …` → the line; None: removed) replaced."""
    lines = text.splitlines()
    h = next(n for n, line in enumerate(lines) if not line.startswith("#"))
    names, first = lines[h].split(","), lines[h + 1].split(",")
    for c, v in (value or {}).items():
        first[names.index(c)] = v
    lines[h + 1] = ",".join(row(first) if row else first)
    if header:
        lines[h] = ",".join(header(names))
    for key, line in (meta or {}).items():
        lines = [x for x in lines if not x.startswith(f"{key}:")]
        if line is not None:
            lines.insert(1, line)
    return "\n".join(lines) + "\n"


def test_bad_currents_and_constants_are_one_line_cli_errors(runs, capsys):
    """Each refused at the boundary: exit 2, one `poise: error:` line naming the problem, no traceback."""
    d, j = runs["dir"], runs["joints"]
    text = runs["cur"].read_text()
    tc = f"# torque_constant:{j[1]}"
    no_constants = {f"# torque_constant:{x}": None for x in j}
    files = {
        "nan": (_edited(text, value={f"i:{j[2]}": "nan"}), r"column i:\w+: nan \(NaN or infinite"),
        "inf": (_edited(text, value={f"i:{j[0]}": "-inf"}), r"column i:\w+: -inf \(NaN or infinite"),
        "short row": (_edited(text, row=lambda r: r[:-1]), r"line \d+: 12 values for 13 columns"),
        "one current short": (
            _edited(text, header=lambda h: [c for c in h if c != f"i:{j[5]}"]),
            r"current \(i:\) columns must name the q columns' joints: missing \w+",
        ),
        "tau and current": (
            _edited(text, header=lambda h: [f"tau:{j[3]}" if c == f"i:{j[3]}" else c for c in h]),
            r"both torque \(tau:…\) and motor current \(i:…\) columns",
        ),
        "tau and current, one joint": (
            _edited(text, header=lambda h: [*h, f"tau:{j[3]}"]),
            f"both torque .* columns, for {j[3]}",
        ),
        "zero constant": (
            _edited(text, meta={tc: f"{tc}: 0"}),
            f"torque_constant of {j[1]}: must be a positive",
        ),
        "negative constant": (_edited(text, meta={tc: f"{tc}: -3"}), "must be a positive finite number"),
        "nan constant": (_edited(text, meta={tc: f"{tc}: nan"}), "must be a positive finite number"),
        "inf constant": (_edited(text, meta={tc: f"{tc}: inf"}), "must be a positive finite number"),
        "text constant": (
            _edited(text, meta={tc: f"{tc}: fast"}),
            f"torque_constant of {j[1]}: not a number",
        ),
        "no joint": (
            _edited(text, meta={"# torque_constant: 3": "# torque_constant: 3"}),
            "expected '# torque_constant:JOINT",
        ),
        "unknown joint": (
            _edited(text, meta={"# torque_constant:elbow2": "# torque_constant:elbow2: 3"}),
            "torque_constant: no joint elbow2",
        ),  # fmt: skip
        "twice": (text.replace(f"{tc}:", f"{tc}: 4\n{tc}:", 1), f"torque_constant of {j[1]} given twice"),
        "no constants": (_edited(text, meta=no_constants), f"without a torque constant for {', '.join(j)}:"),
        "some constants": (
            _edited(text, meta={f"# torque_constant:{x}": None for x in j[3:]}),
            f"without a torque constant for {', '.join(j[3:])}: add '# torque_constant:JOINT: VALUE'",
        ),
    }
    for name, (bad, message) in files.items():
        path = d / f"bad {name}.csv"
        path.write_text(bad)
        capsys.readouterr()
        assert main(["identify", "dynamic", str(path)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"poise: error: {path}") and err.count("\n") == 1, (name, err)
        assert "Traceback" not in err
        assert re.search(message, err), (name, err)
    ok = str(runs["cur"])
    options = {
        "0": "must be a positive finite number (N·m/A), got '0'",
        "nan": "must be a positive finite number (N·m/A), got 'nan'",
        "fast": "expected a number in N·m/A, got 'fast'",
        f"{j[0]}=": f"{j[0]}: expected a number in N·m/A",
        f"{j[0]}=-1": f"{j[0]}: must be a positive finite number",
        "=3": "expected one number or JOINT=K,JOINT=K,…",
        f"{j[0]}=3,": "expected one number or JOINT=K,JOINT=K,…",
        f"{j[0]}=3,{j[0]}=4": f"torque constant of {j[0]} given twice",
    }
    for option, message in options.items():
        capsys.readouterr()
        assert main(["identify", "dynamic", ok, "--torque-constant", option]) == 2, option
        err = capsys.readouterr().err
        assert "argument --torque-constant" in err and message in err and err.count("\n") == 1, (option, err)
    nobody = d / "nobody.csv"
    nobody.write_text(_edited(text, meta=no_constants))
    cases = [
        (
            [ok, "--torque-constant", "elbow2=3"],
            f"{ok}: --torque-constant: no joint elbow2 (joints: {', '.join(j)})",
        ),
        (
            [str(runs["rec"]), "--torque-constant", "3"],
            "--torque-constant: no recording holds motor currents",
        ),
        (
            [ok, "--validate", str(nobody)],
            f"{nobody}: motor currents (i:…) without a torque constant for {j[0]}",
        ),
        (
            [str(nobody), "--torque-constant", f"{j[0]}=2"],
            f"without a torque constant for {', '.join(j[1:])}:",
        ),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert main(["identify", "dynamic", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
