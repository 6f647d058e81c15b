"""The audit's analysis phases: embed the sampled arms, test them, correct each family.

Every phase reads what DuckDB holds and computes only the rest; embedding and testing run
on the flow's task runner (threads or Dask) and the flow's process stores their results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prefect import get_run_logger

import storage
from dbpa.config import AuditConfig
from dbpa.plan import AuditPlan, PlannedTest
from dbpa.progress import Counter
from flows import record
from flows._sampling import arm_labels, batches
from flows._sequential import SequentialOutcome
from tasks.correct import correct_family
from tasks.embed import embed_texts
from tasks.permutation import TestJob, run_tests
from tasks.set_test import SetJob, run_set_tests


@dataclass(frozen=True)
class Tally:
    """What embedding and testing have computed so far in a run."""

    texts: int
    """Distinct output texts embedded."""
    tests: int
    """Permutation tests run."""


class ArmAnalysis:
    """Embedding and testing of the arms whose sampling is over, as they come.

    Results already stored are never computed again. The embed and test progress counters
    are made on first use, so their bars follow sampling's; a sequential audit passes its
    own (``counters``), which each look's analysis extends by its arms and tests.
    """

    def __init__(
        self,
        plan: AuditPlan,
        store: storage.Store,
        config: AuditConfig,
        embed_batch: int,
        test_task_runs: int,
        tests_per_task_run: int,
        counters: tuple[Counter, Counter] | None = None,
    ) -> None:
        self._plan, self._store, self._config = plan, store, config
        self._given = counters
        self._embed_batch = embed_batch
        self._test_task_runs, self._tests_per_task_run = test_task_runs, tests_per_task_run
        self._embedded: set[str] = set()
        self._tests = plan.unit_tests
        """The tests of two arms (over a set of prompts: per prompt)."""
        self._tests_of: dict[str, list[int]] = {}
        """arm_id -> positions in ``self._tests`` of the tests that use the arm."""
        for i, t in enumerate(self._tests):
            self._tests_of.setdefault(t.original.arm_id, []).append(i)
            self._tests_of.setdefault(t.perturbed.arm_id, []).append(i)
        self._labels = arm_labels(plan)
        self._order = {a.arm_id: i for i, a in enumerate(plan.arms)}
        self._done: set[str] | None = None
        """Ids of the stored tests (read once; this process is the only writer)."""
        self._ready: set[int] = set()
        """Positions of the tests whose arms are embedded and whose result is not stored."""
        self._counters: tuple[Counter, Counter] | None = None
        self._tally = Tally(texts=0, tests=0)

    def tally(self) -> Tally:
        """What has been computed so far."""
        return self._tally

    def embed_arms(self, arm_ids: Iterable[str]) -> None:
        """Embed the outputs of the arms of ``arm_ids`` (each holding all k outputs) that
        have no vector yet, in task runs of ``embed_batch`` distinct texts."""
        counter, _ = self._progress()
        new = set(arm_ids) - self._embedded
        texts = 0
        if new:
            first = self._labels[min(new, key=self._order.__getitem__)]
            of_arms = first if len(new) == 1 else f"{len(new)} arms from {first}"
            texts = _embed(self._plan, self._store, self._config, new, self._embed_batch, of_arms)
        self._embedded |= new
        done = self._stored()
        for arm_id in new:  # only the tests of these arms can have become ready
            for i in self._tests_of.get(arm_id, ()):
                t = self._tests[i]
                arms = (t.original.arm_id, t.perturbed.arm_id)
                if t.test_id not in done and all(a in self._embedded for a in arms):
                    self._ready.add(i)
        counter.add(len(new))
        self._tally = Tally(self._tally.texts + texts, self._tally.tests)

    def test_ready(self, min_tests: int) -> None:
        """Run the planned tests whose arms are all embedded and whose result is not stored,
        when there are at least ``min_tests`` of them."""
        _, counter = self._progress()
        done = self._stored()
        self._ready = {i for i in self._ready if self._tests[i].test_id not in done}
        if not self._ready or len(self._ready) < min_tests:
            return
        todo = [self._tests[i] for i in sorted(self._ready)]  # in plan order
        vectors = self._store.arms_vectors(
            sorted({a for t in todo for a in (t.original.arm_id, t.perturbed.arm_id)}),
            self._plan.embedder,
            self._plan.k,
        )
        futures = []
        for batch in batches(todo, self._test_task_runs, self._tests_per_task_run):
            jobs = [
                TestJob(
                    test_id=t.test_id,
                    original_arm=t.original.arm_id,
                    perturbed_arm=t.perturbed.arm_id,
                    original=vectors[t.original.arm_id],
                    perturbed=vectors[t.perturbed.arm_id],
                )
                for t in batch
            ]
            label = _test_label(batch)
            futures.append(
                run_tests.submit(jobs, self._plan.embedder, self._config.analysis, label)
            )
        for future in futures:
            records = future.result()
            self._store.add_tests(records)
            done.update(r.test_id for r in records)
            counter.add(len(records))
        self._ready.clear()
        self._tally = Tally(self._tally.texts, self._tally.tests + len(todo))

    def test_sets(self) -> None:
        """Run the pooled tests over a set of prompts whose prompts' arms are all embedded
        and whose result is not stored (one task run per test set batch)."""
        _, counter = self._progress()
        done = self._stored()
        todo = [
            t
            for t in self._plan.tests
            if t.test_id in self._plan.set_members
            and t.test_id not in done
            and all(
                a in self._embedded
                for m in self._plan.set_members[t.test_id]
                for a in (m.original.arm_id, m.perturbed.arm_id)
            )
        ]
        if not todo:
            return
        futures = []
        for batch in batches(todo, self._test_task_runs, 1):
            members = {t.test_id: self._plan.set_members[t.test_id] for t in batch}
            arms = {
                a
                for ms in members.values()
                for m in ms
                for a in (m.original.arm_id, m.perturbed.arm_id)
            }
            vectors = self._store.arms_vectors(sorted(arms), self._plan.embedder, self._plan.k)
            jobs = [
                SetJob(
                    set_test_id=t.test_id,
                    prompt_ids=tuple(str(m.prompt_id) for m in members[t.test_id]),
                    test_ids=tuple(m.test_id for m in members[t.test_id]),
                    arms=(t.original.arm_id, t.perturbed.arm_id),
                    originals=tuple(vectors[m.original.arm_id] for m in members[t.test_id]),
                    perturbed=tuple(vectors[m.perturbed.arm_id] for m in members[t.test_id]),
                )
                for t in batch
            ]
            first = batch[0]
            size = len(members[first.test_id])
            label = f"set {first.perturbation.id} ({first.family}) over {size} prompts"
            if len(batch) > 1:
                label = f"{len(batch)} sets from {first.perturbation.id} ({first.family})"
            futures.append(
                run_set_tests.submit(jobs, self._plan.embedder, self._config.analysis, label)
            )
        for future in futures:
            records = future.result()
            self._store.add_set_tests(records)
            done.update(r.test.test_id for r in records)
            counter.add(len(records))
        self._tally = Tally(self._tally.texts, self._tally.tests + len(todo))

    def log_summary(self, early: Tally) -> None:
        """Say what was computed, and how much of it (``early``) while sampling went on."""
        get_run_logger().info(
            "embedded %d new distinct outputs and ran %d permutation tests "
            "(%d and %d of them while sampling); B=%d, omega=%s",
            self._tally.texts,
            self._tally.tests,
            early.texts,
            early.tests,
            self._config.analysis.n_permutations,
            self._config.analysis.omega,
        )

    def _stored(self) -> set[str]:
        if self._done is None:
            self._done = self._store.existing_tests(t.test_id for t in self._plan.all_tests)
        return self._done

    def _progress(self) -> tuple[Counter, Counter]:
        if self._counters is None:
            arms, tests, stored = len(self._plan.arms), len(self._plan.all_tests), self._stored()
            if self._given is None:
                self._counters = (
                    Counter("embed", arms, unit="arms"),
                    Counter("test", tests, len(stored), unit="tests"),
                )
            else:
                embed, test = self._counters = self._given
                embed.extend(arms)
                test.extend(tests, done=len(stored))
        return self._counters


def _embed(
    plan: AuditPlan,
    store: storage.Store,
    config: AuditConfig,
    arms: set[str],
    batch: int,
    of_arms: str,
) -> int:
    """Embed every stored output of ``arms`` (``of_arms`` names them in task run names)
    that has no vector yet; returns how many distinct texts were embedded."""
    texts = store.arm_texts(sorted(arms), plan.k)
    missing = store.missing_embeddings(plan.embedder, texts.text_hash)
    unique = texts[texts.text_hash.isin(missing)].drop_duplicates("text_hash")
    hashes, contents = unique.text_hash.tolist(), unique.text.tolist()
    for start in range(0, len(contents), batch):
        chunk = contents[start : start + batch]
        label = f"{of_arms}: texts {start + 1}-{start + len(chunk)} of {len(contents)}"
        vectors = embed_texts.submit(chunk, config.embedder, label).result()
        store.add_embeddings(plan.embedder, hashes[start : start + len(chunk)], vectors)
    return len(contents)


def _test_label(batch: Sequence[PlannedTest]) -> str:
    on = f" on {batch[0].prompt_id}" if batch[0].prompt_id is not None else ""
    first = f"{batch[0].perturbation.id}{on} ({batch[0].family})"
    return first if len(batch) == 1 else f"{len(batch)} perturbations from {first}"


# ---------------------------------------------------------------------- correct


def correct_families(
    plan: AuditPlan,
    store: storage.Store,
    config: AuditConfig,
    run_id: str,
    sequential: SequentialOutcome | None = None,
) -> None:
    """Adjust each family's p-values (one ``correct`` task run each) and store the decisions
    (with an equivalence margin: calibrate it, and decide changed, equivalent or
    inconclusive; in a sequential audit: the p-values of where each test stopped)."""
    warn = get_run_logger().warning
    record.correct_families(plan, store, config, run_id, correct_family, warn, sequential)
