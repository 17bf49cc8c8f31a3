"""Multi-level online conformal prediction: nested prediction sets at several coverage levels, run online."""
