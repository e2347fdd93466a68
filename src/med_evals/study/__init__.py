"""What a study is: the spec type, its task parameters, shards and pre-run checks."""
