"""Per-cell board gains: `poise boards calibrate` measures them with a known weight over each cell, `poise run
--board-gains` applies them. The emulated boards carry the thesis's ~2 % cell gain errors (their `noise`), which
bias every wrench-based estimate: a noisy double-support run on the twin weighed TUlip 0.5 % light (ϑ1 7.6 SE
off) until its boards were calibrated."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TEST_DESIGN

from drivers.config import load_config
from drivers.emulators.world import SimWorld, WorldOptions
from drivers.wbb.geometry import cell_levers
from formats.board_gains import BoardGains, load_board_gains, save_board_gains
from formats.dynamic_recording import DynamicRecording, read_dynamic_recording
from formats.errors import DataError
from poise.cli import main
from robots.tulip import tulip


@pytest.fixture(scope="module")
def gains_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gains") / "gains.json"
    args = ["boards", "calibrate", "--boards", "sim", "--weight", "10", "--seconds", "0.5", "--tare-s", "1",
            "--out", str(path), "--json"]  # fmt: skip
    assert main(args) == 0
    return path


def test_calibration_recovers_each_emulated_cells_gain_error(gains_file):
    """The emulated boards of `poise run --boards sim` read (1 + e) × the load per cell; the gains undo it."""
    world = SimWorld(tulip(), load_config(), WorldOptions())
    try:
        errors = np.array([b.imp.gain_error for b in world.boards])
    finally:
        world.close()
    bg = load_board_gains(gains_file)
    assert bg.boards == ("sim0", "sim1") and bg.weight_kg == 10.0
    assert np.abs(errors).max() > 0.01  # there is something to correct
    assert np.allclose(bg.gains * (1 + errors), 1.0, atol=0.004), bg.gains * (1 + errors)
    # each gain's SE from its readings' scatter, with the scale the tare's error puts on its board's four, covers
    # its error
    off = np.abs(bg.gains * (1 + errors) - 1)
    assert bg.gain_se is not None and np.all((bg.gain_se > 1e-4) & (bg.gain_se < 2e-3)), bg.gain_se
    assert bg.tare_scale_se is not None and np.all((bg.tare_scale_se > 1e-4) & (bg.tare_scale_se < 2e-3))
    se = np.hypot(bg.gain_se, bg.tare_scale_se[:, None] * bg.gains)
    assert np.all(off < 5 * se), off / se


def test_a_weight_off_its_cells_centre_gives_the_gains_of_a_centred_one():
    """8 % of the weight on the next cell (under the 10 % `boards calibrate` refuses): the cells still carry it
    all between them, so the gains come out as right as a centred weight's (known kg / the asked cell's reading
    alone would be 8.7 % high)."""
    from drivers.wbb.open import board_drivers, start_all
    from drivers.wbb.recalibrate import tare_and_recalibrate

    world = SimWorld(tulip(), load_config(), WorldOptions())
    boards = start_all(board_drivers("sim", world.board_openers()))

    def off_centre(cell):
        for emu in world.boards:
            emu.load_override = (
                None if cell is None else 10.0 * (0.92 * np.eye(4)[cell] + 0.08 * np.eye(4)[cell - 1])
            )

    try:
        errors = np.array([b.imp.gain_error for b in world.boards])
        gains = np.array(tare_and_recalibrate(boards, off_centre, 10.0, 0.5, 1.0))
        tare = np.array([[b.calibration.tare_scale_se] for b in boards])
        se = np.hypot([b.calibration.gain_se for b in boards], tare * gains)
    finally:
        for b in boards:
            b.close()
        world.close()
    off = np.abs(gains * (1 + errors) - 1)
    assert np.all(off < 5 * se) and off.max() < 0.004, off / se


def test_gains_of_other_boards_are_refused(gains_file, tmp_path, capsys):
    doc = json.loads(gains_file.read_text())
    doc["boards"][1]["board"] = "bt:00:1E:35:00:00:01"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    assert main(["boards", "read", "--boards", "sim", "--seconds", "0.2", "--board-gains", str(other)]) == 2
    err = capsys.readouterr().err
    assert "measured on sim0, bt:00:1E:35:00:00:01" in err and "these boards are sim0, sim1" in err


def test_board_gains_round_trip_and_refusals(tmp_path):
    se = np.full((2, 4), 2e-4)
    bg = BoardGains(("a", "b"), np.array([[1.0, 1.01, 0.99, 1.02], [1.0, 1.0, 0.98, 1.0]]), 5.0, "bt:A,B", se)
    save_board_gains(bg, tmp_path / "g.json")
    back = load_board_gains(tmp_path / "g.json")
    assert back.boards == bg.boards and np.array_equal(back.gains, bg.gains) and back.endpoint == "bt:A,B"
    assert np.array_equal(back.gain_se, se) and back.tare_scale_se is None
    tared = BoardGains(bg.boards, bg.gains, 5.0, "bt:A,B", se, tare_scale_se=np.array([3e-4, 4e-4]))
    save_board_gains(tared, tmp_path / "t.json")
    assert np.array_equal(load_board_gains(tmp_path / "t.json").tare_scale_se, [3e-4, 4e-4])
    with pytest.raises(DataError, match="tare_scale_se"):
        BoardGains(bg.boards, bg.gains, 5.0, "", se, tare_scale_se=np.array([3e-4]))
    with pytest.raises(DataError, match="gain_se"):
        BoardGains(("a",), np.ones((1, 4)), 5.0, "", np.full((1, 4), -1.0))
    with pytest.raises(DataError, match="2 × 4 gains"):
        BoardGains(("a", "b"), np.ones((2, 3)), 5.0)
    with pytest.raises(DataError, match="b BR 2.5"):
        BoardGains(("a", "b"), np.array([[1.0] * 4, [1.0, 2.5, 1.0, 1.0]]), 5.0)
    with pytest.raises(DataError, match="weight_kg"):
        BoardGains(("a",), np.ones((1, 4)), 0.0)
    weighed = BoardGains(("a", "b"), bg.gains, 5.0, "bt:A,B", se, weight_sd_kg=0.005)
    save_board_gains(weighed, tmp_path / "w.json")
    assert load_board_gains(tmp_path / "w.json").weight_sd_kg == 0.005 and back.weight_sd_kg is None
    with pytest.raises(DataError, match="10 % of its 5 kg"):
        BoardGains(("a",), np.ones((1, 4)), 5.0, weight_sd_kg=0.6)
    doc = json.loads((tmp_path / "g.json").read_text())
    doc["boards"][0]["gain"] = "1111"  # four characters are not four gains
    (tmp_path / "s.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match="a list of 4 numbers"):
        load_board_gains(tmp_path / "s.json")


@pytest.mark.slow
def test_a_noisy_standing_run_on_calibrated_boards_weighs_the_robot(gains_file, tmp_path, capsys):
    """The stored 10 s double-support design on the twin with noisy boards and encoders, its boards calibrated:
    the total mass within 0.2 % of the twin's (0.49 % light without the gains), the gains in run.json, and every
    estimate within 3 SE once the SEs hold the run's tare (without it, over four noise seeds the mass came out
    0.3, 0.5, 2.0 and 3.75 SE off: the 1 s tare's σ, 0.0098 kg, is 2.5 times the residuals' SE)."""
    out = tmp_path / "run"
    args = ["run", str(TEST_DESIGN), "--robot", "sim", "--boards", "sim", "--physics", "mujoco", "--gravity-comp",
            "--time-scale", "1", "--board-gains", str(gains_file), "--out", str(out), "--yes", "--json"]  # fmt: skip
    assert main(args) == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["board_gains"]["boards"]["sim1"] == load_board_gains(gains_file).gains[1].tolist()
    bg = load_board_gains(gains_file)
    assert np.allclose(meta["board_gain_se"]["sim1"], bg.gain_se[1] / bg.gains[1])  # relative
    assert meta["board_gain_tare_se"]["sim1"] == bg.tare_scale_se[1]
    # the cells behind the wrench are recorded beside it, placed: they give the recorded wrench again
    rec = read_dynamic_recording(out / "recording.csv")
    assert rec.cells.shape == (len(rec.t), 8)
    wrench = (rec.cells * 9.80665) @ cell_levers(rec.cell_xy())
    assert np.abs(wrench - rec.wrench[:, 2:5]).max() < 1e-3
    capsys.readouterr()
    args = ["identify", "dynamic", str(out / "recording.csv"), "--simplified", "--no-friction", "--instruments",
            str(TEST_DESIGN), "--reference", str(out / "truth.json"), "--json"]  # fmt: skip
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    mass, z = res["parameters"][0], res["reference"]["z"]
    assert mass["formula"].count("m@") == 13
    truth = res["reference"]["values"][0]
    assert abs(mass["value"] / truth - 1) < 2e-3, (mass["value"], truth, z[0])
    # the run's 1 s tare leaves the total load uncertain by more than the residuals show; the SEs include it
    tare_sd = meta["tare_mass_sd_kg"]
    assert res["tare_mass_sd_kg"] == [tare_sd] and 0.002 < tare_sd < 0.05, tare_sd
    assert res["tare_in_se"] == [1] and mass["se"] > tare_sd
    assert res["gains_in_se"] == [1]  # the gains' own SEs, one error shared by every run on these boards
    assert max(abs(v) for v in z) < 3, z


@pytest.fixture
def bench_as_real_boards(monkeypatch):
    """`--boards bt:…` served by the emulated boards (the HID driver over their socket and pty), with a person at
    the prompts whose answers the test gives (`answers`: prompt → None)."""
    import drivers.session
    import drivers.wbb.open as wbb_open

    world = SimWorld(tulip(), load_config(), WorldOptions())
    real = wbb_open.board_drivers

    def served(spec, *a, **k):
        return real("sim", world.board_openers())

    # both names, and drivers.session imported first: a module importing `board_drivers` while this patch is
    # on would keep this test's closed bench for the rest of the process (a later Session then met a closed board)
    monkeypatch.setattr(wbb_open, "board_drivers", served)
    monkeypatch.setattr(drivers.session, "board_drivers", served)
    yield world
    world.close()


def test_a_person_places_the_weight_when_asked(bench_as_real_boards, tmp_path, monkeypatch):
    world, asked = bench_as_real_boards, []

    def person(prompt: str) -> str:
        asked.append(prompt)
        cells = [c for c in ("TR", "BR", "TL", "BL") if f"over cell {c} " in prompt]
        world.place_weight(["TR", "BR", "TL", "BL"].index(cells[0]) if cells else None, 10.0)
        return ""

    monkeypatch.setattr("drivers.session.ask_on_stderr", person)
    out = tmp_path / "g.json"
    args = ["boards", "calibrate", "--boards", "bt:00:1E:35:00:00:01,00:1E:35:00:00:02", "--weight", "10",
            "--seconds", "0.5", "--tare-s", "1", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert (
        asked[0].startswith("Empty the boards")
        and "over cell BL " in asked[4]
        and "Take the weights" in asked[5]
    )
    errors = np.array([b.imp.gain_error for b in world.boards])
    assert np.allclose(load_board_gains(out).gains * (1 + errors), 1.0, atol=0.003)


def test_a_weight_never_placed_or_a_closed_stdin_is_one_line(
    bench_as_real_boards, tmp_path, monkeypatch, capsys
):
    args = ["boards", "calibrate", "--boards", "bt:00:1E:35:00:00:01,00:1E:35:00:00:02", "--weight", "10",
            "--seconds", "0.3", "--tare-s", "0.5", "--out", str(tmp_path / "g.json")]  # fmt: skip
    monkeypatch.setattr("builtins.input", lambda: "")  # Enter, Enter, … and no weight anywhere
    assert main(args) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert "no load change on boards sim0, sim1" in err and "Traceback" not in err  # not a gain out of range
    assert (
        "Empty the boards" in err and "Place a 10 kg weight over cell TR" in err
    )  # prompts: stderr, not stdout
    assert captured.out == ""
    assert not (tmp_path / "g.json").exists()

    def closed() -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", closed)
    assert main(args) == 2
    assert "the operator's input ended" in capsys.readouterr().err
    # a weight's uncertainty beyond reason is refused before anyone is asked for anything
    assert main([*args, "--weight-sd", "2"]) == 2
    err = capsys.readouterr().err
    assert "10 % of its 10 kg" in err and "Empty the boards" not in err


def test_a_weight_between_two_cells_is_refused_by_name(bench_as_real_boards, tmp_path, monkeypatch, capsys):
    """Asked for cell BR, the person puts the weight between BR and BL: its gain would be wrong, so nothing is
    written and the message says where the weight belongs."""
    world = bench_as_real_boards

    asked = []

    def person(prompt: str) -> str:  # asked again, the person leaves the weight where it is
        asked.append(prompt)
        for emu in world.boards:
            emu.load_override = np.array([0.0, 6.0, 0.0, 4.0]) if "cell BR" in prompt else None
        if "over cell TR " in prompt:
            world.place_weight(0, 10.0)
        return ""

    monkeypatch.setattr("drivers.session.ask_on_stderr", person)
    args = ["boards", "calibrate", "--boards", "bt:00:1E:35:00:00:01,00:1E:35:00:00:02", "--weight", "10",
            "--seconds", "0.3", "--tare-s", "0.5", "--out", str(tmp_path / "g.json")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert (
        "with the weight over cell BR, cell BL reads +4.00 kg" in err and "right above cell BR's foot" in err
    )
    assert not (tmp_path / "g.json").exists()
    assert sum("right above cell BR's foot, then press Enter" in a for a in asked) == 2  # asked twice more


def test_a_tares_uncertainty_is_its_readings_scatter():
    """`Calibration.tare` keeps each cell's SE; `tare_mass_sd` sums them (× gains) into the total load's σ."""
    from types import SimpleNamespace

    from drivers.trajectory_run import tare_mass_sd
    from drivers.wbb.calibration import Calibration

    rng = np.random.default_rng(3)
    cal = Calibration(np.array([[0.0] * 4, [1700.0] * 4, [3400.0] * 4]))  # 0.01 kg per count
    raw = 50.0 + rng.normal(0.0, 3.0, (400, 4))  # 0.03 kg of noise on every cell
    cal.tare(raw)
    assert np.allclose(cal.offset_kg, 0.5, atol=0.01) and np.allclose(cal.offset_se, 0.03 / 20, rtol=0.15)
    cal.gain = np.full(4, 2.0)
    boards = [SimpleNamespace(calibration=cal)] * 2
    assert tare_mass_sd(boards) == pytest.approx(np.sqrt(8) * 2 * 0.03 / 20, rel=0.15)
    cal.offset_se = None  # a tare from a single reading: no scatter, no σ
    assert tare_mass_sd(boards) is None


def test_a_run_on_uncalibrated_boards_says_so():
    from argparse import Namespace

    from poise.cmd_run import uncalibrated_boards_note

    bg = BoardGains(("sim0", "sim1"), np.ones((2, 4)), 10.0)
    assert "without per-cell gains" in uncalibrated_boards_note(Namespace(boards="bt:A,B", gains=None))
    assert "without per-cell gains" in uncalibrated_boards_note(
        Namespace(boards="sim", gains=None, no_noise=False)
    )
    assert (
        uncalibrated_boards_note(Namespace(boards="sim", gains=None, no_noise=True)) is None
    )  # ideal boards
    assert uncalibrated_boards_note(Namespace(boards="bt:A,B", gains=bg)) is None
    assert uncalibrated_boards_note(Namespace(boards=None, gains=None)) is None  # an arm on its stand


def test_each_boards_calibration_tare_is_one_scale_on_its_four_cells():
    """The tare's error moves a board's four gains alike: one source per board (its four cells' wrench × the
    relative SD), from run.json's `board_gain_tare_se`, beside the eight per-cell ones."""
    from poise.cmd_dynamic import RunOf, _gain_rel_se, _gain_sources, _gain_tare_se

    meta = {"board_gains": {"boards": {"sim0": [1.05] * 4, "sim1": [1.0] * 4}},
            "board_gain_se": {"sim0": [1e-3] * 4, "sim1": [2e-3] * 4},
            "board_gain_tare_se": {"sim0": 3e-4, "sim1": 5e-4}}  # fmt: skip
    se, key, _ = _gain_rel_se(meta)
    tare = _gain_tare_se(meta, se)
    assert np.allclose(tare, [3e-4, 5e-4])
    assert _gain_tare_se({**meta, "board_gain_tare_se": {"sim0": 3e-4}}, se) is None  # a board without: none
    t, q = np.arange(20) * 0.01, np.zeros((20, 12))
    xy = np.arange(16.0).reshape(8, 2) / 100
    cells = np.random.default_rng(1).uniform(1.0, 4.0, (20, 8))
    rec = DynamicRecording("tulip", "right", [f"j{k}" for k in range(12)], t, q, wrench=np.zeros((20, 6)),
                           meta={"cells_xy_m": " ".join(map(str, xy.ravel()))}, cells=cells)  # fmt: skip
    run = RunOf("p.json", "sha", {}, None, gain_rel_se=se, gains_key=key, gain_tare_se=tare)
    found = _gain_sources([[0]], [run], [rec])
    assert len(found.sources) == 8 + 2
    levers = cell_levers(xy)
    assert np.allclose(found.sources[9][0], 5e-4 * 9.80665 * cells[:, 4:] @ levers[4:])
    assert np.allclose(found.sources[8][0], 3e-4 * 9.80665 * cells[:, :4] @ levers[:4])


