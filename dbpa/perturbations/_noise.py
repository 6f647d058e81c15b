"""The ``noise`` kind: seeded typos, casing, whitespace, punctuation, filler words and
contractions in the user prompt, as real users type it.

Each variant draws from its own stretch of one PCG64 stream per (seed, operation): the
stream of ``SeedSequence([seed, stream])`` (``stream`` a fixed number per operation),
advanced by ``variant * 2**64 + attempt * 2**48`` steps (PCG64's exact jump-ahead; no stretch
overlaps another before 2**48 draws). Only ``Generator.random()`` floats are used, so the
texts depend on nothing but the spec and the prompt: not on the process, the machine, or the
other operations listed. A draw that repeats the original or an earlier variant is drawn
again with the next ``attempt``. (A generator per variant seeded through ``SeedSequence``
cost 20-50 us, more than the rest of a variant; the jump costs about 2 us.)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from dbpa.specs import Message

from ._messages import user_prompt_index, with_content
from ._model import FamilySpec, Identifier, Label, Perturbation
from ._noise_ops import (
    OPERATIONS,
    PLACE_NAMES,
    TYPO_KINDS,
    Operation,
    Replacement,
    TypoKind,
    choose_edits,
    places,
    splice,
)

DEFAULT_OPERATIONS: tuple[Operation, ...] = (
    "typos",
    "casing",
    "whitespace",
    "punctuation",
    "filler",
)
"""Every operation but ``contractions``, which most prompts give no place to."""

MAX_ATTEMPTS = 20
"""Draws per variant before a prompt is judged to have too few distinct variants."""


class VariantStreams:
    """The generators of one (seed, stream): ``at(n, attempt)`` is the PCG64 stream of
    ``SeedSequence([seed, stream])`` advanced by ``n * 2**64 + attempt * 2**48`` steps.

    One generator object is re-positioned by each call: use it before the next one.
    """

    def __init__(self, seed: int, stream: int) -> None:
        self._bits = np.random.PCG64(np.random.SeedSequence([seed, stream]))
        self._start = self._bits.state
        self._rng = np.random.Generator(self._bits)

    def at(self, n: int, attempt: int) -> np.random.Generator:
        """The generator of variant ``n`` (< 2**64), attempt ``attempt`` (< 2**16)."""
        self._bits.state = self._start
        self._bits.advance((n << 64) | (attempt << 48))
        return self._rng


_STREAMS: dict[str, int] = {
    "mixed": 0,
    "typos": 1,
    "casing": 2,
    "whitespace": 3,
    "punctuation": 4,
    "filler": 5,
    "contractions": 6,
}
"""The generator stream of each operation (and of combined variants): fixed numbers, so a
new operation never changes the texts of the others."""

SHOWN_EDITS = 3
"""Edits a description lists before counting the rest."""


Tagged = list[tuple[str, Replacement]]
"""A variant's edits, each with the operation that made it."""


def _describe(name: str, rate: float, text: str, edits: Tagged) -> str:
    """E.g. ``typos noise at rate 0.1: 'cough' -> 'coigh', 'mild' -> 'mlid' (+2 more)``;
    combined variants name the operation of each edit."""
    shown = [(op, r.in_context(text)) for op, r in edits[:SHOWN_EDITS]]
    listed = ", ".join(
        f"{op + ' ' if op != name else ''}{e.before!r} -> {e.after!r}" for op, e in shown
    )
    more = len(edits) - len(shown)
    return f"{name} noise at rate {rate:g}: {listed}{f' (+{more} more)' if more else ''}"


