"""What med_evals reaches of Inspect that Inspect does not yet make public, in one place."""
