"""Test-local, independent TUlip kinematics written from spec §1 (plain numpy rotation chain) + shapely checks.

Shares no code with robots/ or design/: used to verify plans the optimiser produced.
"""

import numpy as np
from shapely.geometry import MultiPoint, Point, Polygon

L = {"l0y": 0.15, "l1z": 0.182, "l3z": 0.32, "l3y": 0.01, "l4z": 0.276, "l5z": 0.013, "l6z": 0.04}
# Table D.1: (cx, cy, cz, m) of torso, hip1, hip2, upper leg, lower leg, ankle, foot.
D1 = [(-0.02, 0.075, 0.17, 12.0), (-0.02, 0, 0.091, 0.8), (-0.03, 0, 0, 0.01), (0, 0, 0.16, 2.9),
      (0, 0, 0.138, 0.8), (0, 0, 0.0065, 0.01), (0.08775, 0, 0.02, 0.8)]  # fmt: skip
LO = np.radians([-45, -30, -65, 0, -38, -20, -45, -22, -65, 0, -38, -17])
HI = np.radians([45, 22, 29, 125, 38, 17, 45, 30, 29, 125, 38, 20])
RIGHT_FOOT = [(-0.0595, -0.0875), (0.1755, -0.0875), (0.1755, 0.0625), (-0.0595, 0.0625)]
LEFT_FOOT = [(-0.0595, -0.0625), (0.1755, -0.0625), (0.1755, 0.0875), (-0.0595, 0.0875)]


def rot(axis: str, a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def leg(q6, left: bool):
    """Frames (R, p) of the 6 leg links and the sole, in the torso frame."""
    axes = "zxyyyx"
    ky = -L["l3y"] if left else L["l3y"]
    offs = [[0, L["l0y"] if left else 0, 0], [0, 0, -L["l1z"]], [0, 0, 0], [0, ky, -L["l3z"]],
            [0, 0, -L["l4z"]], [0, 0, -L["l5z"]]]  # fmt: skip
    R, p, out = np.eye(3), np.zeros(3), []
    for ax, off, a in zip(axes, offs, q6, strict=True):
        p = p + R @ np.array(off, dtype=float)
        R = R @ rot(ax, a)
        out.append((R, p))
    sole = (R, p + R @ np.array([0, 0, -L["l6z"]]))
    return out, sole


def in_right_sole(q):
    """Link frames and both soles expressed in the right sole frame."""
    right, sr = leg(q[:6], False)
    left, sl = leg(q[6:], True)
    Rb, pb = sr

    def tf(fr):
        return Rb.T @ fr[0], Rb.T @ (fr[1] - pb)

    links = [tf((np.eye(3), np.zeros(3)))] + [tf(f) for f in right] + [tf(f) for f in left]
    return links, tf(sr), tf(sl)


def com(q):
    links, _, _ = in_right_sole(q)
    rows = [D1[0]] + D1[1:] * 2
    tot, M = np.zeros(3), 0.0
    for i, ((R, p), (cx, cy, cz, m)) in enumerate(zip(links, rows, strict=True)):
        c = np.array([cx, cy, cz if i == 0 else -cz])
        tot += m * (p + R @ c)
        M += m
    return tot / M


def design_rows(q):
    """x/y rows of the App. B.1 columns ϑ1..ϑ25 (each = an axis of a link frame in the base frame)."""
    links, _, _ = in_right_sole(q)
    cols = [("x", 0), ("x", 1), ("x", 3), ("x", 4), ("x", 5), ("x", 7), ("x", 9), ("x", 10), ("x", 11),
            ("y", 0), ("y", 1), ("y", 2), ("y", 6), ("y", 7), ("y", 8), ("y", 12),
            ("z", 0), ("z", 2), ("z", 3), ("z", 4), ("z", 5), ("z", 8), ("z", 9), ("z", 10), ("z", 11)]  # fmt: skip
    return np.array([links[i][0][:2, "xyz".index(a)] for a, i in cols]).T


def check_posture(q, margin):
    """List of failures: limits, coupled limit, flat left foot, disjoint feet, CoP margin (shapely)."""
    fails = []
    if np.any(q < LO - 1e-9) or np.any(q > HI + 1e-9):
        fails.append("joint limit")
    if q[6] - q[0] > np.radians(60) + 1e-9:
        fails.append("coupled limit")
    _, _, (Rl, pl) = in_right_sole(q)
    if abs(pl[2]) > 1e-6 or abs(Rl[0, 2]) > 1e-6 or abs(Rl[1, 2]) > 1e-6:
        fails.append("left foot not flat")
    right = Polygon(RIGHT_FOOT)
    left = Polygon([(Rl[:2, :2] @ np.array(c) + pl[:2]) for c in LEFT_FOOT])
    if right.intersects(left):
        fails.append("feet intersect")
    hull = MultiPoint(list(right.exterior.coords) + list(left.exterior.coords)).convex_hull
    c = Point(com(q)[:2])
    m = hull.exterior.distance(c) if hull.contains(c) else -hull.exterior.distance(c)
    if m < margin - 1e-9:
        fails.append(f"margin {m:.4f}")
    return fails


def kappa(qs):
    H = np.vstack([design_rows(q) for q in qs])
    s = np.linalg.svd(H, compute_uv=False)
    return s[0] / s[-1]
