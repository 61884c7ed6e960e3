"""Shared training loops: full-batch networks (``network``), classifiers (``classifier``) and ViTs (``vit``)."""
