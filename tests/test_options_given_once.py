"""An option given twice is refused in one line (argparse keeps the last value silently); repeatable ones stay so."""

import pytest

from poise.argtypes import GIVEN, OneLineParser
from poise.cli import build_parser, main


@pytest.mark.parametrize(
    "argv, named",
    [
        (["run", "plan.json", "--robot", "sim", "--time-scale", "1", "--time-scale", "0.25"], "--time-scale"),
        (["identify", "dynamic", "rec.csv", "--cutoff-hz", "2", "--cutoff-hz", "3"], "--cutoff-hz"),
        (["model", "show", "tulip", "--params", "sim", "--params", "mc"], "--params"),
    ],
)
def test_a_value_given_twice_is_refused_naming_the_option_and_both_values(capsys, argv, named):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("poise: error:")
    assert f"{named} given twice" in err
    first, second = argv[argv.index(named) + 1], argv[-1]

    def parsed(v: str) -> str:
        return str(float(v)) if v[0].isdigit() else v

    assert f"({named} {parsed(first)}, then {parsed(second)})" in err


def test_a_repeatable_option_and_a_repeated_flag_stay_accepted():
    p = build_parser()
    args = p.parse_args(["identify", "ft-pwm", "--validate", "a.csv", "--validate", "b.csv", "--simulate",
                         "--simulate"])  # fmt: skip
    assert args.validate == ["a.csv", "b.csv"] and args.simulate is True
    assert not hasattr(args, GIVEN)  # the record of what was given is dropped once parsed


def test_values_given_once_parse_as_before():
    args = build_parser().parse_args(
        ["run", "plan.json", "--robot", "sim", "--time-scale", "0.25", "--out", "r"]
    )
    assert args.time_scale == 0.25 and not hasattr(args, GIVEN)
    # a fresh parse starts a fresh record: the same option in two parses is not "twice"
    p = build_parser()
    for _ in range(2):
        assert (
            p.parse_args(
                ["run", "plan.json", "--robot", "sim", "--time-scale", "0.5", "--out", "r"]
            ).time_scale
            == 0.5
        )


def test_two_spellings_of_one_option_are_one_option():
    p = OneLineParser(prog="poise x")
    p.add_argument("-o", "--out")
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["-o", "a", "--out", "b"])
    assert exc.value.code == 2
