"""A dynamic recording written by a user's own logger, as the README documents it: what it may do (BOM, CRLF, any
column order, three wrench columns, remarks, relative robot_source) is read as poise's own file; what would be fitted
wrongly without a word (degrees as radians, a mistyped key or motion, a negated wrench, another version) is refused
in one line naming the file, and the line and column where there is one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import simulated_recording

from formats.dynamic_recording import in_joint_order, read_dynamic_recording
from formats.errors import DataError
from poise.cli import main

PLAN = Path(__file__).parent / "data" / "ur5_6s.json"


@pytest.fixture(scope="module")
def arm_csv(tmp_path_factory) -> Path:
    """The UR5's stored plan on the MuJoCo twin (`poise simulate trajectory`), 200 Hz: poise's own file; the
    twin's truth beside it (truth.json)."""
    folder = tmp_path_factory.mktemp("logger")
    return simulated_recording(folder, PLAN, 200, "--truth-out", str(folder / "truth.json"))


@pytest.fixture(scope="module")
def held_out(arm_csv) -> Path:
    """The plan run again on the same twin (`arm_csv`'s truth) under another noise seed: a recording the fit has
    not seen, to validate on (a fitted one is refused as in-sample)."""
    truth = str(arm_csv.with_name("truth.json"))
    return simulated_recording(
        arm_csv.parent, PLAN, 200, "--truth", truth, "--seed", "1", name="held_out.csv"
    )


def _split(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return lines[:k], [row.split(",") for row in lines[k:]]


def _write(
    path: Path, head: list[str], rows: list[list[str]], newline: str = "\n", bom: bool = False
) -> Path:
    text = newline.join(head + [",".join(r) for r in rows]) + newline
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


def _identify(capsys, path: Path, *extra: str) -> tuple[int, dict | str]:
    code = main(["identify", "dynamic", str(path), "--json", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err.strip())


def _columns(rows: list[list[str]], order: list[int]) -> list[list[str]]:
    return [[r[k] for k in order] for r in rows]


def test_a_loggers_own_layout_fits_as_poises_file(arm_csv, tmp_path, capsys):
    """Columns shuffled (t_s last, joints in another order, efforts in a third), a BOM, CRLF, a remark without a
    colon and an unknown key of the logger's own: the same estimates to the last digit."""
    code, ref = _identify(capsys, arm_csv)
    assert code == 0
    head, rows = _split(arm_csv)
    header = rows[0]
    n = sum(c.startswith("q:") for c in header)
    q_cols, tau_cols = list(range(1, 1 + n)), list(range(1 + n, 1 + 2 * n))
    order = q_cols[::-1] + tau_cols[2:] + tau_cols[:2] + [0]
    head = head[:1] + ["# logged by our own rig, firmware 2.1", "# operator: somebody", "# event: start",
                       "# Source: our rig", "# event: stop"] + head[1:]  # fmt: skip
    mine = _write(tmp_path / "mine.csv", head, _columns(rows, order), newline="\r\n", bom=True)
    rec = read_dynamic_recording(mine)
    assert rec.joint_names[0] == header[n][2:] and rec.meta["operator"] == "somebody"
    assert "logged" not in " ".join(rec.meta.values())  # a remark, not metadata
    assert rec.meta["event"] == "stop" and rec.meta["Source"] == "our rig"  # the logger's own keys, kept
    code, out = _identify(capsys, mine)
    assert code == 0
    assert [p["value"] for p in out["parameters"]] == [p["value"] for p in ref["parameters"]]


def test_the_joint_order_is_the_robots_and_a_foreign_joint_is_named(arm_csv):
    rec = read_dynamic_recording(arm_csv)
    names = list(rec.joint_names)
    back = in_joint_order(in_joint_order(rec, names[::-1]), names)
    assert np.array_equal(back.q, rec.q) and np.array_equal(back.tau, rec.tau)
    other = [("elbow" if j == "elbow_joint" else j) for j in names]
    with pytest.raises(DataError, match=r"missing elbow; not the robot's elbow_joint"):
        in_joint_order(rec, other)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h, r: (h, [r[0]] + [[f"{float(x) * 57.29578:.6g}" if 0 < k < 7 else x for k, x in enumerate(row)]
                                     for row in r[1:]]),
         r"q:\w+ spans .* rad, beyond the joint's limits .* angles in degrees\? declare '# angle_unit: deg'"),
        (lambda h, r: ([line.replace("# angle_unit:", "# angle unit:") for line in h], r),
         r"line 4: unknown header '# angle unit:': did you mean '# angle_unit:'\?"),
        (lambda h, r: (h + ["# base: base_link"], r), r"'# base:' given twice \('world', then 'base_link'\)"),
        (lambda h, r: (["# poise dynamic recording v2"] + h[1:], r), r"this poise reads '# poise dynamic recording v1'"),
        (lambda h, r: ([line.replace("# robot: ur5", "# robot: my_arm") for line in h
                        if not line.startswith("# robot_source")], r),
         r"unknown robot 'my_arm' .*'# robot_source: PATH'"),
        (lambda h, r: ([line.replace("# robot: ur5", "# robot: panda") for line in h], r),
         r"robot 'panda', but its robot_source .* describes 'ur5'"),
        (lambda h, r: (h, r[:5] + [r[5][:2] + ["abc"] + r[5][3:]] + r[6:]), r"line \d+, column q:\w+: not a number \('abc'\)"),
        (lambda h, r: (h, r[:5] + [r[5][:8] + ["nan"] + r[5][9:]] + r[6:]), r"line \d+, column tau:\w+: nan \(NaN"),
        (lambda h, r: (h, r[:5] + [[r[3][0]] + r[5][1:]] + r[6:]), r"line \d+: t_s \S+ does not follow \S+ \(time stamps must"),
        (lambda h, r: (h, [r[0] + ["temp_c:elbow_joint"]] + [row + ["35"] for row in r[1:]]),
         r"unknown columns \['temp_c:elbow_joint'\]"),
        (lambda h, r: ([line.replace("# base: world", "# base: upper_arm_link") for line in h], r),
         r"base 'upper_arm_link' is moved by shoulder_pan_joint, shoulder_lift_joint: .* root 'world'"),
    ],
)  # fmt: skip
def test_what_would_be_fitted_wrongly_is_refused_in_one_line(arm_csv, tmp_path, capsys, edit, message):
    head, rows = _split(arm_csv)
    if not any(line.startswith("# robot_source") for line in head):
        head = head + [f"# robot_source: {json.loads(PLAN.read_text())['robot_source']}"]
    bad = _write(tmp_path / "bad.csv", *edit(head, rows))
    code, err = _identify(capsys, bad)
    assert code == 2 and "\n" not in err and str(bad) in err
    assert re.search(message, err), err


