"""Validation of an F/T + PWM fit (spec icub-pls.md §3–4): Table II's F/T prediction errors for the estimate and
for the CAD inertial parameters, and T² contact detection (threshold at α, ROC over α) against known contacts."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from formats.errors import DataError
from formats.ft_pwm_recording import FtPwmRecording
from identify.ft_pwm import FtPwmEstimator, cad_values, table_ii
from identify.t2 import ROC, T2Detector, rates, roc
from robots.tree import ParameterSet


@dataclass
class Detection:
    """T² at confidence α: threshold, false-positive rate on contact-free samples, true-positive rate on the
    known contacts (NaN without any), the ROC over α (None without contacts)."""

    alpha: float
    threshold: float
    fpr: float
    tpr: float
    free_samples: int
    contact_samples: int
    roc: ROC | None

    def to_dict(self) -> dict:
        return {
            "alpha": self.alpha,
            "threshold": self.threshold,
            "fpr": self.fpr,
            "tpr": None if np.isnan(self.tpr) else self.tpr,
            "free_samples": self.free_samples,
            "contact_samples": self.contact_samples,
            "roc": self.roc.to_dict() if self.roc is not None else None,
        }


@dataclass
class FtPwmValidation:
    """Table II (estimated, CAD, each compared method) on the contact-free validation samples, contact
    detection; the predicted and measured wrenches, T² and contact flags of every validation sample for plots."""

    estimated: dict
    cad: dict
    detection: Detection
    predicted: np.ndarray = field(repr=False)
    measured: np.ndarray = field(repr=False)
    t2: np.ndarray = field(repr=False)
    contact: np.ndarray = field(repr=False)
    methods: dict = field(default_factory=dict)  # Table II of every compared estimator (PLS, OLS, ridge, IV)

    def to_dict(self) -> dict:
        return {
            "table_ii": {"estimated": self.estimated, "cad": self.cad},
            "methods": self.methods,
            "detection": self.detection.to_dict(),
        }


def detector(
    est: FtPwmEstimator, rec: FtPwmRecording, alpha: float = 0.99, covariance: str = "diag"
) -> T2Detector:
    """A T² detector with Λ from the F/T prediction errors of contact-free data (the identification run)."""
    pred, meas, keep = est.predict_wrench(rec)
    free = np.ones(len(pred), bool) if rec.contact is None else ~rec.contact[keep]
    return T2Detector(alpha, covariance).fit((meas - pred)[free])


def validate(
    est: FtPwmEstimator,
    identification: FtPwmRecording,
    validation: list[FtPwmRecording],
    alpha: float = 0.99,
    cad: str | ParameterSet | None = "urdf",
    covariance: str = "diag",
) -> FtPwmValidation:
    """Predict the validation runs' wrenches; Table II on their contact-free samples, T² against their contacts."""
    if not validation:
        raise DataError("validation needs at least one recording")
    det = detector(est, identification, alpha, covariance)
    names = [m.name for m in est.fit_.comparison]
    X = [est.fit_.values] + [m.values for m in est.fit_.comparison]
    if cad is not None:
        X.append(cad_values(est, cad))
    P, M, C = [], [], []
    for rec in validation:  # one regressor pass per run for every parameter vector
        pred, meas, keep = est.predict_wrench(rec, np.array(X))
        P.append(pred)
        M.append(meas)
        C.append(np.zeros(len(meas), bool) if rec.contact is None else rec.contact[keep])
    preds, meas, contact = np.concatenate(P, axis=1), np.vstack(M), np.concatenate(C)
    free = ~contact
    if not free.any():
        raise DataError("the validation recordings have no contact-free samples")
    pred = preds[0]
    t2 = det.statistic(meas - pred)
    tpr, fpr = rates(t2, contact, det.threshold_)
    detection = Detection(
        alpha, det.threshold_, fpr, tpr, int(free.sum()), int(contact.sum()),
        roc(det, t2, contact) if contact.any() else None,
    )  # fmt: skip
    estimated = table_ii(pred[free], meas[free])
    cad_table = table_ii(preds[-1][free], meas[free]) if cad is not None else {}
    methods = {n: table_ii(preds[1 + i][free], meas[free]) for i, n in enumerate(names)}
    return FtPwmValidation(estimated, cad_table, detection, pred, meas, t2, contact, methods)
