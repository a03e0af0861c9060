"""Local practice clusters (``trainctl lab``)."""
