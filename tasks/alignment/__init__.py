"""Helpful-only alignment probes: refusal (XSTest), emergent misalignment (Betley et al.),
sycophancy, steerability and character coherence; ``harness alignment profile`` puts models side by side."""
