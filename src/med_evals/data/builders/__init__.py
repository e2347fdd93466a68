"""Dataset builders: fetch Cochrane reviews' PubMed records and turn them into MedREQAL-style
question sets (``med-evals fetch cochrane``, ``med-evals build medreqal``)."""
