"""A sequential audit's looks: sample every open test's arms to the next look's k, test,
stop the tests whose answer is clear (``dbpa.stats.group_sequential_stop``), until none is open.

Prefect-free: the look itself (sampling, embedding and testing at one k) is the audit
flow's, passed in. Every look is a function of the stored outputs and tests alone (output i
of an arm depends on its seed and i; a look's test is seeded by its content id), so a killed
run resumes with the same looks and stops and asks only for outputs it never received.
Over a set of prompts each test is a pooled test: a look fills every prompt's arms and runs
the pooled test at its k, and the paths are stratified by prompt
(``dbpa.stats.set_sequential_paths``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

import storage
from dbpa.analysis import AnalysisSpec
from dbpa.config import AuditConfig
from dbpa.plan import AuditPlan, PlannedTest, look_plan
from dbpa.progress import Counter
from dbpa.set_analysis import SET_COMBINATION
from dbpa.stats import (
    OMEGAS,
    GroupSequentialPaths,
    PathPlan,
    SequentialDesign,
    group_sequential_paths,
    group_sequential_stop,
    lone_threshold,
    sequential_unreachable_looks,
    set_path_plan,
    set_sequential_paths,
)


@dataclass(frozen=True)
class Counters:
    """The progress counters of a sequential audit, shared by its looks, so that its bars
    count the whole audit: outputs sampled of those the design asks so far, and the arms
    embedded and the tests run at every look."""

    sample: Counter
    embed: Counter
    test: Counter


Look = Callable[[AuditPlan, AnalysisSpec, Counters], dict[str, str]]
"""Runs one look (sampling, embedding and testing of a plan at one k, its tests under the
given analysis settings; its progress on the audit's counters); returns the arms that failed
permanently (arm_id -> why)."""
Log = Callable[[str], None]

NOT_TESTED = "not tested"
"""The stop reason of a test whose arm could not be sampled (it enters the correction as
p = 1)."""


@dataclass(frozen=True)
class LookResult:
    """One look of one test: the permutation test of the first ``k`` outputs per arm."""

    k: int
    test_id: str
    p_value: float


@dataclass(frozen=True)
class Stop:
    """Where and why one test of a sequential audit stopped."""

    looks: tuple[LookResult, ...]
    p_value: float | None
    """Its p-value where it stopped: the stage-wise p-value of its paths, 1 when futile
    (``dbpa.stats.group_sequential_stop``); None when not tested."""
    stopped_at: int | None
    """Outputs per arm at the stop; None when not tested."""
    reason: str
    """``changed``, ``futile``, ``k_max`` or ``not tested``."""


@dataclass(frozen=True)
class SequentialOutcome:
    """The stops of every test of a sequential audit and the outputs its design used."""

    design: SequentialDesign
    analysis: AnalysisSpec
    """The looks' analysis settings (B raised to what the first look needs)."""
    stops: dict[tuple[str, str], Stop]
    """(family, perturbation id) -> its stop."""
    arm_outputs: dict[str, int]
    """arm_id -> the outputs the design asked of it."""
    failures: dict[str, str]
    """arm_id -> why it could not be sampled."""

    @property
    def outputs(self) -> int:
        """Outputs the sequential design asked for, over all arms."""
        return sum(self.arm_outputs.values())

    @property
    def fixed_outputs(self) -> int:
        """Outputs the fixed design (every arm at k_max) asks for."""
        return len(self.arm_outputs) * self.design.k_max


def run_looks(
    plan: AuditPlan,
    config: AuditConfig,
    store: storage.Store,
    run_id: str,
    look: Look,
    log: Log,
) -> SequentialOutcome:
    """Run the looks of ``config.sequential`` over ``plan`` (whose k is the maximum) and
    return where each test stopped. After each look the looks so far, and the stops among
    them, are stored for run ``run_id``, so its results show them while it runs."""
    assert config.sequential is not None
    design = config.sequential.design(plan.k, equivalence=config.equivalence is not None)
    if design.futility is None and config.sequential.futility is not None:
        log(
            "sequential: no futility stops with an equivalence margin (a test that cannot "
            "become changed may still become equivalent)"
        )
    sizes = {f: sum(1 for t in plan.tests if t.family == f) for f in plan.families}
    analysis = config.analysis
    a, m = analysis.alpha, analysis.correction
    thresholds = {f: lone_threshold(size, a, m) for f, size in sizes.items()}
    prompts = len(next(iter(plan.set_members.values()))) if plan.set_members else 1
    paths_of = {f: set_path_plan(design, size, a, m, prompts) for f, size in sizes.items()}
    log(
        f"sequential: looks at k={', '.join(map(str, design.looks))} outputs per arm; "
        f"boundaries on {max(p.n_paths for p in paths_of.values())} permutation paths per test"
    )
    for family, size in sizes.items():
        # a pooled test over several prompts has no such floor: 1/C(2k, k) per prompt
        unreachable = sequential_unreachable_looks(design, size, a, m) if prompts == 1 else ()
        if unreachable:
            then = "for futility only" if design.futility is not None else "no test"
            log(
                f"sequential: {family}: no test of {size} can stop as changed at "
                f"k={', '.join(map(str, unreachable))} (the smallest permutation p-value there, "
                f"1/C(2k, k), is above the look's level): those looks stop {then}"
            )
    sampled = Counter("sample", 0, unit="outputs")
    early = Counter("early", len(plan.arms), unit="arms finished early")
    counters = Counters(
        sampled,
        Counter("embed", 0, unit="arms, all looks"),
        Counter("test", 0, unit="tests, all looks"),
    )
    looks: dict[tuple[str, str], list[LookResult]] = {}
    stops: dict[tuple[str, str], Stop] = {}
    failures: dict[str, str] = {}
    open_tests: list[PlannedTest] = list(plan.tests)
    targets = _targets(plan, open_tests, stops, design.k_max)
    for k in design.looks:
        _recount(sampled, plan, store, targets)
        this = look_plan(plan, analysis, k, open_tests)
        failures.update(look(this, analysis, counters))
        stored = store.test_p_values([t.test_id for t in this.tests])
        taken = design.looks[: design.looks.index(k) + 1]
        vectors = store.arms_vectors([a.arm_id for a in this.arms], plan.embedder, k)
        for t, at_k in zip(open_tests, this.tests, strict=True):
            key = (t.family, t.perturbation.id)
            if at_k.test_id not in stored:  # an arm failed
                stops[key] = Stop(tuple(looks.get(key, ())), None, None, NOT_TESTED)
                continue
            paths = _paths(vectors, plan, t, taken, paths_of[t.family], analysis)
            look_p = float(paths.look_p_values()[-1])
            looks.setdefault(key, []).append(LookResult(k, at_k.test_id, look_p))
            if found := group_sequential_stop(paths, design, thresholds[t.family]):
                stops[key] = Stop(tuple(looks[key]), found.p_value, found.stopped_at, found.reason)
        _record_looks(store, run_id, design, looks, stops)
        open_tests = [t for t in open_tests if (t.family, t.perturbation.id) not in stops]
        targets = _targets(plan, open_tests, stops, design.k_max)
        early.reset(sum(1 for n in targets.values() if n < design.k_max), len(plan.arms))
        if not open_tests:
            break
    _recount(sampled, plan, store, targets)
    return SequentialOutcome(design, analysis, stops, targets, failures)


def _paths(
    vectors: Mapping[str, NDArray[np.float32]],
    plan: AuditPlan,
    test: PlannedTest,
    looks: tuple[int, ...],
    paths: PathPlan,
    analysis: AnalysisSpec,
) -> GroupSequentialPaths:
    """A test's permutation paths at the looks taken, from its arms' stored vectors (arm_id
    -> the first k of the last look): seeded by the audit seed and the test (its content id
    at k max), never by the look, so a look recomputed after a resume sees the same paths.
    A pooled test over a set of prompts takes stratified paths over every prompt's arms,
    with its combination (``dbpa.stats.set_sequential_paths``)."""
    seed = (plan.seed, int(test.test_id[:15], 16))
    if test.test_id in plan.set_members:
        members = plan.set_members[test.test_id]
        level = OMEGAS[analysis.omega].level
        return set_sequential_paths(
            [vectors[t.original.arm_id] for t in members],
            [vectors[t.perturbed.arm_id] for t in members],
            looks,
            n_paths=paths.n_paths,
            seed=seed,
            first_block=paths.first_block,
            omega=analysis.omega,
            similarity=analysis.similarity if level != "embedding" else "cosine",
            combination=SET_COMBINATION,
            **analysis.omega_options,
        )
    return group_sequential_paths(
        vectors[test.original.arm_id],
        vectors[test.perturbed.arm_id],
        looks,
        n_paths=paths.n_paths,
        seed=seed,
        first_block=paths.first_block,
        omega=analysis.omega,
        similarity=analysis.similarity,
        **analysis.omega_options,
    )


def look_rows(
    design: SequentialDesign,
    looks: Mapping[str, Sequence[LookResult]],
    stops: Mapping[str, Stop],
) -> list[dict[str, object]]:
    """The looks of one family's tests (perturbation id -> its looks so far) as
    ``sequential_looks`` rows; the look a test stopped at carries why (``changed``,
    ``futile``, ``k_max``), the others None (a test whose arm failed later stopped at none)."""
    rows: list[dict[str, object]] = []
    for pid, taken in looks.items():
        stop = stops.get(pid)
        for j, r in enumerate(taken):
            stopped = stop is not None and stop.stopped_at == r.k and j == len(taken) - 1
            rows.append(
                {
                    "perturbation_id": pid,
                    "look": j,
                    "k": r.k,
                    "test_id": r.test_id,
                    "p_value": r.p_value,
                    "weight": design.weights[j],
                    "stop": stop.reason if stopped and stop is not None else None,
                }
            )
    return rows


def _record_looks(
    store: storage.Store,
    run_id: str,
    design: SequentialDesign,
    looks: Mapping[tuple[str, str], Sequence[LookResult]],
    stops: Mapping[tuple[str, str], Stop],
) -> None:
    """Store the looks taken so far, family by family."""
    by_family: dict[str, dict[str, Sequence[LookResult]]] = {}
    for (family, pid), taken in looks.items():
        by_family.setdefault(family, {})[pid] = taken
    for family, family_looks in by_family.items():
        mine = {pid: stop for (f, pid), stop in stops.items() if f == family}
        store.add_sequential_looks(run_id, family, look_rows(design, family_looks, mine))


def family_outputs(plan: AuditPlan, outcome: SequentialOutcome, family: str) -> int:
    """Outputs per arm of a family's original arm (and its replicates) at the end."""
    original = next(t.original.arm_id for t in plan.tests if t.family == family)
    return outcome.arm_outputs.get(original, outcome.design.k_max)


def _targets(
    plan: AuditPlan, open_tests: Sequence[PlannedTest], stops: dict[tuple[str, str], Stop], k: int
) -> dict[str, int]:
    """arm_id -> outputs the design asks of it so far: k for an arm of an open test, else
    the largest stop among its tests (replicate arms follow their original)."""
    reach: dict[str, int] = {}
    open_keys = {(t.family, t.perturbation.id) for t in open_tests}
    originals = {t.family: t.original.arm_id for t in plan.tests}
    for t in plan.tests:
        key = (t.family, t.perturbation.id)  # every test is open or has stopped
        n = k if key in open_keys else max((r.k for r in stops[key].looks), default=0)
        for u in plan.set_members.get(t.test_id, (t,)):  # over a set: every prompt's arms
            for arm_id in (u.original.arm_id, u.perturbed.arm_id):
                reach[arm_id] = max(reach.get(arm_id, 0), n)
    for family, copies in plan.replicates.items():
        for copy in copies:
            reach[copy.arm_id] = reach.get(originals.get(family, ""), k)
    return {a.arm_id: reach.get(a.arm_id, k) for a in plan.arms}


def _recount(
    counter: Counter, plan: AuditPlan, store: storage.Store, targets: dict[str, int]
) -> None:
    """Point the sampling counter at the outputs stored of what the design asks so far."""
    present = store.sample_indices(list(targets))
    done = sum(sum(1 for i in present[a] if i < n) for a, n in targets.items())
    counter.reset(done, sum(targets.values()))
