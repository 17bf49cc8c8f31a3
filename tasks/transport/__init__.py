"""Optimal Mixture Transport: transport between fitted mixtures of subpopulations, with POT baselines."""
