"""The suite names, in the order `python -m benchmarks all` runs them (one module per suite); kept apart so
that the package and its command line both read them without importing each other."""
SUITES = ("transfer", "compute", "roofline", "offload", "overlap", "launch", "train", "scaling", "gemm", "sass", "attention",
          "layernorm", "sort", "gpt2", "generate")
