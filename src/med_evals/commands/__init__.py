"""The ``med-evals`` command line: one parser module (:mod:`med_evals.commands.cli`) and one
module per command, named after it."""
