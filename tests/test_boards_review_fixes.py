"""`poise boards` review fixes: Enter without the weight, endpoint checks, the read's window, Ctrl-C, CoP without a
tare, battery in %, the tare cue and the reconnect status line."""

import argparse
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest
from test_board_gains import bench_as_real_boards  # noqa: F401  (the fixture, shared)

import poise.argtypes as at
import poise.cmd_boards as cb
from drivers.emulators.wbb import Faults, WbbEmulator
from drivers.wbb import protocol as P
from drivers.wbb.board import HidBoard
from formats.errors import DeviceError
from poise.cli import main

BT = "bt:00:1E:35:00:00:01,00:1E:35:00:00:02"


@pytest.fixture
def real_boards(bench_as_real_boards):  # noqa: F811
    """`--boards bt:…` served by the emulated bench (the HID driver over its links): test_board_gains' fixture."""
    return bench_as_real_boards


def _calibrate(out, *extra: str) -> int:
    """`boards calibrate` of the emulated bench behind `BT` with a 10 kg weight, gains to `out`."""
    return main(["boards", "calibrate", "--boards", BT, "--weight", "10", "--seconds", "0.3", "--tare-s", "0.5",
                 "--out", str(out), *extra])  # fmt: skip


def _person(world, asked: list[str], early=lambda prompt: False):
    """At each prompt: the weight over the cell it names (asked or asked again), off when told to take it;
    `early(prompt)` True: Enter pressed with nothing moved (the test's mistake)."""

    def answer(prompt: str) -> str:
        asked.append(prompt)
        if early(prompt):
            return ""
        for k, c in enumerate(P.CELLS):
            if f"over cell {c} " in prompt or f"over cell {c}," in prompt or f"on cell {c} of" in prompt:
                world.place_weight(k, 10.0)
        if prompt.startswith("Take"):
            world.place_weight(None, 10.0)
        return ""

    return answer


# -- 1: Enter pressed without the weight


def test_enter_without_the_weight_asks_again_then_reads_it(real_boards, tmp_path, monkeypatch):
    world, asked = real_boards, []

    # the first time at TR, Enter with nothing placed; the second time (asked again) the weight goes on
    person = _person(world, asked, early=lambda p: p.startswith("Place") and "over cell TR " in p)
    monkeypatch.setattr("drivers.session.ask_on_stderr", person)
    out = tmp_path / "g.json"
    assert _calibrate(out) == 0 and out.exists()
    again = [a for a in asked if a.startswith("no load change")]
    assert len(again) == 1
    assert "no load change on boards sim0, sim1 (every cell within its noise)" in again[0]
    assert "place the 10 kg weight over cell TR, then press Enter" in again[0]


