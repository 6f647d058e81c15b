"""Generate the perturbations a model writes (paraphrases) before the audit is planned."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

import storage
from dbpa.config import AuditConfig
from dbpa.generation import (
    GeneratorJob,
    bind_generated,
    dropped_paraphrases,
    embed_with,
    generator_jobs,
    missing_outputs,
    stored_outputs,
)
from dbpa.llm import sample
from dbpa.specs import Generation


@task(
    name="generate",
    task_run_name="generate paraphrases",
    cache_policy=NO_CACHE,  # the record is the cache, as for sampling
)
def generate_paraphrases(db: str, config: AuditConfig) -> AuditConfig:
    """``config`` with its paraphrase specs bound to their generated texts: each generator
    arm (one per spec, and per prompt of a set) is stored and filled to n outputs (asking
    only for the missing ones, so a re-run asks none; two prompts of the same text share
    one arm), then the outputs are screened and, with ``min_similarity``, embedded with
    the audit's embedder and filtered; every dropped paraphrase is logged."""
    logger = get_run_logger()
    store = storage.get(db)
    jobs = generator_jobs(config)
    arms: dict[str, GeneratorJob] = {}
    for job in jobs:
        arms.setdefault(job.arm.arm_id, job)
    unique = list(arms.values())
    store.add_arms([j.arm for j in unique])
    missing = missing_outputs(unique, store)
    for job in unique:
        todo = missing[job.key]
        if not todo:
            logger.info("%s: all %d stored", job.label, job.spec.n)
            continue
        logger.info("%s: generating %d", job.label, len(todo))
        arm_id = job.arm.arm_id

        def keep(outputs: list[Generation], arm_id: str = arm_id) -> None:
            store.add_samples(arm_id, outputs)

        sample(job.arm.model, job.arm.messages, todo, seed=job.seed, on_outputs=keep)
    outputs = stored_outputs(jobs, store)
    bound = bind_generated(config, outputs, embed_with(config))
    for position, prompt, p in dropped_paraphrases(bound):
        logger.warning(
            "perturbations[%d] (paraphrase)%s: paraphrase %d dropped (%s): %r",
            position,
            "" if prompt is None else f" of prompt {prompt!r}",
            p.index + 1,
            p.dropped,
            p.text,
        )
    return bound
