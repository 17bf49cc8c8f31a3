"""VLA method backends (fit on demonstrations, then act): see vla_core for the models."""
