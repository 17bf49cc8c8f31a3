"""Agents that play Crafter through the harness loop: reference agents and fit-on-demonstrations VLA methods."""
