"""Tools over recorded replies and logs that are not tasks, below the command line and above
the tasks: ``med-evals score-recorded`` (:mod:`~med_evals.recorded.replies`),
``med-evals recorded-to-replay`` (:mod:`~med_evals.recorded.replay_files`) and
``med-evals export-counterfactuals`` (:mod:`~med_evals.recorded.counterfactual_export`)."""
