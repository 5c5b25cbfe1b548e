"""Multi-step workflows that tie design, drivers and identification together."""
