"""The ``noise`` kind: seeded typos, casing, whitespace, punctuation, filler words and
contractions in the user prompt, as real users type it.

Each variant draws from its own generator, ``Generator(PCG64([seed, stream, variant,
attempt]))`` (PCG64 seeded by a ``SeedSequence`` over those integers, as ``default_rng``
does; ``stream`` fixed per operation), and uses only its ``random()`` floats, so the texts
depend on nothing but the spec and the prompt: not on the process, the machine, or the other
operations listed. A draw that repeats the original or an earlier variant is drawn again
with the next ``attempt``.
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
    Noisy,
    Operation,
    TypoKind,
    apply_noise,
    places,
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

_STREAMS: dict[str, int] = {"mixed": 0, **{op: i + 1 for i, op in enumerate(OPERATIONS)}}
"""The generator stream of each operation (and of combined variants): fixed numbers, so a
new operation never changes the texts of the others."""

SHOWN_EDITS = 3
"""Edits a description lists before counting the rest."""


def _describe(name: str, rate: float, steps: list[tuple[str, Noisy]]) -> str:
    """E.g. ``typos noise at rate 0.1: 'cough' -> 'coigh', 'mild' -> 'mlid' (+2 more)``;
    combined variants name the operation of each edit."""
    shown = [(op, e) for op, step in steps for e in step.edits][:SHOWN_EDITS]
    listed = ", ".join(
        f"{op + ' ' if op != name else ''}{e.before!r} -> {e.after!r}" for op, e in shown
    )
    more = sum(step.changes for _, step in steps) - len(shown)
    return f"{name} noise at rate {rate:g}: {listed}{f' (+{more} more)' if more else ''}"


class NoiseSpec(FamilySpec):
    """Seeded noise in the user prompt: ``variants`` noisy copies per operation (ids
    ``noise-<operation>-<n>``), or with ``combine`` ``variants`` copies that each apply every
    listed operation (ids ``noise-mixed-<n>``).

    Each place an operation may edit (a word, a gap between words, a punctuation mark, a
    contractible phrase) is edited with probability ``rate``; a variant in which no place was
    chosen gets one edit at a place chosen uniformly. A listed operation that finds no place
    in the prompt is an error, as is a prompt with fewer distinct variants than asked for.
    With ``record`` or ``cardiovascular`` specs and no ``prompt``, the noise applies to the
    rendered record.
    """

    kind: Literal["noise"] = "noise"
    operations: tuple[Operation, ...] = Field(default=DEFAULT_OPERATIONS, min_length=1)
    """Which edits (default: all but ``contractions``)."""
    rate: float = Field(default=0.1, gt=0, le=1)
    """Probability that each place is edited (0 < rate <= 1)."""
    variants: int = Field(default=5, ge=1, le=100_000)
    """Noisy variants per operation (with ``combine``: in all)."""
    seed: int = Field(default=0, ge=0)
    combine: bool = False
    """Each variant applies every listed operation, in the order of ``OPERATIONS``."""
    typo_kinds: tuple[TypoKind, ...] = Field(default=TYPO_KINDS, min_length=1)
    """The typos drawn from: adjacent-key substitution, deletion, insertion, transposition."""
    label: Label | None = "control"
    """Label of every variant (default ``control``: noise should not change the answers)."""
    prefix: Identifier | None = "noise"

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
        if self.combine:
            groups = [("mixed", self.operations)]
        else:
            groups = [(op, (op,)) for op in self.operations]
        perturbations = []
        for name, ops in groups:
            seen = {text}
            spans = places(ops[0], text) if len(ops) == 1 else None
            for n in range(1, self.variants + 1):
                noisy, steps = self._variant(text, name, ops, n, seen, spans)
                seen.add(noisy)
                perturbations.append(
                    Perturbation(
                        id=f"{self.prefix or 'noise'}-{name}-{n}",
                        kind=self.kind,
                        label=self.label,
                        description=_describe(name, self.rate, steps),
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
        spans: list[tuple[int, int]] | None,
    ) -> tuple[str, list[tuple[str, Noisy]]]:
        """Variant ``n`` of ``text``, and its steps: the first draw that is not in ``seen``
        (``spans``: the places of the one operation, None for combined variants)."""
        for attempt in range(MAX_ATTEMPTS):
            rng = np.random.Generator(np.random.PCG64([self.seed, _STREAMS[name], n, attempt]))
            if spans is not None:
                step = apply_noise(
                    ops[0], text, self.rate, rng, typo_kinds=self.typo_kinds, spans=spans
                )
                noisy, steps = step.text, [(name, step)]
            else:
                noisy, steps = self._combined(text, ops, rng)
            if noisy not in seen:
                return noisy, steps
        raise ValueError(
            f"variants: {self.variants} distinct {name} variants asked, but variant {n} "
            f"repeated the original or an earlier one in {MAX_ATTEMPTS} draws (seed "
            f"{self.seed}); the prompt has too few places for it: ask for fewer variants "
            f"or raise the rate"
        )

    def _combined(
        self, text: str, ops: tuple[Operation, ...], rng: np.random.Generator
    ) -> tuple[str, list[tuple[str, Noisy]]]:
        """Every operation of ``ops`` in turn, in the order of ``OPERATIONS``; when none
        changed anything, one of them (chosen by one more draw) edits at least one place."""
        ordered = [op for op in OPERATIONS if op in ops]
        steps: list[tuple[str, Noisy]] = []
        noisy = text
        for op in ordered:
            step = apply_noise(
                op, noisy, self.rate, rng, at_least_one=False, typo_kinds=self.typo_kinds
            )
            noisy = step.text
            steps.append((op, step))
        if noisy == text:
            op = ordered[int(rng.random() * len(ordered))]
            step = apply_noise(op, text, self.rate, rng, typo_kinds=self.typo_kinds)
            noisy, steps = step.text, [(op, step)]
        return noisy, steps
