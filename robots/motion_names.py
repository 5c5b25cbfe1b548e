"""The motion classes' names, apart from `robots.motion_class` (which samples them, with scipy) so the command
line can offer them as choices without loading it."""

from __future__ import annotations

MOTION_CLASSES = ("free", "double-support")
