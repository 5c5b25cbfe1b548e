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
    assert b["reports"] > 0 and len(b["kg_sd"]) == 4 and b["battery_percent"] == 69
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
    for b, emu in zip(doc["boards"], real_boards.boards, strict=True):  # 10 kg as the board's cell TR reads it
        on_tr = 10.0 * (1.0 + emu.imp.gain_error[0])
        assert b["total_kg"] == pytest.approx(on_tr, abs=0.05) and b["total_sd_kg"] < 0.2  # stepping on: SD > 2


def test_read_after_a_tare_with_nothing_put_on_reads_the_boards_as_they_are(real_boards, monkeypatch, capsys):
    args = ["boards", "read", "--boards", BT, "--seconds", "0.2", "--tare", "0.3", "--json"]
    assert main([*args, "--wait-s", "0.5"]) == 0
    cap = capsys.readouterr()
    assert "no load held still within 0.5 s: reading the boards as they are" in " ".join(cap.err.split())
    doc = json.loads(cap.out)
    assert doc["settled_after_s"] is None and abs(doc["boards"][0]["total_kg"]) < 0.1
    began = time.monotonic()
    assert main([*args, "--wait-s", "0"]) == 0  # no wait at all
    assert time.monotonic() - began < 0.5 + 2.0 and json.loads(capsys.readouterr().out)["settled_after_s"] is None


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
