"""The manifest: everything the family adds, named by import string (nothing is imported here)."""

from harness.family import Family

FAMILY = Family(name="wordcount", title="Word counting",
                tasks=("harness_wordcount.tasks",), backends=("harness_wordcount.backends",),
                cli="harness_wordcount.cli:app", charts="harness_wordcount.charts:chart")
