"""LongShOTBench: long omni-modal video QA with rubric-weighted LLM-judge scoring (arXiv 2512.16978)."""

from harness.tasks.longshot.task import longshot

__all__ = ["longshot"]
