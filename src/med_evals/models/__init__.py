"""Model providers: ``embedded/<model>`` (a GGUF model in process) and ``replay/<file>``."""
