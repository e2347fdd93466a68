"""Statistics over per-sample values: intervals, paired tests, power, trivial baselines, ranking."""
