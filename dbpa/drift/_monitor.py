"""The drift monitor over an audit's epochs: every arm replayed from its baseline epoch.

Each arm of the audit is monitored by a ``dbpa.stats.DriftMonitor`` against its baseline:
the arm at the first epoch, or at the epoch of its series' latest reset
(``Store.add_monitor_reset``; series ``*`` resets every arm). The monitor is replayed from
the stored embeddings, the epochs in epoch order, so its state is a function of the record:
a retried, resumed or re-run tick gives the same evidence and never counts twice, and a
tick recorded late takes its place in time. The reference of an arm is its baseline arm's
first outputs as loaded at its first tick (the same array every tick: never counted again).

**Series.** With ``pool="prompts"`` (the config's ``monitor.pool``, the default) a *series*
is every prompt's arm of one perturbation (or the original) and model over a set of
prompts, named ``role (family)`` without the prompt: its evidence is the product of its
arms' processes (``dbpa.stats.pool_evidence``: the arms' outputs are independent given the
model, so the product of their test martingales is one), and a change spread over the
prompts adds up. With ``pool="arms"``, and for a single prompt either way, a series is one
arm. The ``m`` series are held together by e-Bonferroni (as ``dbpa.stats.family_alarms``):
each alarms at ``m / alpha``, so the chance that any series none of whose arms changed ever
alarms is at most the audit's alpha. A reset of a series (or of one of its arms) restarts
all of its arms. Which conformal processes run (``conformal``) and the pooling are the
config's at the epoch replayed through, for every tick of the replay: a changed setting
replays the whole history under the new design, never a mix of the two.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dbpa.config import parse_config
from dbpa.specs import content_hash
from dbpa.stats import MONITOR_CONFORMAL, DriftMonitor, MonitorState, pool_evidence

from ._compare import VectorReader, load_many
from ._epochs import EpochReader, epoch_order, read_epochs
from ._plan import DriftError, DriftJob, plan_drift

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ALL_SERIES",
    "POOLS",
    "EvidencePoint",
    "MonitorHistory",
    "MonitorHistoryReader",
    "MonitorReader",
    "MonitorReplay",
    "MonitorTick",
    "read_monitor",
    "replay_monitor",
]

ALL_SERIES = "*"
"""A reset's series that applies to every arm."""
POOLS = ("prompts", "arms")
"""How arms form the monitored series: ``prompts`` every prompt's arm of one perturbation (or
the original) and model over a set, ``arms`` each arm alone (``MonitorSpec.pool``)."""


@runtime_checkable
class MonitorReader(EpochReader, VectorReader, Protocol):
    """Reads epochs, vectors and the monitor's resets (``storage.Store`` is one)."""

    def monitor_resets(self, audit: str) -> pd.DataFrame:
        """series, epoch and created_at of every reset of ``audit``, oldest first."""
        ...


@dataclass(frozen=True)
class MonitorTick:
    """One arm's monitor after one epoch."""

    series: str
    """The arm's label, ``role (family)``: the same at every epoch."""
    baseline_epoch: str
    epoch: str
    arm_id: str
    reference_arm: str
    """The arm's ids, or for a series of several arms content ids of theirs."""
    state: MonitorState
    arms: int = 1
    """The series' arms monitored at this tick (their evidence multiplied)."""

    def row(self, replay: MonitorReplay) -> dict[str, Any]:
        """The row ``Store.add_monitor_ticks`` stores."""
        s = self.state
        return {
            "series": self.series,
            "baseline_epoch": self.baseline_epoch,
            "epoch": self.epoch,
            "tick": s.ticks,
            "arm_id": self.arm_id,
            "reference_arm": self.reference_arm,
            "form": replay.form,
            "alpha": replay.arm_alpha,
            "tolerance": replay.tolerance,
            "e_value": s.e_value,
            "log_e_value": s.log_e_value,
            "threshold": s.threshold,
            "alarm": s.alarm,
            "alarm_tick": s.alarm_tick,
            "pairs": s.pairs,
            "stake": s.stake,
        }

    @property
    def raised(self) -> bool:
        """The alarm was raised at this tick."""
        return self.state.alarm_tick == self.state.ticks


