import gc
import os
import sysconfig
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does (poise/cli.py); before numpy loads
# the same BLAS kernels on every x86-64 machine, as `make test` sets them (Makefile: the designs are chaotic in the
# last bit, and OpenBLAS picks its kernels by CPU)
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from robots.tulip import tulip as build_tulip  # noqa: E402

# example-robot-data's descriptions (a test dependency, installed under pip's cmeel prefix)
ERD = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
UR5 = ERD / "ur_description/urdf/ur5_robot.urdf"


@pytest.fixture(scope="session")
def tulip():
    """The built-in TUlip (`get_model` returns one object per name: what its memo caches is shared)."""
    from robots.registry import get_model

    return get_model("tulip")


@pytest.fixture(scope="session")
def model():
    return build_tulip()


@pytest.fixture(scope="session")
def ur5_identification_design():
    """tests/test_dynamic_identify.py's `setup` (the UR5 model, a 20 s excitation design, a perturbed truth),
    which five more modules import: designed once per test process instead of once per module."""
    from robots.params_io import perturbed
    from robots.registry import get_model
    from trajectories.excitation import ExcitationSettings, optimise

    model = get_model(str(UR5))
    s = ExcitationSettings(period=5.0, duration=20.0, harmonics=3, samples=24, max_iter=40, sharpness=(8.0,))
    res = optimise(model, s, seed=2)
    truth = perturbed(model.parameter_set("urdf"), np.random.default_rng(7), 0.1, 0.01, inertia_rel=0.2)
    return model, res, truth