def test_a_weight_never_placed_is_refused_as_no_load_change(real_boards, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("builtins.input", lambda: "")
    args = ["boards", "calibrate", "--boards", BT, "--weight", "10", "--seconds", "0.2", "--tare-s", "0.3",
            "--out", str(tmp_path / "g.json"), "--json"]  # fmt: skip
    assert main(args) == 2
    cap = capsys.readouterr()
    assert cap.err.count("no load change") == 3  # asked twice more, then refused
    assert "place the 10 kg weight over cell TR when asked" in cap.err and "within [0.5, 2]" not in cap.err
    assert "Traceback" not in cap.err and json.loads(cap.out)["ok"] is False
    assert not (tmp_path / "g.json").exists()


# -- 2: endpoints


def test_endpoints_sim_in_any_case_and_bad_bluetooth_addresses(capsys):
    from drivers.wbb.open import board_drivers

    assert at.boards_endpoint("SIM") == "sim" and at.boards_endpoint("Sim") == "sim"
    assert at.boards_endpoint("bt:00:1e:35:3B:7C:12") == "bt:00:1e:35:3B:7C:12"
    for bad in ("bt:notamac", "bt:00:1E:35:00:00:01,00:1E:35:00:00", "bt:00:1E:35:00:00:0G"):
        with pytest.raises(argparse.ArgumentTypeError, match="not a Bluetooth address"):
            at.boards_endpoint(bad)
    assert main(["boards", "read", "--boards", "bt:notamac", "--seconds", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "bt:notamac: not a Bluetooth address" in err and "AF_BLUETOOTH" not in err
    # `poise run` takes the same --boards, refused as it is parsed (before the plan is read)
    assert main(["run", "no-such-plan.json", "--robot", "sim", "--boards", "bt:notamac", "--out", "r"]) == 2
    assert "bt:notamac: not a Bluetooth address" in capsys.readouterr().err
    with pytest.raises(DeviceError, match="not a Bluetooth address"):
        board_drivers("bt:notamac")
    with pytest.raises(DeviceError, match="emulated bench .*one of sim, bt:MAC"):
        board_drivers("SIM")


# -- 3: the read


def _samples(kg):
    return [SimpleNamespace(kg=np.asarray(k, float)) for k in kg]


def test_window_is_the_mean_and_sd_of_every_report():
    rng = np.random.default_rng(1)
    kg = rng.normal(5.0, 0.2, (300, 4))
    w = cb._Window()
    for chunk in np.array_split(kg, 17):
        w.add(_samples(chunk))
    w.add([])
    assert w.n == 300
    np.testing.assert_allclose(w.mean[:4], kg.mean(axis=0))
    np.testing.assert_allclose(w.sd[:4], kg.std(axis=0, ddof=1))
    np.testing.assert_allclose(w.sd[4], kg.sum(axis=1).std(ddof=1))


def test_untared_cop_is_shown_and_an_empty_board_has_none(capsys):
    from rich.console import Console

    loaded, empty = cb._Window(), cb._Window()
    loaded.add(_samples([[3.0, 3.0, 1.0, 1.0]] * 5))
    empty.add(_samples([[-0.5, -0.5, 0.4, 0.4]] * 5))
    boards = [SimpleNamespace(name=n, stats=SimpleNamespace(bad=0, battery_percent=69)) for n in ("a", "b")]
    assert loaded.cop_m() is not None and empty.cop_m() is None
    c = Console(width=200, record=True)
    c.print(cb._table(boards, [loaded, empty], 2.0, tared=False))
    text = " ".join(c.export_text().split())
    assert "nan" not in text and "whole 2.0 s read" in text and "battery [%]" in text and "69" in text
    assert "untared" in text and "CoP —: under 0.5 kg" in text


def test_battery_byte_is_given_in_percent_as_hid_wiimote_does():
    assert P.battery_percent(0xB0) == 69 and P.battery_percent(255) == 100 and P.battery_percent(0) == 0
    assert P.battery_percent(None) is None


def test_read_json_is_over_the_whole_window_and_ctrl_c_keeps_what_was_read(monkeypatch, capsys):
    calls = [0]

    def sleep(s):
        calls[0] += 1
        if calls[0] > 8:
            raise KeyboardInterrupt
        time.sleep(s)

    monkeypatch.setattr(cb, "time", SimpleNamespace(sleep=sleep, monotonic=time.monotonic))
    assert main(["boards", "read", "--boards", "sim", "--seconds", "30", "--json"]) == 130
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["interrupted"] is True and 0 < doc["window_s"] < 5 and doc["tared"] is False
    b = doc["boards"][0]
    assert b["reports"] > 0 and len(b["kg_sd"]) == 4 and b["hid_wiimote_battery_percent"] == 69
    assert "not a charge level" in doc["battery_note"]
    assert "interrupted after" in cap.err and "Traceback" not in cap.err


# -- 4: the tare cue


def _stepping_on(monkeypatch, world, steps: list[tuple[float, float]]) -> None:
    """Once the tare is done, a load over cell TR of each board that changes to kg after s seconds, per step."""
    import threading

    import drivers.wbb.board as wbb_board

    real = wbb_board.tare_all

    def person():
        for s, kg in steps:
            time.sleep(s)
            world.place_weight(0, kg)

    def tare_then_step_on(*a, **k):
        out = real(*a, **k)
        threading.Thread(target=person, daemon=True).start()
        return out

    monkeypatch.setattr(wbb_board, "tare_all", tare_then_step_on)


def test_tare_ends_with_a_cue_on_stderr(real_boards, monkeypatch, capsys):
    _stepping_on(monkeypatch, real_boards, [(0.1, 10.0)])
    assert main(["boards", "read", "--boards", BT, "--seconds", "0.2", "--tare", "0.3", "--json"]) == 0
    cap = capsys.readouterr()
    assert "tared: step on / put the load on now" in cap.err and "the load stands still" in cap.err
    assert "the load moved" not in cap.err
    doc = json.loads(cap.out)
    assert doc["tared"] is True and doc["interrupted"] is False and doc["drift_kg"] is None


def test_read_after_a_tare_starts_once_the_load_stands_still(real_boards, monkeypatch, capsys):
    """Stepping on (4, 7 kg for 0.4 s each) is not in the window: its mean is the 10 kg standing."""
    _stepping_on(monkeypatch, real_boards, [(0.2, 4.0), (0.4, 7.0), (0.4, 10.0)])
    assert main(["boards", "read", "--boards", BT, "--seconds", "0.5", "--tare", "0.3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settled_after_s"] > 1.0 + 0.8  # the last step, then a second standing still
    for b, emu in zip(
        doc["boards"], real_boards.boards, strict=True
    ):  # 10 kg as the board's cell TR reads it
        on_tr = 10.0 * (1.0 + emu.imp.gain_error[0])
        assert (
            b["total_kg"] == pytest.approx(on_tr, abs=0.05) and b["total_sd_kg"] < 0.2
        )  # stepping on: SD > 2


def test_read_after_a_tare_with_nothing_put_on_reads_the_boards_as_they_are(real_boards, monkeypatch, capsys):
    args = ["boards", "read", "--boards", BT, "--seconds", "0.2", "--tare", "0.3", "--json"]
    assert main([*args, "--wait-s", "0.5"]) == 0
    cap = capsys.readouterr()
    assert "no load held still within 0.5 s: reading the boards as they are" in " ".join(cap.err.split())
    doc = json.loads(cap.out)
    assert doc["settled_after_s"] is None and abs(doc["boards"][0]["total_kg"]) < 0.1
    began = time.monotonic()
    assert main([*args, "--wait-s", "0"]) == 0  # no wait at all
    assert (
        time.monotonic() - began < 0.5 + 2.0
        and json.loads(capsys.readouterr().out)["settled_after_s"] is None
    )


def test_a_load_that_moves_during_the_reading_is_warned(real_boards, monkeypatch, capsys):
    """Read at once after the tare (--wait-s 0) while the weight goes on: the reading holds both, and says so."""
    _stepping_on(monkeypatch, real_boards, [(0.3, 10.0)])
    assert main(["boards", "read", "--boards", BT, "--seconds", "0.8", "--tare", "0.3", "--wait-s", "0",
                 "--json"]) == 0  # fmt: skip
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["drift_kg"] > 2 * 5.0  # both boards' weights arrived within the window
    assert "the load moved by" in " ".join(cap.err.split())


# -- 5: reconnect status


def test_reconnect_attempts_are_reported_as_they_happen():
    emu = WbbEmulator(
        lambda: np.ones(4), rate_hz=100, faults=Faults(disconnect_after=10, refuse_reconnect=True)
    )
    said = []
    board = HidBoard(emu.connect_socketpair, name="b1")
    board.lost_after_s, board.reconnect_delay_s = 0.2, 0.05
    board.on_link = said.append
    board.start()
    try:
        deadline = time.monotonic() + 3
        with pytest.raises(DeviceError, match="b1 lost"):
            while time.monotonic() < deadline:
                board.check()
                time.sleep(0.02)
    finally:
        board.close()
        emu.close()
    assert said == [f"board b1: link lost, reconnecting (attempt {k} of 3) …" for k in (1, 2, 3)]


def test_read_shows_reconnects_only_when_progress_is_drawn(monkeypatch):
    seen = []
    real = cb.opened_boards

    def spy(spec):
        cm = real(spec)

        class Wrap:
            def __enter__(self):
                got = cm.__enter__()
                seen.append(got[0])
                return got

            def __exit__(self, *exc):
                return cm.__exit__(*exc)

        return Wrap()

    monkeypatch.setattr(cb, "opened_boards", spy)
    monkeypatch.setattr(cb, "draws_progress", lambda: True)
    assert main(["boards", "read", "--boards", "sim", "--seconds", "0.1", "--json"]) == 0
    monkeypatch.setattr(cb, "draws_progress", lambda: False)
    assert main(["boards", "read", "--boards", "sim", "--seconds", "0.1", "--json"]) == 0
    assert all(b.on_link is cb._report_link for b in seen[0])
    assert all(b.on_link is None for b in seen[1])


# -- second review: Enter pressed too early at a later cell; the read's live table wherever progress is drawn


def test_enter_too_early_at_the_second_cell_asks_again(real_boards, tmp_path, monkeypatch):
    """At BR the weight is still over TR when Enter is pressed: a load, but not over the asked cell. That is no
    placement (not a misplaced weight refused by the one-cell check): the person is asked again."""
    world, asked = real_boards, []

    # the first time at BR, Enter with the weight still over TR
    person = _person(world, asked, early=lambda p: p.startswith("Place") and "over cell BR " in p)
    monkeypatch.setattr("drivers.session.ask_on_stderr", person)
    out = tmp_path / "g.json"
    assert _calibrate(out) == 0 and out.exists()
    again = [a for a in asked if a.startswith("no load")]
    assert len(again) == 1, asked
    assert (
        "no load on cell BR of boards sim0, sim1 (within its noise: is the weight still over cell TR?)"
        in again[0]
    )
    assert "place the 10 kg weight over cell BR, then press Enter" in again[0]
    gains = np.array([b["gain"] for b in json.loads(out.read_text())["boards"]])
    assert np.all(np.abs(gains - 1) < 0.2)  # BR's gain from the weight over BR, not from the early reading


def test_an_early_enter_never_followed_by_the_move_is_no_load_change(
    real_boards, tmp_path, monkeypatch, capsys
):
    world = real_boards

    def person(prompt: str) -> str:  # the weight goes over TR and stays there
        if "over cell TR " in prompt:
            world.place_weight(0, 10.0)
        return ""

    monkeypatch.setattr("drivers.session.ask_on_stderr", person)
    args = ["boards", "calibrate", "--boards", BT, "--weight", "10", "--seconds", "0.2", "--tare-s", "0.3",
            "--out", str(tmp_path / "g.json")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no load on cell BR" in err and "place the 10 kg weight over cell BR when asked" in err
    assert "reads +" not in err and not (tmp_path / "g.json").exists()  # not the one-cell check's refusal


def test_read_draws_its_live_table_on_stderr_with_json_too(monkeypatch, capsys):
    made = []

    class Spy:
        def __init__(self, *a, **k):
            made.append(k)

        def start(self):
            made.append("start")

        def update(self, table):
            made.append("update")

        def stop(self):
            made.append("stop")

    monkeypatch.setattr(cb, "Live", Spy)
    monkeypatch.setattr(cb, "draws_progress", lambda: True)  # stderr a terminal, stdout a pipe
    assert main(["boards", "read", "--boards", "sim", "--seconds", "0.2", "--json"]) == 0
    assert made[0]["console"] is cb.err_console and "update" in made and made[-1] == "stop"
    assert json.loads(capsys.readouterr().out)["boards"]
    made.clear()
    monkeypatch.setattr(cb, "draws_progress", lambda: False)  # stderr a log: no live table
    assert main(["boards", "read", "--boards", "sim", "--seconds", "0.1"]) == 0
    assert made == []


def test_a_weight_just_off_the_cell_before_is_asked_again(real_boards, tmp_path, monkeypatch):
    """Enter at BR with the weight still over TR, a centimetre off (0.2 kg on BR: beyond the noise): BR does not
    carry the weight, so it is asked again — not refused as a weight between two cells."""
    world, asked = real_boards, []

    def off_tr(prompt: str) -> bool:  # the first time at BR: the weight still over TR, a centimetre off
        first = prompt.startswith("Place") and "over cell BR " in prompt
        for emu in world.boards:
            emu.load_override = np.array([9.8, 0.2, 0.0, 0.0]) if first else None
        return first

    monkeypatch.setattr("drivers.session.ask_on_stderr", _person(world, asked, early=off_tr))
    out = tmp_path / "g.json"
    assert _calibrate(out) == 0 and out.exists()
    assert [a for a in asked if a.startswith("no load")] == [
        next(a for a in asked if a.startswith("no load on cell BR"))
    ]


# -- reports lost over the air: the timeline finds them from the arrival times


def indexed_board_run(faults: Faults, seconds: float):
    """An 80 Hz board converting on a known clock over the socket link, each report's TR/BR loads carrying its
    conversion's index, read for `seconds` and placed on a BoardTimeline: (reports, timeline, their conversion
    indices, {index: its conversion's end}, W)."""
    from drivers.board_timeline import BoardTimeline

    w, t0, done, ends = 1 / 80, time.monotonic(), [0], {}

    def converter():  # conversion i ends at t0 + (i+1)·w; its TR/BR loads carry i
        n, out = int((time.monotonic() - t0) / w), []
        for i in range(done[0], n):
            out.append(np.array([(i % 100) * 0.1, (i // 100 % 100) * 0.1, 5.0, 5.0]))
            ends[i] = t0 + (i + 1) * w
        done[0] = n
        return out

    emu = WbbEmulator(lambda: np.zeros(4), faults=faults, conversions=converter, seed=3)
    board = HidBoard(emu.connect_socketpair, name="bt")
    try:
        board.start()
        board.drain()
        got = board.collect(seconds)
    finally:
        board.close()
        emu.close()
    tl = BoardTimeline()
    for s in got:
        tl.add(s.t, s.seq, s.kg)
    idx = np.array([round(s.kg[0] / 0.1) + 100 * round(s.kg[1] / 0.1) for s in got])
    return got, tl, idx, ends, w


def test_reports_lost_over_the_air_keep_every_report_at_its_conversion_time():
    """An 80 Hz board converting on a known clock, a tenth of its reports lost silently over the link (the
    driver's count shows no gap): every report placed within a few ms of its conversion's end, the losses counted."""
    got, tl, idx, ends, w = indexed_board_run(Faults(drop=0.1), 3.0)
    assert np.all(np.diff([s.seq for s in got]) == 1)  # the driver saw no gap
    lost = idx[-1] - idx[0] + 1 - len(idx)
    assert lost > 10 and tl.lost() == lost
    assert tl.period() == pytest.approx(w, rel=2e-3)
    err = tl.ends() - np.array([ends[i] for i in idx])
    assert abs(np.median(err)) < 3e-3 and np.quantile(np.abs(err), 0.95) < 5e-3


def test_a_calibration_block_of_one_count_per_17_kg_is_refused_naming_the_cell():
    from drivers.emulators.wbb import DEFAULT_CAL
    from drivers.wbb.calibration import Calibration

    tiny = DEFAULT_CAL.copy()
    tiny[:, 2] = [1000, 1001, 1002]  # TL: 1 count per 17 kg
    with pytest.raises(ValueError, match=r"cell TL: raw values 1000/1001/1002 .* span 1/1 counts per 17 kg"):
        Calibration(tiny)
    back = DEFAULT_CAL.copy()
    back[2, 1] = back[1, 1] - 5  # BR: 34 kg below 17 kg
    with pytest.raises(ValueError, match=r"cell BR: .* do not increase with load"):
        Calibration(back)


# -- third review: a board that stops sending or is lost mid-read; the defaults in --help; calibrate's stages


LOADS = np.array([1.0, 2.0, 3.0, 4.0])  # kg per cell (TR, BR, TL, BL) on every emulated board


@pytest.fixture
def two_boards(monkeypatch):
    """`boards read` of two emulated 80 Hz boards (`--boards` ignored): the second's faults and its driver's wait
    before each reconnect attempt set by the test (`two_boards(faults, reconnect_delay_s)`)."""
    from contextlib import contextmanager

    made = []

    def setup(faults: Faults, reconnect_delay_s: float):
        @contextmanager
        def opened(spec):
            emus = [
                WbbEmulator(lambda: LOADS, name="good"),
                WbbEmulator(lambda: LOADS, name="bad", faults=faults),
            ]
            made.extend(emus)
            boards = [HidBoard(e.connect_socketpair, index=k, name=e.name) for k, e in enumerate(emus)]
            boards[1].lost_after_s, boards[1].reconnect_delay_s = 0.2, reconnect_delay_s
            for b in boards:
                b.start()
            try:
                yield boards, None
            finally:
                for b in boards:
                    b.close()

        monkeypatch.setattr(cb, "opened_boards", opened)

    yield setup
    for e in made:
        e.close()


def test_a_board_that_stops_sending_mid_read_is_warned_with_both_counts(two_boards, capsys):
    """The second board stops after 40 reports (half a second at 80 Hz), not yet declared lost (its driver waits
    before reconnecting): exit 0, but one warning line naming it with its count and the count its rate gives, and
    the same in the JSON."""
    two_boards(Faults(disconnect_after=40, refuse_reconnect=True), reconnect_delay_s=30.0)
    assert main(["boards", "read", "--boards", "sim", "--seconds", "1.5", "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    good, bad = doc["boards"]
    assert bad["reports"] <= 40 and good["reports"] > 100
    assert good["reports_expected"] == pytest.approx(120, abs=8) and good["reports"] >= 0.9 * 120
    assert doc["few_reports"] == [{"board": "bad", "reports": bad["reports"], "expected": bad["reports_expected"],
                                   "nominal_hz": 80.0}]  # fmt: skip
    warned = [line for line in cap.err.splitlines() if line.startswith("warning: board")]
    assert warned == [line for line in warned if f"board bad: {bad['reports']} reports in the read, "
                      f"{bad['reports_expected']} expected at its nominal 80 Hz" in line]  # fmt: skip
    assert len(warned) == 1
    np.testing.assert_allclose(bad["kg"], LOADS, atol=0.05)  # its means: over the reports it did send


def test_a_board_lost_mid_read_fails_with_the_partial_means(two_boards, capsys):
    """Lost for good 0.5 s into a 20 s read: exit 2 with the error line, and the means of what was read — in the
    JSON error object (ok: false), or as the table on stdout."""
    for as_json in (True, False):
        two_boards(Faults(disconnect_after=40, refuse_reconnect=True), reconnect_delay_s=0.05)
        began = time.monotonic()
        args = ["boards", "read", "--boards", "sim", "--seconds", "20"]
        assert main([*args, "--json"] if as_json else args) == 2
        assert time.monotonic() - began < 10
        cap = capsys.readouterr()
        errors = [line for line in cap.err.splitlines() if line.startswith("poise: error:")]
        assert len(errors) == 1 and "board bad lost and not reconnected" in errors[0]
        assert "s into the read: the means" in errors[0] and "Traceback" not in cap.err
        if as_json:
            doc = json.loads(cap.out)
            assert doc["ok"] is False and doc["error"] in errors[0]
            assert 0 < doc["window_s"] < 10 and doc["interrupted"] is False
            for b in doc["boards"]:
                np.testing.assert_allclose(b["kg"], LOADS, atol=0.05)
                assert b["total_kg"] == pytest.approx(LOADS.sum(), abs=0.1)
        else:
            assert "balance boards: means over the whole" in " ".join(cap.out.split())
            rows = {
                r[1]: r for line in cap.out.splitlines() if len(r := [c.strip() for c in line.split("│")]) > 6
            }
            for name in ("good", "bad"):  # the total of the reports read, on both boards
                assert float(rows[name][6]) == pytest.approx(LOADS.sum(), abs=0.1)


def test_read_and_calibrate_help_give_their_defaults(capsys):
    assert main(["boards", "read", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "how long to read [s] (default 5)" in text and "(default 0: no tare)" in text
    assert main(["boards", "calibrate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "reading time per cell [s] (default 2)" in text and "tare time, boards empty [s] (default 4)" in text
    )


def test_calibrate_announces_each_cell_as_it_starts(real_boards, tmp_path, monkeypatch, capsys):
    """Without a terminal nothing else shows progress: one line per cell, in order, each before that cell's
    reading (the person's prompt for it comes first)."""
    said = []
    person = _person(real_boards, said)
    monkeypatch.setattr("drivers.session.ask_on_stderr", person)
    monkeypatch.setattr(cb.err_console, "print", lambda text, *a, **k: said.append(str(text)))
    assert _calibrate(tmp_path / "g.json") == 0
    cells = [k for k, s in enumerate(said) if s.startswith("cell ")]
    assert [said[k][:21] for k in cells] == [f"cell {c} ({i + 1} of 4): the" for i, c in enumerate(P.CELLS)]
    for i, k in enumerate(cells):  # right after the prompt to place the weight over that cell
        assert said[k - 1].startswith("Place") and f"over cell {P.CELLS[i]} " in said[k - 1]
