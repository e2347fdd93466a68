"""Reading runs back from Inspect logs: per-sample values, comparability, labels, pairing,
tokens and cost."""
