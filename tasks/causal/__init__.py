"""Partial identification of causal effects from a PAG: P-NCMs, known-graph NCMs and response-function LPs."""
