"""Scorers: per study its parser, per-sample value and metric set; shared: classification,
generation, judges, abstention, score values and reducers."""