def test_line_numbers_count_the_blank_lines(arm_csv, tmp_path):
    head, rows = _split(arm_csv)
    rows = rows[:3] + [[""]] * 3 + [rows[3][:-1]] + rows[4:]  # three blank lines, then a short row
    bad = _write(tmp_path / "blank.csv", head, rows)
    where = len(head) + 1 + 3 + 3  # the header row, two rows, three blanks: the short row's line
    assert bad.read_text().splitlines()[where - 1].count(",") == len(rows[0]) - 2
    with pytest.raises(
        DataError, match=rf"line {where}: {len(rows[0]) - 1} values for {len(rows[0])} columns"
    ):
        read_dynamic_recording(bad)


def test_a_relative_robot_source_is_found_beside_the_recording(arm_csv, tmp_path, capsys, monkeypatch):
    import shutil

    head, rows = _split(arm_csv)
    urdf = Path(json.loads(PLAN.read_text())["robot_source"])
    folder = tmp_path / "rig"
    folder.mkdir()
    shutil.copy(urdf, folder / "ur5_robot.urdf")
    head = [line for line in head if not line.startswith("# robot_source")] + [
        "# robot_source: ur5_robot.urdf"
    ]
    rec = _write(folder / "rec.csv", head, rows)
    monkeypatch.chdir(tmp_path)  # not the recording's folder
    code, out = _identify(capsys, rec)
    assert code == 0 and len(out["parameters"]) > 0


def _standing(tmp_path: Path, capsys) -> tuple[list[str], list[list[str]]]:
    out = tmp_path / "tulip.csv"
    plan = Path(__file__).parent / "data" / "tulip_double_support_10s.json"
    assert main(["simulate", "trajectory", str(plan), "--out", str(out), "--rate-hz", "100"]) == 0
    capsys.readouterr()
    return _split(out)


def test_a_board_logger_writes_the_three_wrench_columns_it_measures(tmp_path, capsys):
    """fz_n, mx_nm, my_nm alone fit as the six (fx, fy, mz: 0); a wrench negated (the robot's on the boards) and a
    misspelt motion are refused; `motion: double-support` said aloud is the default."""
    head, rows = _standing(tmp_path, capsys)
    header = rows[0]
    code, six = _identify(capsys, _write(tmp_path / "six.csv", head, rows), "--simplified")
    assert code == 0
    keep = [k for k, c in enumerate(header) if c not in ("fx_n", "fy_n", "mz_nm")]
    three = _write(tmp_path / "three.csv", head + ["# motion: double-support"], _columns(rows, keep))
    assert read_dynamic_recording(three).wrench[:, [0, 1, 5]].max() == 0.0
    code, out = _identify(capsys, three, "--simplified")
    assert code == 0
    assert [p["value"] for p in out["parameters"]] == pytest.approx(
        [p["value"] for p in six["parameters"]], rel=1e-9
    )
    lone = [k for k, c in enumerate(header) if c not in ("mx_nm", "my_nm")]
    code, err = _identify(capsys, _write(tmp_path / "fz.csv", head, _columns(rows, lone)))
    assert code == 2 and "needs fz_n, mx_nm, my_nm; missing mx_nm, my_nm" in err
    w = [k for k, c in enumerate(header) if c in ("fx_n", "fy_n", "fz_n", "mx_nm", "my_nm", "mz_nm")]
    negated = [rows[0]] + [[f"{-float(x):.10g}" if k in w else x for k, x in enumerate(r)] for r in rows[1:]]
    code, err = _identify(capsys, _write(tmp_path / "neg.csv", head, negated), "--simplified")
    assert code == 2 and "fz_n averages -" in err and "negate it" in err
    said = [h for h in head if not h.startswith("# motion:")]  # simulate trajectory says its motion class
    code, err = _identify(capsys, _write(tmp_path / "m.csv", said + ["# motion: single support"], rows))
    assert (
        code == 2 and "motion 'single support' unknown: double-support (the default) or single-support" in err
    )


