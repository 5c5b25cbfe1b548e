"""Review fixes: a recording is checked to be the labelled robot's standing as labelled before any fit. A board
wrench labelled with the other sole as base, in kgf or N·mm, or from a single-support motion without its `# motion:`
line is refused naming the cause; `simulate trajectory` writes the motion class; `identify static` refuses
postures beyond the joint limits as `identify dynamic` does; a file delimited by semicolons is named so;
`simulate static --json` says what it wrote."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from formats.dynamic_recording import read_dynamic_recording, write_dynamic_recording
from formats.static_recording import read_recording
from identify.recording_checks import LIMIT_SLACK, LIMIT_SLACK_SHARE, LOADED_SHARE
from identify.recording_model import checked_for_model
from poise.cli import main
from robots.dynamics import G
from robots.registry import get_model
from robots.stance import other_site

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def tulip():
    return get_model("tulip")


@pytest.fixture(scope="module")
def standing(tmp_path_factory) -> dict[str, Path]:
    """Twin recordings (100 Hz) of the stored double- and single-support plans."""
    folder = tmp_path_factory.mktemp("standing")
    out = {}
    for kind, plan in (
        ("double", "tulip_double_support_10s.json"),
        ("single", "tulip_single_support_6s.json"),
    ):
        out[kind] = folder / f"{kind}.csv"
        assert (
            main(["simulate", "trajectory", str(DATA / plan), "--out", str(out[kind]), "--rate-hz", "100"])
            == 0
        )
    return out


def _refused(capsys, argv: list[str]) -> str:
    """The one-line error of a command that must exit 2."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def _edited(src: Path, dst: Path, header=lambda h: h, row=lambda cols, r: r) -> Path:
    """A copy of a recording with its comment lines passed through `header` and its data rows through `row`."""
    lines = src.read_text().splitlines()
    first = next(k for k, line in enumerate(lines) if not line.startswith("#"))
    cols = lines[first].split(",")
    head = [h for h in (header(line) for line in lines[:first]) if h is not None]
    body = [",".join(row(cols, r.split(","))) for r in lines[first + 1 :]]
    dst.write_text("\n".join(head + [lines[first]] + body) + "\n")
    return dst


def _scaled(names: tuple[str, ...], factor: float):
    """A row editor multiplying the named columns by `factor`."""
    return lambda cols, r: [
        f"{float(x) * factor:.10g}" if c in names else x for c, x in zip(cols, r, strict=True)
    ]


def test_simulated_recordings_pass_and_say_their_motion(standing, tulip):
    for kind, motion in (("double", "double-support"), ("single", "single-support")):
        rec = read_dynamic_recording(standing[kind])
        assert rec.meta.get("motion") == motion  # written out, the default too
        checked_for_model(rec, standing[kind], tulip)


def test_the_other_sole_as_base_is_refused(standing, tulip, tmp_path, capsys):
    other = other_site(tulip, "right")
    base = next(b for b, s in tulip.bases.items() if s == other)
    wrong = _edited(standing["double"], tmp_path / "wrong.csv",
                    header=lambda h: f"# base: {base}" if h.startswith("# base:") else h)  # fmt: skip
    err = _refused(capsys, ["identify", "dynamic", str(wrong), "--simplified"])
    assert "outside the soles' polygon" in err and f"'# base: {base}' the sole on the first board" in err, err


def test_forces_in_kgf_and_moments_in_nmm_are_refused_with_the_unit(standing, tmp_path, capsys):
    kgf = _edited(standing["double"], tmp_path / "kgf.csv",
                  row=_scaled(("fx_n", "fy_n", "fz_n", "mx_nm", "my_nm", "mz_nm"), 1 / G))  # fmt: skip
    err = _refused(capsys, ["identify", "dynamic", str(kgf), "--simplified"])
    assert "fz_n averages" in err and "kgf" in err, err
    nmm = _edited(standing["double"], tmp_path / "nmm.csv", row=_scaled(("mx_nm", "my_nm", "mz_nm"), 1000.0))
    err = _refused(capsys, ["identify", "dynamic", str(nmm), "--simplified"])
    assert "N·mm rather than N·m" in err, err


def test_a_motion_class_other_than_the_recording_is_refused(standing, tulip, tmp_path, capsys):
    sole = other_site(tulip, "right")
    unsaid = _edited(standing["single"], tmp_path / "unsaid.csv",
                     header=lambda h: None if h.startswith("# motion:") else h)  # fmt: skip
    err = _refused(capsys, ["identify", "dynamic", str(unsaid), "--simplified"])
    assert (
        f"put {sole} " in err and "above the ground" in err and "declare '# motion: single-support'" in err
    ), err
    said = _edited(standing["double"], tmp_path / "said.csv",
                   header=lambda h: "# motion: single-support" if h.startswith("# motion:") else h)  # fmt: skip
    err = _refused(capsys, ["identify", "dynamic", str(said), "--simplified"])
    assert f"{sole} stays on the ground" in err and "remove '# motion: single-support'" in err, err


@pytest.fixture(scope="module")
def static_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("static") / "static.csv"
    assert main(["simulate", "static", "tulip", "--postures", "20", "--out", str(path)]) == 0
    return path


