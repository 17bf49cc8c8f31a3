"""``lmeval:TASK``: any task of lm-evaluation-harness, asked through the model client, scored by lm-eval.

lm-eval 0.4.13's ``TaskManager`` builds the task (its YAML, prompts, few-shot examples); each document
becomes one sample whose instances become one harness request of the matching kind:

- ``multiple_choice`` / ``loglikelihood``: one ``loglikelihood`` request with every (context,
  continuation) pair of the document;
- ``loglikelihood_rolling``: one ``loglikelihood_rolling`` request;
- ``generate_until``: one ``completion`` request (the prompt as raw text, no chat template, as
  ``lm_eval --model hf`` without ``--apply_chat_template``), with the task's ``until`` strings as stop
  sequences, ``max_gen_toks`` (lm-eval's default 256) as ``max_tokens`` and its sampling settings.

The replies go back into lm-eval's ``Instance`` objects, through the task's own filters, into its own
``process_results``; the per-sample values are stored as the sample's scores (named ``METRIC`` for
lm-eval's ``none`` filter, ``METRIC_FILTER`` otherwise). Metrics whose aggregation is a mean are
averaged with the harness's interval; any other aggregation (perplexities, corpus BLEU) is lm-eval's
own function over the stored per-sample items, with a bootstrap interval over documents. A group or
tag (``lmeval:mmlu``) runs all its tasks, one breakdown row each; its overall mean weights tasks by
size, lm-eval's default for groups.

Not supported (refused in one line): documents with requests of two kinds, requests repeated more than
once, and image or audio inputs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.registry import task
from harness.task import SampleRecord, ScoreContext, Task
from harness.types import GenerationConfig, Message, Metric, MetricInfo, Output, Request, Sample, Score, stable_hash

from .library import DEFAULT_FEWSHOT_SEED, LM_EVAL_VERSION, LeafTask, LmEvalError, load
from .metrics import metric_info

KINDS = {"multiple_choice": "loglikelihood", "loglikelihood": "loglikelihood",
         "loglikelihood_rolling": "loglikelihood_rolling", "generate_until": "completion"}


@dataclass(slots=True)
class _Doc:
    leaf: LeafTask
    doc_id: int
    doc: Any
    instances: list[Any]


def metric_key(metric: str, filter_name: str) -> str:
    """The harness's name for lm-eval's ``metric,filter`` result key."""
    return metric if filter_name == "none" else f"{metric}_{filter_name}"


def _jsonable(value: Any) -> Any:
    """A per-sample item as JSON (numpy values and tuples become numbers and lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)


def _restored(item: Any) -> Any:
    """A stored item as lm-eval's aggregations take it: top-level lists as tuples."""
    return tuple(item) if isinstance(item, list) else item


def _build(leaves: list[LeafTask]) -> dict[str, _Doc]:
    docs: dict[str, _Doc] = {}
    many = len(leaves) > 1
    for leaf in leaves:
        leaf.task.build_all_requests(limit=None, rank=0, world_size=1, cache_requests=False,
                                     rewrite_requests_cache=False, system_instruction=None,
                                     apply_chat_template=False, fewshot_as_multiturn=False,
                                     chat_template=None, tokenizer_name="")
        by_doc: dict[int, list[Any]] = defaultdict(list)
        for inst in leaf.task.instances:
            by_doc[int(inst.doc_id)].append(inst)
        for doc_id in sorted(by_doc):
            insts = sorted(by_doc[doc_id], key=lambda i: i.idx)
            kinds = {i.request_type for i in insts}
            if len(kinds) > 1:
                raise LmEvalError(f"lmeval:{leaf.name}: a document asks {' and '.join(sorted(kinds))} requests "
                                  "at once, which one harness request cannot carry")
            if any(int(i.repeats) != 1 for i in insts):
                raise LmEvalError(f"lmeval:{leaf.name}: repeats each request {insts[0].repeats} times; "
                                  "run it with repeats 1 and --epochs instead")
            if any(len(i.args) > 2 for i in insts):
                raise LmEvalError(f"lmeval:{leaf.name}: has image or audio inputs, which lmeval: tasks do not take")
            sid = f"{leaf.name}/{doc_id}" if many else str(doc_id)
            docs[sid] = _Doc(leaf, doc_id, insts[0].doc, insts)
    return docs


def _sample(sid: str, d: _Doc) -> Sample:
    context = str(d.instances[0].args[0])
    target = d.leaf.task.doc_to_target(d.doc)
    meta: dict[str, Any] = {"lmeval_task": d.leaf.name, "doc_id": d.doc_id}
    if d.leaf.output_type == "multiple_choice":
        choices = [str(c) for c in d.leaf.task.doc_to_choice(d.doc)]
        meta["choices"] = choices
        if isinstance(target, int) and 0 <= target < len(choices):
            target = choices[target]
    return Sample(sid, [Message.text("user", context)], _jsonable(target), meta)


