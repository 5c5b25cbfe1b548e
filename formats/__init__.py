"""File formats and user-facing errors: the bottom layer every other package may import (it imports none).

One module per format: `plan` (posture plans), `static_recording` (static CoP recordings), `parameter_set`
(inertial parameter sets), `static_result` (static identification results), `doggy_recording` (Doggy logs).
"""
