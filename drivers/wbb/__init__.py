"""Wii Balance Board: HID protocol codec, calibration, board drivers, geometry and CoP."""
