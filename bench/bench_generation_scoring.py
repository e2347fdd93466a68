"""Bench: generation scoring as the MedREQAL task does it vs one direct batched bert_score call.

Scores N (default 2,786, MedREQAL's size) reply/conclusion pairs of realistic length twice:

1. the task's way: the ``generation()`` scorer (ROUGE-L with stemming, and BERTScore through the
   cross-sample batcher) called once per sample, as Inspect calls it, with at most
   ``--max-samples`` samples in flight. Inspect scores a sample inside its sample slot, so a
   BERTScore batch holds at most that many pairs. Default 20: Inspect's default (adaptive
   concurrency) starts at 20 samples in flight and grows up to 100; a 750-claim HealthFC run
   with mockllm scored batches of 6-45 pairs, median 20;
2. one direct ``bert_score.score(cands, refs, model_type=..., num_layers=6)`` call on the same
   pairs (BERTScore only, no ROUGE).

Both include loading the encoder. Prints both times and their ratio (target: at most 1.3x), and
checks that the two give the same BERTScore F1 for every pair.

The pairs are synthetic, built from sentence patterns typical of Cochrane authors' conclusions
and of model replies to the MedREQAL prompt (reply ~60-190 words, conclusion ~30-150 words);
no dataset text is used.

    python bench/bench_generation_scoring.py [--n 2786] [--max-samples 20] [--order task-first]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

INTERVENTIONS = [
    "exercise training",
    "vitamin D supplementation",
    "cognitive behavioural therapy",
    "acupuncture",
    "inhaled corticosteroids",
    "probiotics",
    "music therapy",
    "early mobilisation",
    "antibiotic prophylaxis",
    "omega-3 fatty acids",
    "mindfulness-based interventions",
    "low-dose aspirin",
    "compression stockings",
    "nurse-led follow-up",
    "zinc supplementation",
]
POPULATIONS = [
    "adults with chronic low back pain",
    "children with asthma",
    "older people in care homes",
    "women with gestational diabetes",
    "people with depression",
    "preterm infants",
    "patients after hip fracture surgery",
    "adults with type 2 diabetes",
    "people with COPD",
    "smokers",
    "people with dementia",
    "adolescents with obesity",
]
OUTCOMES = [
    "pain",
    "mortality",
    "quality of life",
    "hospital admissions",
    "depressive symptoms",
    "exacerbations",
    "functional recovery",
    "adverse events",
    "length of stay",
    "relapse",
]
CONCLUSION_SENTENCES = [
    "There is low-certainty evidence that {i} may reduce {o} in {p}.",
    "We are uncertain whether {i} improves {o} in {p} because the certainty of the evidence is "
    "very low.",
    "Moderate-certainty evidence shows that {i} probably makes little or no difference to {o}.",
    "The included trials were small, heterogeneous and at high risk of bias.",
    "Further well-designed randomised controlled trials with longer follow-up are needed to "
    "establish the effects of {i} on {o}.",
    "Compared with usual care or placebo, {i} probably reduces {o} slightly.",
    "Adverse events were poorly reported, so we cannot draw conclusions about the safety of {i}.",
    "Future research should report {o} using standardised measures and assess cost-effectiveness.",
    "The evidence is current to March 2022.",
]
REPLY_SENTENCES = [
    "{I} has been studied in several randomized controlled trials in {p}.",
    "A Cochrane systematic review found that {i} may improve {o}, although the quality of the "
    "evidence was low.",
    "Some studies have shown a modest benefit on {o}, while others found no significant "
    "difference compared with placebo.",
    "A meta-analysis of 12 trials involving over 1,500 participants reported a small reduction "
    "in {o}.",
    "However, the trials were heterogeneous in design, dose and duration of follow-up.",
    "Therefore, more high-quality research is needed before {i} can be recommended routinely "
    "for {p}.",
    "It is important to note that individual responses vary and that treatment decisions should "
    "be made together with a healthcare professional.",
    "Current clinical guidelines do not make a strong recommendation for {i}.",
    "The effect on {o} appears to be consistent across subgroups, but the certainty is limited.",
]
LABELS = ["SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"]


def _text(rng: random.Random, bank: list[str], lo: int, hi: int, **kw: str) -> str:
    target = rng.randint(lo, hi)
    out: list[str] = []
    while len(" ".join(out).split()) < target:
        out.append(rng.choice(bank).format(**kw))
    return " ".join(out)


def make_pairs(n: int, seed: int = 2024) -> tuple[list[str], list[str]]:
    """n (reply, conclusion) pairs of realistic length; deterministic for a seed."""
    rng = random.Random(seed)
    replies, conclusions = [], []
    for _ in range(n):
        kw = {
            "i": rng.choice(INTERVENTIONS),
            "p": rng.choice(POPULATIONS),
            "o": rng.choice(OUTCOMES),
        }
        kw["I"] = kw["i"][0].upper() + kw["i"][1:]
        label = rng.choice(LABELS)
        replies.append(f"LABEL: {label}. " + _text(rng, REPLY_SENTENCES, 60, 190, **kw))
        conclusions.append(_text(rng, CONCLUSION_SENTENCES, 30, 150, **kw))
    return replies, conclusions


def _states(replies: list[str], references: list[str]) -> list:
    from inspect_ai.model import ChatMessageUser, ModelOutput
    from inspect_ai.solver import TaskState

    states = []
    for i, (reply, ref) in enumerate(zip(replies, references, strict=True)):
        state = TaskState(
            model="mockllm/model",
            sample_id=i,
            epoch=1,
            input="question",
            messages=[ChatMessageUser(content="question")],
            metadata={"reference": ref},
        )
        state.output = ModelOutput.from_content("mockllm/model", reply)
        states.append(state)
    return states


def run_task_way(replies: list[str], references: list[str], max_samples: int) -> list[float]:
    """The generation scorer, one call per sample, at most ``max_samples`` in flight."""
    from inspect_ai.scorer import Target

    from med_evals.scorers.bertscore import load_bertscorer
    from med_evals.scorers.generation import generation

    load_bertscorer.cache_clear()  # count the encoder load, as a fresh run would
    score_fn = generation()
    states = _states(replies, references)

    async def main() -> list[float]:
        gate = asyncio.Semaphore(max_samples)

        async def one(state: object) -> float:
            async with gate:
                s = await score_fn(state, Target(""))  # type: ignore[arg-type]
                return float(s.value["bertscore_f1"])  # type: ignore[index]

        return await asyncio.gather(*(one(s) for s in states))

    return asyncio.run(main())


def run_direct(replies: list[str], references: list[str]) -> list[float]:
    from bert_score import score

    from med_evals.scorers.bertscore import packaged_encoder_path

    _, _, f = score(replies, references, model_type=str(packaged_encoder_path()), num_layers=6)
    return [float(x) for x in f]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2786)
    ap.add_argument("--max-samples", type=int, default=20)
    ap.add_argument("--order", choices=["direct-first", "task-first"], default="direct-first")
    args = ap.parse_args()

    import torch

    replies, refs = make_pairs(args.n)
    words_r = sum(len(r.split()) for r in replies) / len(replies)
    words_c = sum(len(c.split()) for c in refs) / len(refs)
    print(
        f"{args.n} pairs; mean words: reply {words_r:.0f}, conclusion {words_c:.0f}; "
        f"torch threads {torch.get_num_threads()}; max samples in flight {args.max_samples}"
    )

    timings: dict[str, float] = {}
    results: dict[str, list[float]] = {}
    runs = {
        "direct": lambda: run_direct(replies, refs),
        "task": lambda: run_task_way(replies, refs, args.max_samples),
    }
    order = ["direct", "task"] if args.order == "direct-first" else ["task", "direct"]
    for name in order:
        t0 = time.perf_counter()
        results[name] = runs[name]()
        timings[name] = time.perf_counter() - t0
        print(f"{name:>6}: {timings[name]:8.1f} s", flush=True)

    worst = max(abs(a - b) for a, b in zip(results["task"], results["direct"], strict=True))
    ratio = timings["task"] / timings["direct"]
    print(f"max |F1 task - F1 direct| = {worst:.2e}")
    print(
        f"ratio task / direct = {ratio:.2f}x (target <= 1.3x): {'OK' if ratio <= 1.3 else 'OVER'}"
    )


if __name__ == "__main__":
    main()