def _request(d: _Doc) -> Request:
    kind = KINDS.get(d.leaf.output_type)
    if kind == "loglikelihood":
        return Request.loglikelihood([(str(i.args[0]), str(i.args[1])) for i in d.instances])
    if kind == "loglikelihood_rolling":
        return Request.rolling([str(i.args[0]) for i in d.instances])
    if kind == "completion":
        context, gen_kwargs = d.instances[0].args
        return Request.completion(str(context), generation_config(dict(gen_kwargs or {})))
    raise LmEvalError(f"lmeval:{d.leaf.name}: output type {d.leaf.output_type!r} is not supported")


def generation_config(gen_kwargs: dict[str, Any]) -> GenerationConfig:
    """lm-eval's generation keyword arguments as harness settings: ``until`` -> stop strings,
    ``max_gen_toks`` (default 256) -> max_tokens, ``temperature`` 0 (or ``do_sample`` false) ->
    greedy; other keys pass through to the backend."""
    until = gen_kwargs.pop("until", None)
    stop = [until] if isinstance(until, str) else list(until or [])
    max_tokens = int(gen_kwargs.pop("max_gen_toks", 256))
    do_sample = gen_kwargs.pop("do_sample", None)
    temperature = float(gen_kwargs.pop("temperature", 0.0) or 0.0)
    if do_sample is False:
        temperature = 0.0
    top_p = float(gen_kwargs.pop("top_p", 1.0) or 1.0)
    return GenerationConfig(temperature=temperature, max_tokens=max_tokens, top_p=top_p, stop=stop,
                            extra={k: v for k, v in gen_kwargs.items()})


def _responses(d: _Doc, output: Output) -> list[Any] | str:
    """One response per instance as lm-eval's model API returns it, or why there is none."""
    kind = KINDS[d.leaf.output_type]
    if kind == "completion":
        return [output.text]
    lls = output.loglikelihoods
    if lls is None or len(lls) != len(d.instances):
        return f"{len(lls or [])} loglikelihoods for {len(d.instances)} requests"
    if kind == "loglikelihood_rolling":
        return [ll.logprob for ll in lls]
    return [(ll.logprob, ll.greedy) for ll in lls]


def _score(d: _Doc, output: Output) -> Score:
    responses = _responses(d, output)
    if isinstance(responses, str):
        return Score.not_scored(responses)
    for inst, resp in zip(d.instances, responses, strict=True):
        inst.resps = [resp]
        inst.filtered_resps = {}
    for ensemble in d.leaf.task._filters:
        ensemble.apply(d.instances)
    values: dict[str, float] = {}
    items: dict[str, Any] = {}
    answers: list[str] = []
    means = _mean_metrics(d.leaf)
    for filter_name in d.instances[0].filtered_resps:
        filtered = [inst.filtered_resps[filter_name] for inst in d.instances]
        if d.leaf.output_type == "generate_until":
            answers.append(str(filtered[0]))
        result = d.leaf.task.process_results(d.doc, filtered)
        for metric, value in result.items():
            key = metric_key(metric, filter_name)
            if metric in means and isinstance(value, bool | int | float) and math.isfinite(float(value)):
                values[key] = float(value)
            else:
                items[key] = _jsonable(value)
    answer = answers[0] if answers else None
    if d.leaf.output_type == "multiple_choice" and output.loglikelihoods:
        choices = [str(c) for c in d.leaf.task.doc_to_choice(d.doc)]
        best = max(range(len(choices)), key=lambda i: output.loglikelihoods[i].logprob)  # type: ignore[index]
        answer = choices[best]
    return Score(values, answer=answer, details={"lmeval_items": items} if items else {})


def _mean_metrics(leaf: LeafTask) -> set[str]:
    from lm_eval.api.metrics import mean

    return {m for m, fn in leaf.task.aggregation().items() if fn is mean}


def _declared(leaves: list[LeafTask]) -> dict[str, MetricInfo]:
    out: dict[str, MetricInfo] = {}
    for leaf in leaves:
        better = leaf.task.higher_is_better()
        for ensemble in leaf.task._filters:
            for metric in leaf.task.aggregation():
                out[metric_key(metric, ensemble.name)] = metric_info(metric, better.get(metric))
    return out


def _statistic(fn: Callable[[list[Any]], Any], items: list[Any]) -> Callable[[Any], float]:
    """lm-eval's aggregation over the documents at the resampled positions."""
    def statistic(positions: Any) -> float:
        return float(fn([items[int(i)] for i in positions]))

    return statistic


