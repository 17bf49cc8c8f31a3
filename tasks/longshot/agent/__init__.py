"""LongShOTAgent: the benchmark authors' evidence-seeking video agent as a harness backend."""
