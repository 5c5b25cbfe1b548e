"""Static posture design for any biped: TUlip as a URDF file, and a second biped with its own names and legs."""

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from design.criteria import min_postures, n_identifiable
from design.plot import _skeleton
from formats.plan import load_plan
from poise.cli import main
from robots.kinematics import link_frames, site_pose
from robots.registry import get_model
from robots.stance import posture_problems, random_double_support
from robots.stance_spec import default_base, other_base, stance_spec

TULIP_URDF = Path(__file__).parents[1] / "robots" / "data" / "tulip" / "tulip.urdf"
QUICK = ["--postures", "15", "--placements", "3", "--sharpness", "8", "--seed", "3"]

# A second biped: TUlip's joints, but 54 mm longer shins, its own sole and base names, and it stands on the
# sole of its second leg (so the other foot is placed at negative y).
STILT = """
format = "poise robot description"
urdf = "stilt.urdf"
name = "stilt"

[[sites]]
name = "foot_a"
link = "foot_r"
xyz = [0, 0, -0.04]
rect = [-0.06, 0.18, -0.09, 0.06]

[[sites]]
name = "foot_b"
link = "foot_l"
xyz = [0, 0, -0.04]
rect = [-0.06, 0.18, -0.06, 0.09]

[bases]
east = "foot_a"
west = "foot_b"

[stance]
base = "west"
placement_x = [-0.75, 0.75]
placement_y = [-0.5, 0.1]
com_z = [0.6, 0.8]
neutral_bend = [0.2, 0.8]
neutral = { theta3 = -1.0, theta4 = 2.0, theta5 = -1.0, theta9 = -1.0, theta10 = 2.0, theta11 = -1.0 }
"""


@pytest.fixture(scope="module")
def stilt_file(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("stilt")
    urdf = TULIP_URDF.read_text(encoding="utf-8")
    assert urdf.count('xyz="0 0 -0.276"') == 2  # the two knee-to-ankle origins
    (d / "stilt.urdf").write_text(urdf.replace('xyz="0 0 -0.276"', 'xyz="0 0 -0.33"'), encoding="utf-8")
    (d / "stilt.poise.toml").write_text(STILT, encoding="utf-8")
    return d / "stilt.poise.toml"


def _plan_postures(robot: str, out: Path, *extra: str) -> dict:
    assert main(["plan", "postures", robot, *QUICK, *extra, "--json", "--out", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_tulip_urdf_gives_the_builtin_kappa(tmp_path, capsys):
    a = _plan_postures("tulip", tmp_path / "builtin.json")
    b = _plan_postures(str(TULIP_URDF), tmp_path / "urdf.json")
    capsys.readouterr()
    assert a["kappa"].keys() == b["kappa"].keys() == {"right", "left"}
    for base in a["kappa"]:
        assert b["kappa"][base] == pytest.approx(a["kappa"][base], rel=1e-6)
    assert a["kappa"]["right"] < a["solver"]["kappa_initial"]
    assert "robot_file" not in a and Path(b["robot_file"]) == TULIP_URDF.resolve()
    assert main(["plan", "check", str(tmp_path / "urdf.json")]) == 0


def test_second_biped_through_the_same_code_path(stilt_file, tmp_path, capsys):
    model = get_model(str(stilt_file))
    assert default_base(model) == "west" and other_base(model) == "east"
    out = tmp_path / "stilt.json"
    # two starts in two worker processes: they must rebuild the model from the file (not a built-in name)
    doc = _plan_postures(str(stilt_file), out, "--starts", "2", "--workers", "2")
    assert doc["robot"] == "stilt" and doc["base"] == "west" and set(doc["kappa"]) == {"west", "east"}
    assert all(r["kappa"] < r["kappa_initial"] for r in doc["solver"]["starts"])
    plan = load_plan(out)
    lo, hi = stance_spec(model).placement_bounds[1]
    assert all(lo - 1e-9 <= pl.other_foot[1] <= hi + 1e-9 for pl in plan.placements)
    assert all(pl.other_foot[1] < 0 for pl in plan.placements)  # the other foot is the right one
    for p in plan.postures:
        assert posture_problems(model, p.q, margin=0.08) == []
    capsys.readouterr()
    assert main(["plan", "check", str(out)]) == 0
    assert "plan OK" in capsys.readouterr().out
    assert main(["plan", "show", str(out), "--out", str(tmp_path / "stilt.png")]) == 0
    assert (tmp_path / "stilt.png").stat().st_size > 0


def test_second_biped_legs_and_counts(stilt_file, tmp_path, capsys):
    model = get_model(str(stilt_file))
    tulip = get_model("tulip")
    assert n_identifiable(model) == n_identifiable(tulip)
    assert min_postures(model) == -(-n_identifiable(model) // 2)
    assert main(["plan", "postures", str(stilt_file), "--postures", str(min_postures(model) - 1),
                 "--placements", "1", "--out", str(tmp_path / "x.json")]) == 2  # fmt: skip
    assert f"at least {min_postures(model)}" in capsys.readouterr().err
    q = random_double_support(model, 1, np.random.default_rng(4))[0]
    chains = _skeleton(
        model, link_frames(model, q, "urdf", "west").p, q, SimpleNamespace(params="urdf", base="west")
    )
    assert len(chains) == 2
    root = link_frames(model, q, "urdf", "west").p[0]
    for chain, sole in zip(chains, ("foot_a", "foot_b"), strict=True):
        assert np.allclose(chain[0], root) and len(chain) == 8  # root, six leg links, sole
        assert np.allclose(chain[-1], site_pose(model, q, "urdf", sole, "west")[1])
    # longer shins: the root stands higher above the base sole than TUlip's at the zero posture
    z0 = site_pose(model, np.zeros(model.nq), "urdf", model.root, "west")[1][2]
    assert z0 == pytest.approx(site_pose(tulip, np.zeros(12), "sim", "torso", "left")[1][2] + 0.054, abs=1e-9)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('base = "west"', 'base = "north"', "stance base 'north' is not among [bases]"),
        ("com_z = [0.6, 0.8]", "com_z = [0.8, 0.6]", "com_z must be finite with low ≤ high"),
        ("neutral = { theta3", "neutral = { knee = 1.0, theta3", "neutral names unknown joint 'knee'"),
    ],
)
def test_malformed_stance_is_one_line(stilt_file, tmp_path, capsys, old, new, message):
    bad = stilt_file.parent / "bad.poise.toml"
    bad.write_text(STILT.replace(old, new), encoding="utf-8")
    out = tmp_path / "p.json"
    assert main(["plan", "postures", str(bad), *QUICK, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "stilt" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