class NoiseSpec(FamilySpec):
    """Seeded noise in the user prompt: ``variants`` noisy copies per operation (ids
    ``noise-<operation>-<n>``), or with ``combine`` ``variants`` copies that each apply every
    listed operation (ids ``noise-mixed-<n>``).

    Each place an operation may edit (a word, a gap between words, a punctuation mark, a
    contractible phrase) is edited with probability ``rate``; a variant in which no place was
    chosen gets one edit at a place chosen uniformly. In a combined variant every operation
    edits places of the original prompt, in the order of ``OPERATIONS``, leaving alone the
    places that overlap an edit already made (a word with a typo gets no casing change, a
    gap with a filler is not respaced). A listed operation that finds no place in the
    prompt is an error, as is a prompt with fewer distinct variants than asked for.
    With ``record`` or ``cardiovascular`` specs and no ``prompt``, the noise applies to the
    rendered record.
    """

    kind: Literal["noise"] = "noise"
    """Seeded typing noise in the user prompt."""
    operations: tuple[Operation, ...] = Field(default=DEFAULT_OPERATIONS, min_length=1)
    """Which edits (default: all but ``contractions``)."""
    rate: float = Field(default=0.1, gt=0, le=1)
    """Probability that each place is edited (0 < rate <= 1)."""
    variants: int = Field(default=5, ge=1, le=100_000)
    """Noisy variants per operation (with ``combine``: in all)."""
    seed: int = Field(default=0, ge=0)
    """Seeds the edits: the same seed writes the same variants on every machine."""
    combine: bool = False
    """Each variant applies every listed operation, in the order of ``OPERATIONS``, each
    place edited once at most."""
    typo_kinds: tuple[TypoKind, ...] = Field(default=TYPO_KINDS, min_length=1)
    """The typos drawn from: adjacent-key substitution, deletion, insertion, transposition."""
    label: Label | None = "control"
    """Label of every variant (default ``control``: noise should not change the answers)."""
    prefix: Identifier | None = "noise"
    """Start of the generated ids (``noise-<operation>-<n>``)."""

    @field_validator("operations", "typo_kinds")
    @classmethod
    def _distinct(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"{repeated[0]!r} is listed twice")
        return values

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        index = user_prompt_index(original)
        text = original[index].content
        for op in self.operations:
            if not places(op, text):
                raise ValueError(
                    f"operations: {op!r} finds no place in the user prompt "
                    f"(it edits a {PLACE_NAMES[op]}); leave it out"
                )
        spans = {op: places(op, text) for op in self.operations}
        if self.combine:
            groups = [("mixed", self.operations)]
        else:
            groups = [(op, (op,)) for op in self.operations]
        perturbations = []
        for name, ops in groups:
            seen = {text}
            streams = VariantStreams(self.seed, _STREAMS[name])
            for n in range(1, self.variants + 1):
                noisy, edits = self._variant(text, name, ops, n, seen, spans, streams)
                seen.add(noisy)
                perturbations.append(
                    Perturbation(
                        id=f"{self.prefix or 'noise'}-{name}-{n}",
                        kind=self.kind,
                        label=self.label,
                        description=_describe(name, self.rate, text, edits),
                        messages=with_content(original, index, noisy),
                    )
                )
        return perturbations

    def _variant(
        self,
        text: str,
        name: str,
        ops: tuple[Operation, ...],
        n: int,
        seen: set[str],
        spans: dict[Operation, list[tuple[int, int]]],
        streams: VariantStreams,
    ) -> tuple[str, Tagged]:
        """Variant ``n`` of ``text`` and its edits: the first draw not in ``seen``."""
        for attempt in range(MAX_ATTEMPTS):
            rng = streams.at(n, attempt)
            if len(ops) == 1:
                edits = [
                    (name, r)
                    for r in choose_edits(
                        ops[0], text, spans[ops[0]], self.rate, rng, typo_kinds=self.typo_kinds
                    )
                ]
            else:
                edits = self._combined(text, ops, spans, rng)
            noisy = splice(text, sorted((r for _, r in edits), key=lambda r: r.start))
            if noisy not in seen:
                return noisy, edits
        counts = ", ".join(f"{len(spans[op])} for {op}" for op in ops)
        raise ValueError(
            f"variants: {self.variants} distinct {name} variants asked, but variant {n} "
            f"repeated the original or an earlier one in {MAX_ATTEMPTS} draws (seed "
            f"{self.seed}); the prompt has too few places ({counts}): "
            f"{self._advice(sum(len(spans[op]) for op in ops))}"
        )

    def _advice(self, n_places: int) -> str:
        """What gives more distinct variants: fewer asked, more operations, and with two
        places or more another rate: a higher one below 1 (more places edited at once), a
        lower one at 1 (where every place is edited in every variant, so only the edits
        vary, never which places). With one place the rate changes nothing."""
        advice = ["ask for fewer variants"]
        if not self.combine:
            advice.append("combine it with other operations (`combine: true`)")
        elif len(self.operations) < len(OPERATIONS):
            advice.append("list more operations")
        if n_places > 1 and self.rate < 1:
            advice.append("raise the rate (more edits per variant)")
        elif n_places > 1:
            advice.append(
                "lower the rate (at rate 1 every place is edited in every variant; below it "
                "the places edited vary too)"
            )
        return ", ".join(advice[:-1]) + f", or {advice[-1]}" if len(advice) > 1 else advice[0]

    def _combined(
        self,
        text: str,
        ops: tuple[Operation, ...],
        spans: dict[Operation, list[tuple[int, int]]],
        rng: np.random.Generator,
    ) -> Tagged:
        """The edits of every operation of ``ops`` in turn (in the order of ``OPERATIONS``),
        each at places no earlier edit overlaps; when none changed anything, one of the
        operations (chosen by one more draw) edits one place at least."""
        ordered = [op for op in OPERATIONS if op in ops]
        taken = bytearray(len(text))
        edits: Tagged = []
        for op in ordered:
            made = choose_edits(
                op,
                text,
                spans[op],
                self.rate,
                rng,
                at_least_one=False,
                typo_kinds=self.typo_kinds,
                taken=taken,
            )
            for r in made:
                taken[r.start : r.end] = b"\x01" * (r.end - r.start)
            edits += [(op, r) for r in made]
        if not edits:
            op = ordered[int(rng.random() * len(ordered))]
            made = choose_edits(op, text, spans[op], self.rate, rng, typo_kinds=self.typo_kinds)
            edits = [(op, r) for r in made]
        return edits
