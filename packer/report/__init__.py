"""Reports and TCO-vs-SLO sweeps."""
