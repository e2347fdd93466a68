"""Datasets: the one loader (manifests, pins, checksums, cache, local copies), stored subsets,
the papers' published tables and the MedREQAL builder."""