def test_static_postures_beyond_the_joint_limits_are_refused(static_csv, tulip, tmp_path, capsys):
    j = 2  # a revolute joint, bent past its lower limit by twice the slack dynamic recordings are allowed
    span = float(tulip.upper[j] - tulip.lower[j])
    past = float(tulip.lower[j]) - 2 * max(LIMIT_SLACK["revolute"], LIMIT_SLACK_SHARE * span)
    name = tulip.joint_names[j]
    first = [True]

    def row(cols, r):  # the first posture bent past the lower limit
        if first[0]:
            first[0] = False
            return [f"{past:.6f}" if c == name else x for c, x in zip(cols, r, strict=True)]
        return r

    bad = _edited(static_csv, tmp_path / "limits.csv", row=row)
    err = _refused(capsys, ["identify", "static", str(bad), "--model", "simplified"])
    assert f"{name} spans [{past:.4g}," in err and "beyond the joint's limits" in err, err
    assert main(["identify", "static", str(static_csv), "--model", "simplified", "--json"]) == 0


def test_semicolons_between_fields_are_named(static_csv, standing, tmp_path, capsys):
    for src in (static_csv, standing["double"]):
        semi = tmp_path / f"semi_{src.name}"
        semi.write_text(src.read_text().replace(",", ";"))
        verb = ["identify", "static"] if src == static_csv else ["identify", "dynamic"]
        err = _refused(capsys, [*verb, str(semi)])
        assert "the file uses ';' between fields; poise reads commas" in err, err


def test_simulate_static_json_says_what_it_wrote(tmp_path, capsys):
    out = tmp_path / "s.csv"
    capsys.readouterr()
    assert main(["simulate", "static", "tulip", "--postures", "12", "--noise-mm", "3", "--seed", "4",
                 "--out", str(out), "--json"]) == 0  # fmt: skip
    said = json.loads(capsys.readouterr().out)
    rec = read_recording(out)
    assert said["out"] == str(out) and said["postures"] == len(rec) == 12
    assert said["cop_noise_m"] == pytest.approx(0.003) and said["seed"] == 4 and said["base"] == rec.base
    assert np.allclose(rec.cop_sd, said["cop_noise_m"])


def test_instruments_planned_on_the_other_sole_are_refused(tulip, tmp_path, capsys):
    """`--instruments` with a plan whose base is not the recording's: its angles belong to another chain."""
    plan = json.loads((DATA / "tulip_double_support_10s.json").read_text())
    other = next(b for b in tulip.bases if b != plan["base"])
    rec = tmp_path / "rec.csv"
    assert main(["simulate", "trajectory", str(DATA / "tulip_double_support_10s.json"), "--out", str(rec),
                 "--rate-hz", "100"]) == 0  # fmt: skip
    flipped = tmp_path / "flipped.json"
    flipped.write_text(json.dumps(plan | {"base": other}))
    err = _refused(capsys, ["identify", "dynamic", str(rec), "--simplified", "--instruments", str(flipped)])
    assert f"planned with base {other!r}" in err and f"base is {plan['base']!r}" in err, err


def test_simulate_trajectory_json_says_what_it_wrote(tmp_path, capsys):
    out = tmp_path / "arm.csv"
    capsys.readouterr()
    argv = ["simulate", "trajectory", str(DATA / "ur5_6s.json"), "--out", str(out), "--rate-hz", "50",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    said = json.loads(capsys.readouterr().out)
    rec = read_dynamic_recording(out)
    assert said["out"] == str(out) and said["samples"] == len(rec.t) and said["rate_hz"] == 50.0
    assert (
        said["encoder_ticks"] == 16384 and said["viscous_nm_s_rad"] == 0.3 and said["force_noise_n"] is None
    )


def test_constant_encoder_offsets_on_an_honest_recording_are_not_refused(standing, tulip):
    """Offsets (random, σ 2° on every joint; 0.05 rad on one joint) move the other sole by about a constant: the
    checks judge it about its median, so the honest double-support recording still passes."""
    rec = read_dynamic_recording(standing["double"])
    for seed in range(8):
        offset = np.radians(np.random.default_rng(seed).normal(0.0, 2.0, rec.q.shape[1]))
        checked_for_model(replace(rec, q=rec.q + offset), standing["double"], tulip)
    for j in range(rec.q.shape[1]):
        one = np.zeros(rec.q.shape[1])
        one[j] = 0.05
        checked_for_model(replace(rec, q=rec.q + one), standing["double"], tulip)


def test_a_sole_far_off_the_ground_names_offsets_or_geometry(standing, tulip, tmp_path, capsys):
    """Half a radian off on the most bent joint (unbending it, within its limits' slack) tilts the other sole far
    beyond any standing posture: refused, naming encoder offsets or the description's geometry."""
    rec = read_dynamic_recording(standing["double"])
    j = int(np.argmax(np.abs(rec.q).mean(axis=0)))
    off = replace(rec, q=rec.q - 0.5 * np.sign(rec.q[:, j].mean()) * np.eye(rec.q.shape[1])[j])
    path = tmp_path / "off.csv"
    write_dynamic_recording(off, path)
    err = _refused(capsys, ["identify", "dynamic", str(path), "--simplified"])
    assert "the recorded angles put" in err and "encoder offsets" in err, err


def test_unloaded_samples_are_left_out_of_the_cop_and_lever(standing, tulip):
    """The robot lifted off the boards for the first second (Fz = Mx = My = 0): no division warnings, no NaN
    lever called N·mm, and the recording passes."""
    rec = read_dynamic_recording(standing["double"])
    wrench = rec.wrench.copy()
    wrench[: int(rec.rate_hz)] = 0.0
    lifted = replace(rec, wrench=wrench)
    assert np.mean(wrench[:, 2] < LOADED_SHARE * wrench[:, 2].max()) > 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checked_for_model(lifted, standing["double"], tulip)
