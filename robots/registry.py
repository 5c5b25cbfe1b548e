"""Robot models by name or file: built-in descriptions, a poise robot description (TOML) or a bare URDF."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from formats.errors import DataError
from robots.description import SUFFIX, load_description
from robots.tree import RobotModel
from robots.urdf import load_urdf

DATA = Path(__file__).parent / "data"
BUILT_IN: dict[str, Path] = {
    "tulip": DATA / "tulip" / "tulip.poise.toml",
    "icub-right-arm": DATA / "icub" / "icub_right_arm.poise.toml",
    "doggy": DATA / "doggy" / "doggy.poise.toml",
}

# robots named from another package's files: (the package, its file)
PACKAGED: dict[str, tuple[str, Path]] = {
    "ur5": ("example-robot-data", Path("example-robot-data/robots/ur_description/urdf/ur5_robot.urdf")),
}

_loaded: dict[tuple[str, float], RobotModel] = {}


def packaged_file(name: str) -> Path:
    """The description file of a robot named from another package (`PACKAGED`, installed under pip's cmeel
    prefix); DataError naming the package to install when it is missing."""
    package, relative = PACKAGED[name.lower()]
    path = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share" / relative
    if not path.is_file():
        raise DataError(f"robot {name!r} comes from {package}: `pip install {package}` ({path} is missing)")
    return path


def _describe(path: Path) -> RobotModel:
    key = (str(path.resolve()), path.stat().st_mtime)
    if key not in _loaded:
        _loaded[key] = load_description(path) if path.name.endswith(SUFFIX) else _bare_urdf(path)
    return _loaded[key]


def _bare_urdf(path: Path) -> RobotModel:
    """A URDF with a description beside it (NAME.poise.toml) uses it; otherwise the URDF alone."""
    side = path.with_name(path.stem + SUFFIX)
    return load_description(side) if side.is_file() else load_urdf(path)


def is_named(robot: str) -> bool:
    """Whether `robot` names a robot (built in, or from another package) rather than a file: plans and recordings
    keep the name, which any machine resolves, not a path."""
    return robot.lower() in BUILT_IN or robot.lower() in PACKAGED


def source_beside(src: str, owner: str | Path | None) -> str:
    """A robot description a file names (a plan's or a recording's `robot_source`): as given (absolute, or from where
    poise runs), else beside that file (`owner`: its path)."""
    path = Path(src)
    if (
        not path.is_absolute()
        and not path.exists()
        and owner is not None
        and (Path(owner).parent / path).exists()
    ):
        return str(Path(owner).parent / path)
    return src


def get_model(name: str) -> RobotModel:
    """A built-in robot ('tulip', …), one from another package ('ur5': example-robot-data's), a robot description
    file (*.poise.toml) or a URDF file (*.urdf).

    The same name or unchanged file gives the same model object, so derived data cached on it is reused.
    """
    key = name.lower()
    if key in BUILT_IN:
        return _describe(BUILT_IN[key])
    if key in PACKAGED:
        return _describe(packaged_file(key))
    path = Path(name)
    if path.suffix.lower() in (".urdf", ".toml", ".xml", ".xacro") or path.name.endswith(SUFFIX):
        if not path.is_file():
            raise DataError(f"{name}: no such robot file")
        return _describe(path)
    raise DataError(
        f"unknown robot {name!r} (built in: {', '.join(sorted(BUILT_IN))}; from other packages: "
        f"{', '.join(sorted(PACKAGED))}; or a .urdf / {SUFFIX} file)"
    )


def same_robot(a: str, b: str) -> bool:
    """Robot names as recordings and plans write them (the registry reads them in any case)."""
    return a.casefold() == b.casefold()


def check_described(where: str, named: str, source: str, model) -> None:
    """A file (`where`) naming robot `named` and describing it by `source`: the description must be of that robot
    (DataError otherwise: another robot's description would be fitted or run under this one's name)."""
    if not same_robot(model.name, named):
        raise DataError(f"{where}: robot {named!r}, but its robot_source {source} describes {model.name!r}")
