"""In-process vLLM adapter checks on the tiny model (run in the vLLM venv; prints one JSON line).

    python tests/vllm_checks/offline.py MODEL_DIR WORK_DIR
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from check_settings import engine_settings


def main(model_dir: str, work: Path) -> dict:
    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Part, Request

    model = build_model(f"vllm:{model_dir}", engine_settings(), {"text"})
    engine = model.executor

    def req(text: str, **cfg: object) -> Request:
        return Request([Message.text("user", text)], GenerationConfig(**{"max_tokens": 12, **cfg}))

    async def run() -> dict:
        out: dict = {"spec": model.spec, "batch_size": model.batch_size, "modalities": sorted(model.modalities)}
        # 1. N requests -> ONE engine call; greedy replies equal a bare LLM.chat over the same prompts
        prompts = [f"Question {i}: what is {i} plus {i * 3}?" for i in range(16)]
        calls0 = engine.calls
        outs = await model.generate([req(p) for p in prompts])
        out["batch"] = {
            "n": len(outs), "engine_calls": engine.calls - calls0,
            "errors": [o.error for o in outs if o.error],
            "texts_nonempty": sum(bool(o.text) for o in outs),
            "input_tokens": [o.usage.input_tokens for o in outs],
            "output_tokens": [o.usage.output_tokens for o in outs],
            "finish": sorted({o.details.get("finish_reason") for o in outs}),
        }
        from vllm import SamplingParams

        bare = engine.llm.chat([[{"role": "user", "content": p}] for p in prompts],
                               SamplingParams(temperature=0.0, max_tokens=12), use_tqdm=False)
        out["batch"]["same_as_bare"] = [o.text for o in outs] == [b.outputs[0].text for b in bare]
        out["batch"]["bare_input_tokens"] = [len(b.prompt_token_ids) for b in bare]

        # 2. seeds: same seed -> same sample, other seed -> (almost surely) another sample
        hot = {"temperature": 1.0, "max_tokens": 24}
        a = await model.generate([req("Tell me a story.", seed=7, **hot) for _ in range(3)])
        b = await model.generate([req("Tell me a story.", seed=7, **hot)])
        c = await model.generate([req("Tell me a story.", seed=8, **hot)])
        out["seed"] = {"same_in_batch": len({o.text for o in a}) == 1, "same_across_calls": a[0].text == b[0].text,
                       "other_seed_differs": a[0].text != c[0].text}

        # 3. logprobs: the sampled token's logprob plus top-2 alternatives per generated token
        lp = (await model.generate([req("Hello", logprobs=True, extra={"top_logprobs": 2}, max_tokens=5)]))[0]
        out["logprobs"] = {"n": len(lp.logprobs or []), "output_tokens": lp.usage.output_tokens,
                           "top_sizes": [len(t["top_logprobs"]) for t in lp.logprobs or []],
                           "all_negative": all(t["logprob"] <= 0 for t in lp.logprobs or [])}

        # 4. bad requests fail alone: a missing image is refused before the call, a prompt longer
        #    than max_model_len is isolated by splitting the batch; stop strings end a reply
        calls0 = engine.calls
        mixed = [
            req("fine one"),
            Request([Message("user", [Part("text", "look"), Part("image", path=str(work / "nope.png"))])]),
            req("word " * 400),
            req("fine two"),
            req("fine three", temperature=-1.0),
        ]
        res = await model.generate(mixed)
        out["errors"] = {"errors": [o.error for o in res], "texts": [bool(o.text) for o in res],
                         "engine_calls": engine.calls - calls0}
        # 5. two batches in flight at once (-M concurrency=2): engine calls are serialised, and
        #    each batch gets its own replies
        calls0 = engine.calls
        one, two = await asyncio.gather(model.generate([req(p) for p in prompts[:8]]),
                                        model.generate([req(p) for p in prompts[8:]]))
        # (replies are not compared with the 16-prompt batch: another batch shape may change
        # float rounding and so a near-tie of the random model's greedy choice)
        out["concurrent"] = {"engine_calls": engine.calls - calls0, "n": [len(one), len(two)],
                             "errors": [o.error for o in one + two if o.error],
                             "tokens": sum(o.usage.output_tokens for o in one + two)}
        return out

    try:
        result = asyncio.run(run())
    finally:
        asyncio.run(model.aclose())
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
