"""The 2-Step Agent: Bayesian decision makers using ML decision support (linear-Gaussian simulator)."""