def _aggregate(leaves: list[LeafTask], task_ref: Callable[[], Task]) -> Callable[[list[SampleRecord]], list[Metric]]:
    import numpy as np

    from harness.aggregate import default_aggregate
    from harness.stats import bootstrap_ci

    by_name = {leaf.name: leaf for leaf in leaves}

    def aggregate(records: list[SampleRecord]) -> list[Metric]:
        metrics = default_aggregate(task_ref(), records)
        scored = sorted((r for r in records if r.error is None and r.unscored is None and r.epoch == 0),
                        key=lambda r: r.sample_id)
        groups: dict[str, list[SampleRecord]] = defaultdict(list)
        for r in scored:
            groups[str(r.metadata.get("lmeval_task", ""))].append(r)
        for leaf_name, rows in sorted(groups.items()):
            leaf = by_name.get(leaf_name)
            if leaf is None:
                continue
            functions = leaf.task.aggregation()
            keys = sorted({k for r in rows for k in (r.details.get("lmeval_items") or {})})
            for key in keys:
                metric = next((m for m in functions if key == m or key.startswith(m + "_")), None)
                if metric is None:
                    continue
                fn = functions[metric]
                items = [_restored(r.details["lmeval_items"][key]) for r in rows
                         if key in (r.details.get("lmeval_items") or {})]
                value = float(fn(items))
                # documents resampled (their positions, so any item shape goes); 200 rounds: a corpus
                # statistic such as BLEU costs a full pass per round
                est = bootstrap_ci(np.arange(len(items)), _statistic(fn, items), seed=0, rounds=200, value=value)
                bk, bv = ("lmeval_task", leaf_name) if len(by_name) > 1 else ("", "")
                metrics.append(Metric(key, value, est.ci_low, est.ci_high, len(items), bk, bv))
        return metrics

    return aggregate


def _available() -> list[str]:
    from .library import available

    return available()


@task("lmeval", argument="name", family="lmeval", values=_available,
      description="lm-evaluation-harness's task library: lmeval:TASK, built and scored by lm-eval 0.4.13")
def lmeval(name: str = "", include_path: str | None = None, num_fewshot: int | None = None,
           fewshot_seed: int = DEFAULT_FEWSHOT_SEED, max_gen_toks: int | None = None) -> Task:
    """lm-eval's task NAME (``harness tasks lmeval`` lists them). ``include_path``: a folder of your own
    lm-eval YAML tasks; ``num_fewshot``: few-shot examples (the task's default otherwise, 0 if it has
    none); ``fewshot_seed``: the few-shot sampler's seed (lm-eval's 1234); ``max_gen_toks``: generation
    budget of generate_until tasks (the task's, else 256)."""
    if not name:
        raise LmEvalError("lmeval: name the task, e.g. -t lmeval:hellaswag (see `harness tasks lmeval`)")
    gen_kwargs = {"max_gen_toks": max_gen_toks} if max_gen_toks is not None else None
    leaves = load(name, include_path, num_fewshot, fewshot_seed, gen_kwargs)
    docs = _build(leaves)
    kinds = {KINDS.get(leaf.output_type) for leaf in leaves}
    if None in kinds or len(kinds) != 1:
        types = sorted({leaf.output_type for leaf in leaves})
        raise LmEvalError(f"lmeval:{name}: its tasks are of types {', '.join(types)}; one kind per run")
    fingerprint = stable_hash([LM_EVAL_VERSION, name, num_fewshot, fewshot_seed, gen_kwargs,
                               [[leaf.name, sorted(leaf.task.aggregation()), [f.name for f in leaf.task._filters]]
                                for leaf in leaves],
                               [[sid, [_jsonable(i.args) for i in d.instances]] for sid, d in docs.items()]])
    samples = [_sample(sid, d) for sid, d in docs.items()]

    def prompt(sample: Sample) -> Request:
        return _request(docs[sample.id])

    def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        d = docs.get(sample.id)
        if d is None:
            return Score.not_scored(f"no lm-eval document {sample.id!r}")
        return _score(d, output)

    declared = _declared(leaves)
    primary = next(iter(declared), "acc")
    made: list[Task] = []
    result = Task(
        name=f"lmeval:{name}", version=f"lm-eval-{LM_EVAL_VERSION}", load=lambda: list(samples), prompt=prompt,
        score=score, request_kind=kinds.pop(),  # type: ignore[arg-type]
        primary_metric=primary, metrics=declared,
        breakdowns=("lmeval_task",) if len(leaves) > 1 else (),
        aggregate=_aggregate(leaves, lambda: made[0]),
        content_hash=fingerprint,
        description=f"lm-eval {name}: {', '.join(sorted({leaf.output_type for leaf in leaves}))}",
    )
    made.append(result)
    return result
