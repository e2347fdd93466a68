"""Solvers: the papers' prompts, verbatim, and the generate step."""
