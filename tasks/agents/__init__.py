"""Game agents: Crafter episodes played through the harness loop, reference agents and VLA methods."""