@dataclass(frozen=True)
class MonitorReplay:
    """Every arm's monitor over the epochs of an audit."""

    audit: str
    alpha: float
    """The family's level (the audit's alpha)."""
    arms: int
    """m, the series monitored together (pools of arms, or arms); each alarms at ``m /
    alpha``."""
    tolerance: float
    form: str
    conformal: str
    """The conformal processes beside the betting one (``dbpa.stats.DriftMonitor``)."""
    ticks: tuple[MonitorTick, ...]
    """By series, then epoch order."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Arm and epoch not monitored -> why."""
    pool: str = "arms"
    """How arms form the series (``POOLS``)."""
    members: dict[str, int] = field(default_factory=dict)
    """Series -> the arms it pools (at the epoch replayed through)."""

    @property
    def arm_alpha(self) -> float:
        """Each series' level under e-Bonferroni: ``alpha / m``."""
        return self.alpha / self.arms

    @property
    def design(self) -> str:
        """The design in a sentence: what is pooled and the alarm line."""
        line = f"alarm at e = {self.arms}/{self.alpha:g}"
        arms = sum(self.members.values()) or self.arms
        if arms > self.arms:
            return (
                f"{arms} arms pooled over the prompts into {self.arms} series (perturbation "
                f"and model; their evidence multiplied), {line}"
            )
        return f"{self.arms} arms, each alone, {line}"

    def latest(self) -> tuple[MonitorTick, ...]:
        """Each series' last tick."""
        last: dict[str, MonitorTick] = {}
        for t in self.ticks:
            last[t.series] = t
        return tuple(last.values())

    def history(self) -> MonitorHistory:
        """The evidence of every tick, as the chart and the report show it."""
        return MonitorHistory(
            self.audit,
            tuple(
                EvidencePoint(
                    t.series,
                    t.baseline_epoch,
                    t.epoch,
                    t.state.ticks,
                    t.state.log_e_value,
                    t.state.threshold,
                    t.state.alarm,
                    t.raised,
                )
                for t in self.ticks
            ),
        )


@dataclass(frozen=True)
class EvidencePoint:
    """One arm's evidence at one tick since its baseline."""

    series: str
    baseline_epoch: str
    epoch: str
    tick: int
    log_e_value: float
    threshold: float
    """The arm's alarm line (an e-value: ``m / alpha``)."""
    alarm: bool
    raised: bool
    """The alarm was raised at this tick."""

    @property
    def e_value(self) -> float:
        """The evidence as an e-value (overflow capped)."""
        return math.exp(min(self.log_e_value, 700.0))


@dataclass(frozen=True)
class MonitorHistory:
    """The monitor's evidence over the ticks: each arm since its current baseline."""

    audit: str
    points: tuple[EvidencePoint, ...]
    """By series, then tick."""

    @property
    def epochs(self) -> tuple[str, ...]:
        """The ticks shown, in epoch order."""
        return epoch_order(list(dict.fromkeys(p.epoch for p in self.points)))

    def latest(self) -> tuple[EvidencePoint, ...]:
        """Each series' last point."""
        last: dict[str, EvidencePoint] = {}
        for p in self.points:
            last[p.series] = p
        return tuple(last.values())


@runtime_checkable
class MonitorHistoryReader(Protocol):
    """Reads the stored monitor states (``storage.Store`` is one)."""

    def monitor_ticks(self, audit: str) -> pd.DataFrame:
        """Every stored monitor state of ``audit``, by series, baseline and tick."""
        ...


def read_monitor(store: MonitorHistoryReader, audit: str) -> MonitorHistory | None:
    """The stored evidence of ``audit``'s arms since each one's latest baseline (the one
    written last); None when the monitor has stored nothing."""
    rows = store.monitor_ticks(audit)
    if rows.empty:
        return None
    latest = rows.sort_values("created_at").groupby("series").baseline_epoch.last()
    current = rows[rows.baseline_epoch.to_numpy() == latest.reindex(rows.series).to_numpy()]
    points = tuple(
        EvidencePoint(
            str(r.series),
            str(r.baseline_epoch),
            str(r.epoch),
            int(r.tick),
            float(r.log_e_value),
            float(r.threshold),
            bool(r.alarm),
            _tick_or_none(r.alarm_tick) == int(r.tick),
        )
        for r in current.sort_values(["series", "tick"]).itertuples()
    )
    return MonitorHistory(audit, points)


