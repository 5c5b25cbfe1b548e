"""The motion classes `robots.motion_class` samples (with scipy), apart from it so the command line can offer them as
choices without loading it. Their names are `formats.dynamic_recording.MOTIONS`'."""

from __future__ import annotations

from formats.dynamic_recording import MOTIONS

# single support is designed and fitted, not yet sampled to derive base parameters
MOTION_CLASSES = tuple(m for m in MOTIONS if m != "single-support")
