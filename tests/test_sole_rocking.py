"""A sole rocking on its board: `robots.stance.corner_index` against the statics of a rigid sole on four equally
stiff corners, and the executor's tally of it per sole (`drivers.trajectory_run.SoleRocking`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drivers.trajectory_run import SoleRocking
from robots.stance import corner_index, sole_poses
from tests.test_dynamic_identify import setup  # noqa: F401 (the module fixture)


def _corner_loads(rect, cop_local: np.ndarray) -> np.ndarray:
    """A rigid rectangular sole on four equal springs at its corners, loaded by a unit weight at cop_local (sole
    frame): each corner's load from the three equilibrium equations (Σf = 1, Σ f·u = u_c, Σ f·v = v_c) and the
    plate staying plane (f = k·(w0 + α u + β v)); negative where the corner would have to pull."""
    x0, x1, y0, y1 = rect
    corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    A = np.column_stack([np.ones(4), corners])  # f = A c for the plane's coefficients c
    lhs = A.T @ A  # Σf, Σ f u, Σ f v of f = A c
    c = np.linalg.solve(lhs, np.array([1.0, *cop_local]))
    return A @ c


def test_the_corner_index_is_one_where_a_corner_unloads(tulip):
    """At the rectangle's centre 0, at the middle of an edge 1, at a corner 2; and for random CoPs on and around
    the sole (placed anywhere), ≤ 1 exactly where the statics load every corner."""
    pose = np.array([0.05, 0.22, 0.4])
    site = sole_poses(tulip, pose)[1][0]
    x0, x1, y0, y1 = tulip.site(site).rect
    c, s = np.cos(pose[2]), np.sin(pose[2])
    R = np.array([[c, -s], [s, c]])

    def base(local):  # a point of the sole's frame in the base frame
        return pose[:2] + R @ np.asarray(local, dtype=float)

    centre = [(x0 + x1) / 2, (y0 + y1) / 2]
    assert corner_index(tulip, site, pose, base(centre)) == pytest.approx(0.0, abs=1e-12)
    assert corner_index(tulip, site, pose, base([x1, centre[1]])) == pytest.approx(1.0)
    assert corner_index(tulip, site, pose, base([centre[0], y0])) == pytest.approx(1.0)
    assert corner_index(tulip, site, pose, base([x0, y1])) == pytest.approx(2.0)
    rng = np.random.default_rng(0)
    local = np.column_stack([rng.uniform(x0, x1, 400), rng.uniform(y0, y1, 400)])
    index = corner_index(tulip, site, pose, np.array([base(p) for p in local]))
    loaded = np.array([_corner_loads((x0, x1, y0, y1), p).min() >= 0 for p in local])
    assert np.array_equal(index <= 1, loaded)
    assert 0.2 < loaded.mean() < 0.8  # both kinds drawn


def test_sole_poses_put_the_base_sole_first_at_the_origin(tulip):
    (base, p0), (other, p1) = sole_poses(tulip, np.array([0.0, 0.2, 0.1]), "right")
    assert base == tulip.base_site("right").name and other != base
    assert np.array_equal(p0, np.zeros(3)) and np.array_equal(p1, [0.0, 0.2, 0.1])


def test_the_tally_counts_the_ticks_on_three_corners():
    tally = SoleRocking()
    for index in (0.2, 0.9, 1.0, 1.3, 1.8):
        tally.add(index)
    assert tally.to_dict() == {"ticks": 5, "rocked_share": pytest.approx(0.4), "max_corner_index": 1.8}
    assert SoleRocking().to_dict()["rocked_share"] == 0.0


def test_identify_dynamic_names_the_soles_that_rocked(setup, tmp_path, capsys):  # noqa: F811
    """`identify dynamic` reads each run's tally from its run.json and names the soles on three corners for more
    than ROCKED_WARN of the ticks, each recording numbered as given and named by its file; a damaged tally loses only the note."""
    from poise.cli import main
    from tests.test_dynamic_identify import _record
    from tests.test_recording_scatter import runs_of_plans

    model, res, truth = setup
    recs = [_record(model, res.trajectory, truth, seed=s) for s in (1, 2)]
    paths = runs_of_plans(recs, ["p1", "p2"], tmp_path)
    tallies = [{"sole_r": {"ticks": 900, "rocked_share": 0.01, "max_corner_index": 1.1}},
               {"sole_r": {"ticks": 900, "rocked_share": 0.27, "max_corner_index": 2.0},
                "sole_l": {"ticks": 900, "rocked_share": 0.04, "max_corner_index": 1.2}}]  # fmt: skip
    for path, soles in zip(paths, tallies, strict=True):
        run = tmp_path / path.split("/")[-2] / "run.json"
        run.write_text(json.dumps({**json.loads(run.read_text()), "soles": soles}))
    capsys.readouterr()
    assert main(["identify", "dynamic", *paths, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["soles_rocked"] == [{"recording": 2, "file": paths[1], "sole": "sole_r", "rocked_share": 0.27}]
    assert main(["identify", "dynamic", *paths]) == 0
    said = "".join(capsys.readouterr().out.split())  # the file named, not its number
    assert f"{paths[1]}: sole_r on three corners for 27 % of its ticks".replace(" ", "") in said
    run = tmp_path / paths[1].split("/")[-2] / "run.json"
    run.write_text(json.dumps({**json.loads(run.read_text()), "soles": "damaged"}))
    assert main(["identify", "dynamic", *paths, "--json"]) == 0
    assert "soles_rocked" not in json.loads(capsys.readouterr().out)
