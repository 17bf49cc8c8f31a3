# select_sft (selection family): LoRA adapters through peft, on the embedded SmolLM2-135M that
# 20-smollm2.sh converts (the `methods3` extra, installed through the lock by 00-python.sh); torch,
# transformers, accelerate and safetensors come from there too.
if ! python -c "import peft" >/dev/null 2>&1; then
  pip_pinned "peft==0.21.0"
  python -c "import peft" || setup_fail "peft is not importable"
fi