def poise_in_fresh_process(*argv: str) -> None:
    """`poise ARGV` in a new interpreter, as a user runs it. Designs made in a pytest-xdist worker that had run
    other files' tests twice landed in another local minimum than in fresh processes (a single-support start:
    κ 24 719 instead of 160; a multistart's start 0: 210.0 instead of 187.2): the Pyomo backend's tests had
    left the x87 precision at 53 bits (AMPL's library; now restored, design/fpenv.py)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "poise", *argv], capture_output=True, text=True, cwd=root, check=True,
                   env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip


def simulated_recording(
    folder: Path, plan: Path, rate_hz: float, *extra: str, name: str = "recording.csv"
) -> Path:
    """`poise simulate trajectory PLAN [EXTRA]` (MuJoCo's inverse dynamics on the twin's truth) into folder/name."""
    from poise.cli import main

    out = folder / name
    argv = ["simulate", "trajectory", str(plan), "--out", str(out), "--rate-hz", f"{rate_hz:g}", *extra]
    assert main(argv) == 0
    return out


def kept_figures(monkeypatch) -> list:
    """The figures a command draws, kept as it closes them (`plt.close` patched; Agg, as the plots select it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures: list = []
    close = plt.close

    def keep(fig=None):
        figures.append(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", keep)
    return figures


def one_line_error(capsys, argv: list[str]) -> str:
    """`poise ARGV` refused as a user error: exit 2, one `poise: error:` line, no traceback; that line."""
    from poise.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("poise: error:") and "\n" not in err and "Traceback" not in err
    return err


def ramp_motion(qa: np.ndarray, qb: np.ndarray, duration: float, harmonics: int = 5):
    """A Fourier motion (`trajectories.fourier`, period 2·duration) from qa at rest to qb at rest in `duration` s,
    least-squares nearest a quintic ramp: a plan that ends elsewhere than it starts, at rest at both ends."""
    from trajectories.fourier import FourierTrajectory, basis
    from trajectories.weight_shift import quintic

    t = np.linspace(0.0, duration, 201)
    P, V, A = basis(t, harmonics, np.pi / duration)
    E = np.vstack([V[[0, -1]], A[[0, -1]], P[-1] - P[0]])  # at rest at both ends, a unit step
    n, k = P.shape[1], len(E)
    kkt = np.block([[2 * P.T @ P, E.T], [E, np.zeros((k, k))]])
    x = np.linalg.lstsq(kkt, np.r_[2 * P.T @ quintic(t / duration)[0], np.zeros(k - 1), 1.0], rcond=None)[0][
        :n
    ]
    X = np.outer(x, np.asarray(qb, float) - qa)
    X[0] += np.asarray(qa, float) - P[0] @ X
    return FourierTrajectory.from_coefficients(X, 2 * duration, duration)


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)


@pytest.fixture(scope="module")
def plan(model):
    """Three random double-support postures (short moves and holds) — the executor tests' plan."""
    from drivers.emulators.testplan import random_plan

    return random_plan(model, 3, seed=4, move_s=1.0, hold_s=2.0)


@pytest.fixture
def cfg():
    """The bundled TUlip bench configuration (fresh: tests may change it)."""
    from drivers.config import load_config

    return load_config()


def pytest_collection_modifyitems(config, items):
    """Modules holding a `slow` test first, the rest after in their order: `make test`'s workers
    (`--dist loadfile --no-loadscope-reorder`) then take the long files first and finish together, instead of
    one worker starting a two-minute file while the other has run out of work."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


_module = [None]


def pytest_runtest_setup(item):
    """Freeze what earlier test modules left alive (one process holds many CasADi/MuJoCo/Pyomo models): a full
    collection over it stalls every thread for 100–200 ms, and the emulated devices answering the drivers run as
    threads here, unlike real hardware."""
    if item.module is not _module[0]:
        _module[0] = item.module
        gc.collect()
        gc.freeze()


@pytest.fixture(autouse=True, scope="module")
def _floating_point_environment_kept():
    """No test module may leave the x87/SSE control words changed: a native library that did (AMPL's, through
    PyNumero) made every later design in the process end elsewhere (design/fpenv.py)."""
    from design import fpenv

    before = fpenv.controls()
    yield
    after = fpenv.controls()
    assert after == before, f"the floating-point control words changed from {before} to {after}"


TEST_DESIGN = Path(__file__).parent / "data" / "tulip_double_support_10s.json"


def arm_motion(seed: int, seconds: float = 6.0, rate: float = 200.0):
    """A UR5 Fourier motion with random coefficients (not a design: only its rows matter): (t, q, meta)."""
    from robots.registry import get_model
    from trajectories.fourier import FourierTrajectory

    r = np.random.default_rng(seed)
    n = get_model(str(UR5)).nq
    traj = FourierTrajectory(seconds, seconds, r.uniform(-0.5, 0.5, n), *r.normal(0.0, 0.15, (2, n, 3)))
    t = np.arange(int(seconds * rate) + 1) / rate
    return t, traj.sample(t)[0], {"motion_band_hz": "0.5"}


def sampled_test_design(rate_hz: float):
    """The stored TUlip double-support design (the twin test's former SETTINGS: κ, 3 harmonics, seed 3) sampled as the boards record it:
    (model, t, q) at `rate_hz` over its whole duration."""
    from formats.trajectory_plan import load_trajectory_plan
    from robots.registry import get_model
    from trajectories.plan import plan_trajectory

    tulip = get_model("tulip")
    traj = plan_trajectory(load_trajectory_plan(TEST_DESIGN), tulip)
    t = np.arange(int(round(traj.duration * rate_hz)) + 1) / rate_hz
    return tulip, t, traj.sample(t)[0]


def design_wrench(periods: int, rate_hz: float, moment_z: float, params: str = "sim"):
    """The stored design repeated `periods` times at `rate_hz`, with the model's own board wrench (Fz, Mx, My about
    a point `moment_z` below the sole) under `params`: (model, t, q, wrench rows (K, 3))."""
    from formats.trajectory_plan import load_trajectory_plan
    from robots import dynamics as dyn
    from robots.base_params import RegressorSpec, evaluate
    from robots.registry import get_model
    from trajectories.plan import plan_trajectory

    tulip = get_model("tulip")
    traj = plan_trajectory(load_trajectory_plan(TEST_DESIGN), tulip)
    t = np.arange(int(round(periods * traj.duration * rate_hz)) + 1) / rate_hz  # the design is periodic
    q, qd, qdd = traj.sample(t)
    spec = RegressorSpec("base-wrench", "right", None, ("fz", "mx", "my"), moment_z=moment_z)
    return tulip, t, q, evaluate(tulip, spec, q, qd, qdd) @ dyn.standard_parameters(tulip, params)


TULIP_DATA = Path(__file__).resolve().parents[1] / "robots" / "data" / "tulip"


def tulip_with_stance(folder: Path, **stance: str) -> Path:
    """A copy of the TUlip description in `folder` whose [stance] table sets each key to the given TOML value
    (replacing the key's line, or added under the table's header); returns the copy's .poise.toml."""
    for f in TULIP_DATA.iterdir():
        if f.is_file() and f.suffix != ".py":
            (folder / f.name).write_bytes(f.read_bytes())
    robot = folder / "tulip.poise.toml"
    lines = robot.read_text(encoding="utf-8").splitlines(keepends=True)
    head = lines.index("[stance]\n")
    end = next((i for i in range(head + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    for key, value in stance.items():
        at = [i for i in range(head + 1, end) if lines[i].startswith(f"{key} = ")]
        if at:
            lines[at[0]] = f"{key} = {value}\n"
        else:
            lines.insert(head + 1, f"{key} = {value}\n")
            end += 1
    robot.write_text("".join(lines), encoding="utf-8")
    return robot


def stop_after(monkeypatch, owner, name: str, after: int, counts=lambda *a, **k: True) -> None:
    """Patch `owner.name` to raise KeyboardInterrupt (a Ctrl-C) on every call that `counts` (given the method's
    arguments) takes into account after the first `after` of them, before the original method would run."""
    original, calls = getattr(owner, name), []

    def stopping(*a, **k):
        if counts(*a, **k):
            calls.append(1)
            if len(calls) > after:
                raise KeyboardInterrupt
        return original(*a, **k)

    monkeypatch.setattr(owner, name, stopping)