def test_runs_on_the_same_gains_share_their_errors():
    """Each cell's gain error is one error for every run on those boards: one source per gains and cell, each
    fitted recording's series its cell's recorded load × g × the relative SE at the cell's lever (averaged runs:
    their mean loads); none for a recording whose runs did not all use those gains or that has no cells."""
    from poise.cmd_dynamic import RunOf, _gain_rel_se, _gain_sources

    meta = {"board_gains": {"boards": {"sim0": [1.05] * 4, "sim1": [1.0] * 4}},
            "board_gain_se": {"sim0": [1e-3] * 4, "sim1": [2e-3] * 4}}  # fmt: skip
    se, key, weight = _gain_rel_se(meta)
    assert np.allclose(se, [1e-3] * 4 + [2e-3] * 4) and weight is None  # no weight SD recorded
    no_se, same_key, _ = _gain_rel_se({"board_gains": meta["board_gains"]})  # gains without SEs
    assert no_se is None and same_key == key
    other_se, other_key, _ = _gain_rel_se(
        meta | {"board_gains": {"boards": {"x": [2.0] * 4, "y": [1.0] * 4}}}
    )
    assert other_key != key
    weighed_meta = {"board_gains": {**meta["board_gains"], "weight_kg": 10.0}, "board_gain_scale_se": 1e-3}
    assert _gain_rel_se(weighed_meta)[2] == "10 kg ± 0.001"
    t = np.arange(20) * 0.01
    q = np.zeros((20, 12))
    xy = np.arange(16.0).reshape(8, 2) / 100
    cells = np.random.default_rng(0).uniform(1.0, 4.0, (20, 8))
    rec = DynamicRecording("tulip", "right", [f"j{k}" for k in range(12)], t, q, wrench=np.zeros((20, 6)),
                           meta={"cells_xy_m": " ".join(map(str, xy.ravel()))}, cells=cells)  # fmt: skip
    bare = DynamicRecording("tulip", "right", rec.joint_names, t, q, wrench=np.zeros((20, 6)))

    def run(se, k):
        return RunOf("p.json", "sha", {}, None, gain_rel_se=se, gains_key=k)

    runs = [run(se, key), run(se, key), run(None, None), run(other_se, other_key), run(se, key)]
    # with the known weight's uncertainty: one more source, the recordings' whole wrench × its relative SD
    weighed = [
        r._replace(gain_scale_se=1e-3, weight_key="10 kg ± 0.001") if r.gains_key == key else r for r in runs
    ]
    rec_w = DynamicRecording("tulip", "right", rec.joint_names, t, q, wrench=np.full((20, 6), 2.0),
                             meta=rec.meta, cells=cells)  # fmt: skip
    found = _gain_sources([[0, 1], [2], [3], [4]], weighed, [rec_w, rec_w, rec_w, bare])
    with_weight = found.sources
    assert len(with_weight) == 17 and found.weight_in == [1, 4] and found.cells_in == [1, 3]
    scale = [s for s in with_weight if s[0] is not None and s[0].shape == (20, 3) and np.allclose(s[0], 2e-3)]
    assert len(scale) == 1 and scale[0][1] is None and scale[0][2] is None and scale[0][3] is not None
    # runs 0 and 1 averaged; 2 without gains; 3 on other boards; 4 on these gains but without recorded cells
    found = _gain_sources([[0, 1], [2], [3], [4]], runs, [rec, rec, rec, bare])
    sources = found.sources
    assert len(sources) == 16 and found.cells_in == [1, 3] and found.weight_in == []  # 8 cells of each gains
    mine = [s for s in sources if s[0] is not None]
    assert len(mine) == 8 and all(s[1] is None and s[2] is None and s[3] is None for s in mine)
    assert np.allclose(mine[5][0], 2e-3 * 9.80665 * cells[:, 5, None] * cell_levers(xy)[5])
    assert all(s[2] is not None for s in sources if s[0] is None)
