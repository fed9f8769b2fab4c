"""Characterization: p99 usage profiles, K-means workload classes, sensitivity scores, Eq. 1 normalization, inference."""
