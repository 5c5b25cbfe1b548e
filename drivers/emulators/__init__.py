"""Emulated devices that speak the real bytes, so the real drivers run against them in tests and demos."""
