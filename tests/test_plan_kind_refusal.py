"""`formats.trajectory_plan.plan_document`: every plan reader's one recognition of the kind of file it is given
(`plan check`/`show`/`augment`, `plan forecast`, `simulate trajectory`, `plan trajectory --prior`): the plan it
reads returned, any other file refused in one line naming the file, what it is and what the command reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formats import plan as posture
from formats import trajectory_plan
from formats.dynamic_recording import MAGIC
from formats.errors import DataError
from formats.trajectory_plan import plan_document

UR5 = Path(__file__).parent / "data" / "ur5_6s.json"
BOTH = ("posture", "trajectory")
PRIOR = ("trajectory", "recording")


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _refusal(*args) -> str:
    with pytest.raises(DataError) as err:
        plan_document(*args)
    return str(err.value)


def test_the_kinds_a_command_reads_are_returned(tmp_path):
    doc = json.loads(UR5.read_text())
    assert plan_document(UR5, "plan forecast") == doc
    assert plan_document(str(UR5), "plan check", BOTH) == doc
    assert plan_document(UR5, "plan trajectory --prior", PRIOR, "--prior ") == doc
    postures = _write(tmp_path, "p.json", json.dumps({"format": posture.FORMAT, "version": 1}))
    assert plan_document(postures, "plan check", BOTH) == {"format": posture.FORMAT, "version": 1}


def test_json_of_another_kind_is_named_by_its_format_with_what_the_command_reads(tmp_path):
    postures = _write(tmp_path, "p.json", json.dumps({"format": posture.FORMAT, "version": 1}))
    err = _refusal(postures, "plan forecast")
    assert err == (f"{postures}: not a trajectory plan (format {posture.FORMAT!r}): `poise plan forecast` reads "
                   f"trajectory plans ({trajectory_plan.FORMAT!r}, `plan trajectory`)")  # fmt: skip
    params = _write(tmp_path, "params.json", json.dumps({"format": "poise parameter set"}))
    err = _refusal(params, "plan check", BOTH)
    assert err.startswith(f"{params}: not a plan (format 'poise parameter set'): `poise plan check` reads ")
    assert f"posture plans ({posture.FORMAT!r}, `plan postures`)" in err
    assert f"trajectory plans ({trajectory_plan.FORMAT!r}, `plan trajectory`)" in err
    # the prior's refusal: led by the option, naming recordings among what it reads
    err = _refusal(postures, "plan trajectory --prior", PRIOR, "--prior ")
    assert err.startswith(f"--prior {postures}: not a trajectory plan (format {posture.FORMAT!r}): ")
    assert err.endswith("`plan trajectory`) and dynamic recordings (CSV)"), err
    # a command of one plan kind refuses the other by its format
    err = _refusal(UR5, "plan augment", ("posture",))
    assert err == (f"{UR5}: not a posture plan (format {trajectory_plan.FORMAT!r}): `poise plan augment` reads "
                   f"posture plans ({posture.FORMAT!r}, `plan postures`)")  # fmt: skip
    listed = _write(tmp_path, "list.json", "[1, 2]")
    assert "not a trajectory plan (format None)" in _refusal(listed, "simulate trajectory")


def test_a_recording_a_mislabelled_trajectory_and_broken_json_are_said_as_such(tmp_path):
    rec = _write(tmp_path, "rec.csv", f"# {MAGIC} v1\n# robot: ur5\nt,q\n0,0\n")
    err = _refusal(rec, "plan forecast")
    assert err.startswith(
        f"{rec}: a dynamic recording; `poise plan forecast` reads trajectory plans (JSON)"
    ), err
    assert _refusal(rec, "plan check", BOTH).startswith(
        f"{rec}: a dynamic recording; `poise plan check` reads plans"
    )
    mislabelled = _write(
        tmp_path, "m.json", json.dumps(json.loads(UR5.read_text()) | {"format": posture.FORMAT})
    )
    for args in ((mislabelled, "plan forecast"), (mislabelled, "plan trajectory --prior", PRIOR, "--prior ")):
        err = _refusal(*args)
        assert (
            "declares a posture plan" in err and f"fix its format field to {trajectory_plan.FORMAT!r}" in err
        )
        assert err.startswith(("--prior " if len(args) > 2 else "") + f"{mislabelled}: ")
    text = UR5.read_text()
    trunc = _write(tmp_path, "trunc.json", text[: len(text) // 2])
    with pytest.raises(json.JSONDecodeError) as parsed:
        json.loads(text[: len(text) // 2])
    said = f"{trunc}: not valid JSON ({parsed.value.msg}, line {parsed.value.lineno})"
    assert _refusal(trunc, "plan check", BOTH) == said
    assert _refusal(trunc, "plan trajectory --prior", PRIOR, "--prior ") == f"--prior {said}"


def test_a_prior_not_meant_as_json_is_neither_kind(tmp_path):
    """Where the command reads recordings too (told apart before), a file neither named .json nor opening with a
    brace is not judged as JSON: it is neither kind; the same text named .json is, in the JSON reader's words."""
    csv = _write(tmp_path, "other.csv", "# not a recording\nt,q\n0,0\n")
    err = _refusal(csv, "plan trajectory --prior", PRIOR, "--prior ")
    assert err == f"--prior {csv}: neither a trajectory plan (JSON) nor a dynamic recording (CSV)"
    named = _write(tmp_path, "other.json", "# not a recording\nt,q\n0,0\n")
    assert _refusal(named, "plan trajectory --prior", PRIOR, "--prior ").startswith(
        f"--prior {named}: not valid JSON ("
    )
    # without recordings among the kinds, the same file is judged as JSON
    assert _refusal(csv, "plan forecast").startswith(f"{csv}: not valid JSON (")