def replay_monitor(
    store: MonitorReader,
    audit: str,
    *,
    epoch: str = "latest",
    tolerance: float | None = None,
    form: str = "test",
    conformal: str | None = None,
    pool: str | None = None,
) -> MonitorReplay:
    """Replay every arm's monitor of ``audit`` through ``epoch`` and pool their evidence
    (module docstring); ``tolerance``, ``conformal`` (outputs, ticks or both) and ``pool``
    (prompts or arms) override the config's ``monitor.tolerance``, ``monitor.conformal``
    and ``monitor.pool``."""
    epochs = read_epochs(store, audit)
    if not epochs:
        raise DriftError(f"audit: no completed run of {audit!r} is recorded")
    names = [e.epoch for e in epochs]
    if epoch != "latest" and epoch not in names:
        raise DriftError(f"epoch: no completed run at epoch {epoch!r}")
    upto = names.index(epoch) if epoch != "latest" else len(names) - 1
    resets = _resets(store.monitor_resets(audit), names[: upto + 1])
    config = parse_config(epochs[upto].config, source=f"run {epochs[upto].run_id}")
    alpha = config.analysis.alpha
    tolerance = config.monitor.tolerance if tolerance is None else tolerance
    conformal = conformal or config.monitor.conformal
    if conformal not in MONITOR_CONFORMAL:
        choices = ", ".join(MONITOR_CONFORMAL)
        raise DriftError(f"conformal: unknown {conformal!r}; choose one of {choices}")
    pool = pool or config.monitor.pool
    if pool not in POOLS:
        raise DriftError(f"pool: unknown {pool!r}; choose one of {', '.join(POOLS)}")
    latest = plan_drift(audit, epochs[: upto + 1], against=("baseline",))
    series_of = {
        job.label: job.pool if pool == "prompts" else job.label for c in latest for job in c.jobs
    }
    members = Counter(series_of.values())
    m = max(len(members), 1)
    everyone = resets.get(ALL_SERIES, 0)
    baselines = {
        name: max(
            [everyone, resets.get(name, 0)] + [resets.get(a, 0) for a in _arms(series_of, name)]
        )
        for name in members
    }
    replay_ticks: list[MonitorTick] = []
    skipped: dict[str, str] = {}
    for base in sorted(set(baselines.values())):
        series = {name for name, b in baselines.items() if b == base}
        found: dict[str, _Series] = {}
        monitors: dict[str, tuple[DriftMonitor, NDArray[np.float32]]] = {}
        positions = range(base + 1, upto + 1)
        comparisons = [
            plan_drift(
                audit,
                epochs[: upto + 1],
                epoch=names[position],
                baseline=names[base],
                against=("baseline",),
            )[0]
            for position in positions
        ]
        for position, (ready, missing) in zip(
            positions, load_many(store, comparisons), strict=True
        ):
            for label, reason in missing.items():
                if series_of.get(label) in series:
                    skipped[f"{label} @ {names[position]}"] = reason
            for job, reference, current in ready:
                name = series_of.get(job.label)
                if name not in series:
                    continue
                if job.label not in monitors:
                    rng = _seed(audit, job.label, names[base])
                    monitor = DriftMonitor(tolerance=tolerance, conformal=conformal, rng=rng)
                    monitors[job.label] = (monitor, reference)
                monitor, fixed = monitors[job.label]
                state = monitor.update(fixed, current)
                found.setdefault(name, _Series()).add(names[position], job, state)
        for name, tracked in found.items():
            replay_ticks += tracked.ticks(name, names[base], alpha / m, form)
    replay_ticks.sort(key=lambda t: (t.series, t.baseline_epoch, t.state.ticks))
    return MonitorReplay(
        audit,
        alpha,
        m,
        tolerance,
        form,
        conformal,
        tuple(replay_ticks),
        skipped,
        pool=pool,
        members=dict(sorted(members.items())),
    )