def test_a_band_too_high_for_the_rate_is_fitted_at_the_cut_off_given(arm_csv, held_out, tmp_path, capsys):
    """The declared band sets the default cut-off; one beyond half the rate is refused unless --cutoff-hz is given
    (then the band is not used), and a validation recording's band never matters (the fit's cut-off is used)."""
    head, rows = _split(arm_csv)
    head = [line for line in head if not line.startswith("# motion_band_hz")] + ["# motion_band_hz: 30"]
    fast = _write(tmp_path / "fast.csv", head, rows)
    code, err = _identify(capsys, fast)
    assert code == 2 and "above half the sample rate" in err and str(fast) in err
    code, out = _identify(capsys, fast, "--cutoff-hz", "3")
    assert code == 0 and out["cutoff_hz"] == 3.0
    head, rows = _split(held_out)
    head = [line for line in head if not line.startswith("# motion_band_hz")] + ["# motion_band_hz: 30"]
    fast_held_out = _write(tmp_path / "fast_held_out.csv", head, rows)
    code, out = _identify(capsys, arm_csv, "--validate", str(fast_held_out))
    assert code == 0 and out["validation"]["recording"] == str(fast_held_out)


def test_a_hand_written_spline_must_start_and_end_at_rest(tmp_path, capsys):
    """A C² spline through waypoints is at rest in q̇ at its ends, but its q̈ there is free unless the design sets
    it: a plan written by hand with q̈ ≠ 0 at its ends steps the torque as it opens and closes, which the README
    says no plan does — `plan check` (and so `poise run`) refuses it; one whose end segments are flat passes."""
    plan = json.loads(PLAN.read_text())
    waypoints = [[0.0, -1.2, 1.2, -1.0, 0.3, 0.0], [0.4, -1.0, 0.9, -1.4, 0.6, 0.5], [-0.3, -1.5, 1.4, -0.8, 0.1, -0.4],
                 [0.0, -1.2, 1.2, -1.0, 0.3, 0.0]]  # fmt: skip
    plan["trajectory"] = {"kind": "spline", "times_s": [0.0, 3.0, 6.0, 9.0], "q": waypoints}
    bent = tmp_path / "bent.json"
    bent.write_text(json.dumps(plan))
    assert main(["plan", "check", str(bent), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert any(p.startswith("does not start at rest (|q̈| = ") for p in problems)
    assert any(p.startswith("does not end at rest (|q̈| = ") for p in problems)
    designed = sorted((Path(__file__).parent / "data" / "tulip_spline_sequence").glob("*.json"))[0]
    assert main(["plan", "check", str(designed), "--json"]) == 0  # the designer's splines end at rest
    assert not any("at rest" in p for p in json.loads(capsys.readouterr().out)["problems"])


def test_what_the_fit_finds_wrong_names_the_file(arm_csv, held_out, tmp_path, capsys):
    """A time stamp off by 8 % of the step, or a validation recording too short for the cut-off: found while
    fitting, told with the file they are in."""
    head, rows = _split(arm_csv)
    k = len(rows) // 2
    t = float(rows[k][0])
    step = float(rows[k + 1][0]) - t
    rows = rows[:k] + [[f"{t + 0.08 * step:.10g}"] + rows[k][1:]] + rows[k + 1 :]
    jitter = _write(tmp_path / "jitter.csv", head, rows)
    code, err = _identify(capsys, jitter)
    assert code == 2 and err.startswith(f"poise: error: {jitter}: time stamps are not uniform")
    head, rows = _split(held_out)
    short = _write(tmp_path / "short.csv", head, rows[:40])
    code, err = _identify(capsys, arm_csv, "--validate", str(short))
    assert (
        code == 2
        and err.startswith(f"poise: error: --validate {short}: the recording")
        and "too short" in err
    )
