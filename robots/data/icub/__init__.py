"""iCub robot descriptions (URDFs from the icub-models package)."""
