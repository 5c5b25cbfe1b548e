"""The iCub acceptance's "self-collision respected", checked by geometry poise does not use: MuJoCo's distance
between the links' collision meshes (`mj_geomDistance`, on their convex hulls, which never lie farther apart than
the meshes) along the stored designs every 10 ms, for every link pair poise checks — against the design's margin.
poise's own checks (the design's rows and `plan check`) use the sphere covers of `robots.collision`.
Measured: 24.8 mm at the closest (r_shoulder_1 / r_upper_arm) in both designs; margin 10 mm."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from formats.trajectory_plan import load_trajectory_plan
from robots.collision import collision_pairs
from robots.registry import get_model
from trajectories.plan import plan_trajectory
from trajectories.verify import sample_grid

mujoco = pytest.importorskip("mujoco")
DATA = Path(__file__).parent / "data"
_COMPILER = '<mujoco><compiler discardvisual="true" fusestatic="false" strippath="false"/></mujoco>'


def _mujoco_with_collision_meshes(urdf: Path):
    """The whole iCub URDF as MuJoCo loads it, its collision meshes found where icub-models installed them."""
    text = urdf.read_text().replace("package://iCub/", f"{urdf.parents[2]}/")
    text = re.sub(r"<visual\b.*?</visual>", "", text, flags=re.S)
    return mujoco.MjModel.from_xml_string(re.sub(r"(<robot\b[^>]*>)", r"\1" + _COMPILER, text, count=1))


@pytest.mark.parametrize("design", ["icub_estimation_60s.json", "icub_validation_30s.json"])
def test_the_links_collision_hulls_stay_apart_by_the_margin(design):
    model = get_model("icub-right-arm")
    mj = _mujoco_with_collision_meshes(Path(model.source))
    data = mujoco.MjData(mj)
    pairs = collision_pairs(model)
    links = [s.link for s in pairs.sets]

    def geoms(link: str) -> list[int]:
        body = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, link)
        return [g for g in range(mj.ngeom) if mj.geom_bodyid[g] == body]

    checked = [(links[i], links[j], geoms(links[i]), geoms(links[j])) for i, j in pairs.pairs]
    assert len(checked) >= 20 and all(
        ga and gb for _, _, ga, gb in checked
    )  # every pair has meshes in MuJoCo
    adr = [mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in model.joint_names]
    plan = load_trajectory_plan(DATA / design)
    margin = float(plan.settings["collision_margin"])
    traj = plan_trajectory(plan, model)
    q = traj.sample(sample_grid(traj, 0.01))[0]
    closest = np.inf
    fromto = np.zeros(6)
    for qk in q:
        data.qpos[:] = 0.0
        data.qpos[adr] = qk
        mujoco.mj_kinematics(mj, data)
        for _, _, ga, gb in checked:
            for g1 in ga:
                for g2 in gb:
                    closest = min(closest, mujoco.mj_geomDistance(mj, data, g1, g2, 0.2, fromto))
    assert margin > 0 and closest >= margin, (closest, margin)
