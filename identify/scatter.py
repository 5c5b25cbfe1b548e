"""Do recordings fitted together agree within their standard errors? Each refitted alone, against the joint fit.

The SEs of a fit come from its residuals, so they cannot show a model error inside the motion's band: such an
error biases every recording, differently for different motions, and more data only shrinks the SEs around a
biased estimate. Fitted one by one, the recordings' estimates then scatter about the joint fit by more than their
own SEs. Per base parameter, the ratio is √(Σ_g z_g² / (G − 1)) over G groups of recordings, where
z_g = (θ_g − θ) / SE_g (Birge's ratio). It is ~1 when noise alone separates the groups. Runs of one plan share
their motion's misfit, so they are grouped together: on the physics twin, 30 TUlip double-support runs of 13 plans
gave 0.6–2.7 by plan (median 1.49) and 0.4–1.6 run by run (median 0.98: a 10 s run's own noise hides the misfit).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError, IdentifiabilityError
from identify.dynamic import DynamicEstimator

MIN_GROUPS = 3  # two estimates give one difference: no spread to speak of


@dataclass
class Scatter:
    """Birge's ratio per estimated parameter (the joint fit's order) over `groups` groups of recordings, each
    fitted alone."""

    ratio: np.ndarray
    groups: int

    def to_dict(self, symbols: Sequence[str]) -> dict:
        return {
            "groups": self.groups,
            "ratio": {s: float(r) for s, r in zip(symbols, self.ratio, strict=True)},
            "median": float(np.median(self.ratio)),
        }


def recording_scatter(
    est: DynamicEstimator,
    recs: Sequence[DynamicRecording],
    instruments: Sequence[np.ndarray] | None = None,
    groups: Sequence[Hashable] | None = None,
) -> Scatter:
    """Refit each group of recordings alone (default: each recording; e.g. the runs of one plan, whose misfit is
    alike) with `est`'s settings and the joint fit's lag, and compare with `est.fit_`, the fit of them all
    together. Each group must determine every parameter on its own."""
    labels = list(range(len(recs))) if groups is None else list(groups)
    if len(labels) != len(recs):
        raise DataError(f"{len(labels)} group labels for {len(recs)} recordings")
    order = list(dict.fromkeys(labels))
    if len(order) < MIN_GROUPS:
        raise DataError(
            f"the scatter between recordings needs at least {MIN_GROUPS} groups of them, got {len(order)}"
        )
    if est.essential_pct is not None:
        raise DataError("the scatter compares every parameter's estimates: leave --essential out")
    joint = est.fit_
    base = est.dynamic_base_.independent if est.quantity == "wrench" else None
    z2 = np.zeros(len(joint.values))
    for g in order:
        idx = [k for k, lab in enumerate(labels) if lab == g]
        name = (
            f"recording {idx[0] + 1}" if len(idx) == 1 else f"recordings {', '.join(str(k + 1) for k in idx)}"
        )
        one = copy.copy(est)
        one.delay = [joint.delays_s[k] for k in idx] if joint.delays_s else None
        try:
            one.fit([recs[k] for k in idx], None if instruments is None else [instruments[k] for k in idx])
        except (DataError, IdentifiabilityError) as exc:  # not excited alone, too short alone, …
            raise DataError(
                f"{name} alone cannot be fitted, so there is no estimate to compare: {exc}"
            ) from None
        if base is not None and one.dynamic_base_.independent != base:
            raise DataError(
                f"{name} alone number their base parameters differently from the joint fit: fit recordings of "
                "one foot placement"
            )
        if len(one.fit_.values) != len(joint.values):
            raise DataError(
                f"{name} alone estimate {len(one.fit_.values)} parameters, the joint fit {len(joint.values)} "
                "(sole creep is fitted per recording: leave --drift out)"
            )
        z2 += ((one.fit_.values - joint.values) / one.fit_.se) ** 2
    return Scatter(np.sqrt(z2 / (len(order) - 1)), len(order))
