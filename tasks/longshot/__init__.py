"""LongShOTBench: long omni-modal video QA with rubric-weighted LLM-judge scoring (arXiv 2512.16978)."""
