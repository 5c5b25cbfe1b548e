"""`plan check`'s fine-grid check evaluates the dynamics a chunk of samples at a time (`verify.CHUNK_SAMPLES`):
a 3600 s UR5 plan at 1 ms exhausted 24 GB and was killed; the chunks change nothing in what the check finds (every
figure and problem the same as evaluated whole), for an arm with self-collision, both soles and one. A long plan's
figure draws at most `plot.FIGURE_SAMPLES` samples per curve."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formats.trajectory_plan import load_trajectory_plan
from trajectories import plot, verify
from trajectories.plan import plan_model, plan_trajectory

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    "name, margin",
    [("ur5_6s.json", 0.01), ("tulip_double_support_10s.json", None), ("tulip_single_support_6s.json", None)],
)
def test_the_check_in_chunks_finds_what_it_finds_whole(name, margin, monkeypatch):
    plan = load_trajectory_plan(DATA / name)
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    params = plan.params or next(iter(model.params))
    settings = plan.settings
    kw = {"zmp_margin": float(settings.get("zmp_margin", 0.0)), "load_share": float(settings.get("load_share", 0.0)),
          "collision_margin": margin}  # fmt: skip
    whole = verify.check_trajectory(model, traj, plan.base, params, 0.002, **kw).to_dict()
    monkeypatch.setattr(verify, "CHUNK_SAMPLES", 777)  # chunks that do not divide the samples
    chunked = verify.check_trajectory(model, traj, plan.base, params, 0.002, **kw).to_dict()
    assert whole["grid_points"] > 3 * 777
    assert chunked.keys() == whole.keys()
    for key, value in whole.items():
        if isinstance(value, float):
            assert chunked[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert chunked[key] == value, key


def test_the_chunks_join_arrays_and_keep_a_dataclass_s_other_fields(monkeypatch):
    from robots.one_sole import OneSole

    monkeypatch.setattr(verify, "CHUNK_SAMPLES", 4)
    x = np.arange(10.0)[:, None] * np.ones((1, 3))
    assert np.array_equal(verify.in_chunks(lambda a: 2 * a, x), 2 * x)
    calls = []

    def sole(a):
        calls.append(len(a))
        return OneSole(a[:, 0], a[:, 1], a[:, 2], a[:, 0], a[:, 1], a[:, 2], feet_gap=0.05)

    s = verify.in_chunks(sole, x)
    assert calls == [4, 4, 2] and s.feet_gap == 0.05 and np.array_equal(s.margin, x[:, 0])


def test_a_long_plans_figure_draws_at_most_figure_samples(tmp_path, monkeypatch):
    doc = json.loads((DATA / "ur5_6s.json").read_text())
    doc["trajectory"]["duration_s"] = 600.0  # a hundred periods: 60 001 samples at 10 ms
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    plan = load_trajectory_plan(path)
    model = plan_model(plan)
    fig = plot.trajectory_figure(model, plan_trajectory(plan, model), plan.base, plan.params or "urdf")
    try:
        lines = fig.axes[0].get_lines()[: model.nq]
        t = np.asarray(lines[0].get_xdata(), dtype=float)
        assert len(t) <= plot.FIGURE_SAMPLES + 1 and t[0] == 0.0 and t[-1] == pytest.approx(600.0)
        assert np.allclose(np.diff(t), 600.0 / plot.FIGURE_SAMPLES, rtol=1e-6)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_the_chunks_report_their_progress_stage_by_stage(monkeypatch, capsys):
    """`plan check` draws a bar per stage of the fine-grid check (a 3600 s plan's took 2:15 under a spinner):
    each chunked stage reports its samples done of all, ending at all, and nothing is reported outside
    `reporting`."""
    plan = load_trajectory_plan(DATA / "tulip_double_support_10s.json")
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    monkeypatch.setattr(verify, "CHUNK_SAMPLES", 1000)
    said: list[tuple[str, int, int]] = []
    with verify.reporting(lambda what, done, total: said.append((what, done, total))):
        check = verify.check_trajectory(model, traj, plan.base, plan.params, 0.002, zmp_margin=0.06,
                                        load_share=0.25)  # fmt: skip
    stages = list(dict.fromkeys(w for w, _, _ in said))
    assert set(stages) == {"the two soles' split", "the boards' wrench"}, stages  # (its torques: the split's)
    for stage in stages:
        done = [d for w, d, _ in said if w == stage]
        total = {t for w, _, t in said if w == stage}
        assert total == {check.grid_points} and done == sorted(done) and done[-1] == check.grid_points
        assert len(done) == -(-check.grid_points // 1000)  # one report a chunk
    n = len(said)
    verify.check_trajectory(model, traj, plan.base, plan.params, 0.002)
    assert len(said) == n  # the listener is gone
    from poise import cmd_plan_trajectory
    from poise.cli import main

    monkeypatch.setattr(cmd_plan_trajectory, "draws_progress", lambda: True)  # as on a terminal
    assert main(["plan", "check", str(DATA / "tulip_double_support_10s.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]  # stdout keeps the JSON with the bar drawn