@dataclass
class _Series:
    """A series' arms' monitor states by epoch, pooled by ``ticks`` (``pool_evidence``)."""

    epochs: list[str] = field(default_factory=list)
    states: list[dict[str, tuple[DriftJob, MonitorState]]] = field(default_factory=list)

    def add(self, epoch: str, job: DriftJob, state: MonitorState) -> None:
        if not self.epochs or self.epochs[-1] != epoch:
            self.epochs.append(epoch)
            self.states.append({})
        self.states[-1][job.label] = (job, state)

    def ticks(self, name: str, baseline: str, alpha: float, form: str) -> list[MonitorTick]:
        """The series' states: its arms' processes multiplied, each arm's carried over
        ticks it missed (1 before its first)."""
        arms = sorted({label for tick in self.states for label in tick})
        first = next(iter(self.states[0].values()))[1]
        processes = len(first.log_martingales)
        logs = np.zeros((len(self.states), len(arms), processes))
        for t, tick in enumerate(self.states):
            if t:
                logs[t] = logs[t - 1]
            for label, (_, state) in tick.items():
                logs[t, arms.index(label)] = state.log_martingales
        pooled = pool_evidence(logs, alpha, form=form, weights=first.weights)
        jobs = {label: job for tick in self.states for label, (job, _) in tick.items()}
        arm_id, reference_arm = _pool_ids([jobs[a] for a in arms])
        found = []
        for t, (epoch, tick) in enumerate(zip(self.epochs, self.states, strict=True)):
            states = [state for _, state in tick.values()]
            evidence = float(pooled.log_e_value[t])
            alarm_tick = (
                pooled.alarm_tick if pooled.alarm_tick and pooled.alarm_tick <= t + 1 else None
            )
            state = MonitorState(
                ticks=t + 1,
                e_value=math.exp(min(evidence, 700.0)),
                log_e_value=evidence,
                threshold=pooled.threshold,
                alarm=alarm_tick is not None,
                alarm_tick=alarm_tick,
                pairs=sum(s.pairs for s in states),
                stake=float(np.mean([s.stake for s in states])),
                payoff=float(np.mean([s.payoff for s in states])),
                baseline_left=sum(s.baseline_left for s in states),
                log_e_betting=float(pooled.log_processes[t, 0]),
                log_e_conformal=float(pooled.log_processes[t, 1:].max()) if processes > 1 else 0.0,
                log_martingales=tuple(float(v) for v in logs[t].sum(axis=0)),
                weights=first.weights,
            )
            found.append(
                MonitorTick(name, baseline, epoch, arm_id, reference_arm, state, len(tick))
            )
        return found


def _pool_ids(jobs: Sequence[DriftJob]) -> tuple[str, str]:
    """A series' arm and reference arm ids: its arm's, or for a pool of several a content
    id of its arms'."""
    if len(jobs) == 1:
        return jobs[0].arm, jobs[0].reference_arm
    return (
        content_hash("pool", sorted(j.arm for j in jobs)),
        content_hash("pool", sorted(j.reference_arm for j in jobs)),
    )


def _arms(series_of: Mapping[str, str], name: str) -> list[str]:
    """The arm labels of series ``name``."""
    return [label for label, series in series_of.items() if series == name and label != name]


def _tick_or_none(value: Any) -> int | None:
    """A stored tick, or None (NULL read back as None or NaN)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _resets(frame: pd.DataFrame, names: Sequence[str]) -> dict[str, int]:
    """series -> position of its latest reset epoch among ``names`` (resets at epochs not
    recorded yet, or later than the replay, are not in force)."""
    found: dict[str, int] = {}
    for r in frame.itertuples():
        if str(r.epoch) in names:
            position = list(names).index(str(r.epoch))
            found[str(r.series)] = max(found.get(str(r.series), 0), position)
    return found


def _seed(audit: str, series: str, baseline: str) -> np.random.Generator:
    """The series' own generator: the same at every replay."""
    digest = hashlib.sha256(f"{audit}\0{series}\0{baseline}".encode()).hexdigest()
    return np.random.default_rng(int(digest[:16], 16))
