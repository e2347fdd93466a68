"""Load time and generation speed of the embedded model under each runtime.

    python bench/bench_embedded.py --runtime transformers --prompts 5 --max-tokens 64

Prints the load time (first load converts and caches the GGUF for transformers; a second run
shows the cached load), prompt-processing and generation speed over oncology-like prompts
(the study's system prompt and a ~300-token title and abstract), and the machine's load average
(other processes share the CPU; compare runtimes under similar load).
"""

from __future__ import annotations

import argparse
import os
import time

from inspect_ai.model import GenerateConfig

from med_evals.models.embedded import LlamaCppRuntime, TransformersRuntime, resolve_gguf
from med_evals.solvers.prompts import ONCOLOGY_SYSTEM_PROMPT

ABSTRACT = (
    "Background: Adjuvant therapy after resection of stage III colon cancer is standard. We "
    "assessed whether adding an oral multikinase inhibitor to capecitabine and oxaliplatin "
    "improves disease-free survival. Methods: In this randomised, double-blind, phase 3 trial, "
    "patients aged 18 years or older with resected stage III colon adenocarcinoma were assigned "
    "1:1 to the inhibitor or placebo for 12 months with standard chemotherapy. The primary "
    "endpoint was disease-free survival in the intention-to-treat population. Findings: {n} "
    "patients were enrolled. At a median follow-up of 48 months, 3-year disease-free survival was "
    "{a}% with the inhibitor and {b}% with placebo (hazard ratio 0.{h}; p={p}). Grade 3 or worse "
    "adverse events occurred in 41% and 28% of patients. Interpretation: The addition of the "
    "inhibitor to adjuvant chemotherapy {verdict} disease-free survival in stage III colon cancer."
)


def prompts(n: int) -> list[list[dict[str, str]]]:
    out = []
    for i in range(n):
        better = i % 2 == 0
        abstract = ABSTRACT.format(
            n=800 + 17 * i,
            a=74 + i % 5,
            b=69 if better else 75,
            h=78 if better else 97,
            p="0.004" if better else "0.71",
            verdict="significantly improved" if better else "did not improve",
        )
        user = (
            f"Title: Adjuvant multikinase inhibition in colon cancer ({i})\n\nAbstract: {abstract}"
        )
        out.append(
            [
                {"role": "system", "content": ONCOLOGY_SYSTEM_PROMPT},
                {"role": "user", "content": user},
            ]
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", choices=["transformers", "llama_cpp"], default="transformers")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    print(f"load average before: {os.getloadavg()[0]:.2f}  cpus: {os.cpu_count()}")
    gguf = resolve_gguf(args.model)
    started = time.monotonic()
    cls = TransformersRuntime if args.runtime == "transformers" else LlamaCppRuntime
    runtime = cls(gguf, args.threads)
    print(f"{args.runtime}: load {time.monotonic() - started:.1f} s ({gguf.name})")

    # prompt processing alone: one output token per prompt
    one = GenerateConfig(temperature=0, max_tokens=1)
    batch = prompts(args.prompts)
    runtime.generate(batch[0], one)  # warm-up
    t0, n_in = time.monotonic(), 0
    for msgs in batch:
        n_in += runtime.generate(msgs, one).input_tokens
    pp = time.monotonic() - t0

    # forced-length generation: the speed of decoding (prompt time subtracted)
    cfg = GenerateConfig(temperature=0, max_tokens=args.max_tokens)
    t0, n_out, replies = time.monotonic(), 0, []
    for msgs in batch:
        gen = runtime.generate(msgs, cfg)
        n_out += gen.output_tokens
        replies.append(gen.text)
    total = time.monotonic() - t0
    decode = max(total - pp, 1e-9)
    print(f"prompt: {n_in} tokens in {pp:.1f} s = {n_in / pp:.0f} tokens/s")
    print(f"generate: {n_out} tokens in {decode:.1f} s = {n_out / decode:.1f} tokens/s (decode)")
    print(f"per call ({args.max_tokens} max tokens): {total / len(batch):.2f} s")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("replies:", [r[:40] for r in replies])


if __name__ == "__main__":
    main()
