"""A bench's events (a physics twin's falls, edges, slips, …, by robot time) attributed to the run's postures and
transitions: the phase each happened in, from the executor's timeline of when each phase began."""

from __future__ import annotations

import bisect


def attribute(events: list[dict], timeline: list[dict]) -> list[dict]:
    """Each event (`t_sim_s`: robot time on the bench clock the timeline was written by) with the posture,
    placement and phase it happened in — the phase that began last at or before it; none before the first."""
    starts = [float(x["t_s"]) for x in timeline]
    out = []
    for e in events:
        k = bisect.bisect_right(starts, float(e["t_sim_s"])) - 1
        if k < 0:
            out.append(dict(e))
            continue
        x = timeline[k]
        out.append({**e, "posture": x["posture"], "placement": x["placement"], "phase": x["phase"]})
    return out


def per_posture(events: list[dict]) -> dict[int, dict[str, list[str]]]:
    """Attributed events grouped by posture: those of the move, set-down or transition that reached it
    ("transition") and those while it settled and was held ("posture"), each as "kind: detail"."""
    out: dict[int, dict[str, list[str]]] = {}
    for e in events:
        if "posture" not in e or e["phase"] in ("tare", "done"):
            continue
        group = "posture" if e["phase"] in ("settle", "hold") else "transition"
        entry = out.setdefault(int(e["posture"]), {"transition": [], "posture": []})
        entry[group].append(f"{e['kind']}: {e['detail']}")
    return out
