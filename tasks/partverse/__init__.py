"""PartVerse-QA (3D-PLOT-LLM): part-slot QA both ways, plus Objaverse captioning and 3DCoMPaT-GrIn."""
