"""med_evals: medical LLM evaluations for UK AISI's Inspect."""

__version__ = "0.1.0"
