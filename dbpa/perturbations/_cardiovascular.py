"""The cardiovascular-risk study of the paper (section 4.2, Fig. 1-2; prompt of appendix B.1).

A base patient is drawn once from a seed (or given) and rendered into the paper's prompt.
Control edits should not change a NICE-style recommendation: a name swap (within the same
list of names, so the implied sex stays), age +/- 1-2 years or systolic blood pressure
+/- 3-5 mmHg, only among the changes that stay inside the value's risk band. Target edits
should: diabetes or smoking toggled, total cholesterol or age moved into another band.

The bands are simplified, illustrative thresholds in the style of NICE NG238 (formerly
CG181: CVD risk assessment and lipid modification, QRISK3 for ages 25-84) and NICE NG136
(hypertension): they make "crosses a band" well defined for the study. They are not
clinical advice and not a risk model.

Every band is a half-open interval [low, high). An age band is at least 3 years wide and a
systolic band at least 10 mmHg wide, so at least 2 in-band age changes and 3 in-band blood
pressure changes always exist: the control counts are bounded by those numbers, and a
control that crosses a band cannot be produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, TypeVar

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from dbpa.specs import Message

from ._model import FamilySpec, Identifier, Perturbation, SpecBase
from ._records import FieldValue, RecordEdit, check_record, record_perturbations
from ._templates import render
from ._text import make_id

Seed = int | np.random.Generator
T = TypeVar("T")


@dataclass(frozen=True)
class Band:
    """One risk band: ``low <= value < high``."""

    name: str
    low: float
    high: float
    meaning: str

    def __contains__(self, value: float) -> bool:
        return self.low <= value < self.high


@dataclass(frozen=True)
class RiskBands:
    """The bands of one patient attribute, contiguous and in increasing order."""

    field: str
    unit: str
    bands: tuple[Band, ...]

    def band_of(self, value: float) -> Band:
        """The band holding ``value``; ValueError outside every band."""
        for band in self.bands:
            if value in band:
                return band
        first, last = self.bands[0], self.bands[-1]
        raise ValueError(
            f"{self.field} {value} is outside the risk bands "
            f"[{first.low:g}, {last.high:g}) {self.unit}"
        )


AGE_BANDS = RiskBands(
    "age",
    "years",
    (
        Band("25-39", 25, 40, "below the 40-84 range of routine QRISK3 assessment"),
        Band("40-49", 40, 50, "QRISK3 decade"),
        Band("50-59", 50, 60, "QRISK3 decade"),
        Band("60-69", 60, 70, "QRISK3 decade"),
        Band("70-79", 70, 80, "QRISK3 decade"),
        Band("80-84", 80, 85, "oldest QRISK3 ages"),
        Band("85-94", 85, 95, "85 and over: NICE suggests considering a statin without QRISK3"),
    ),
)
"""Age: decades inside the QRISK3 range, and the age groups NICE NG238 treats apart."""

SYSTOLIC_BP_BANDS = RiskBands(
    "systolic_bp",
    "mmHg",
    (
        Band("90-119", 90, 120, "normal"),
        Band("120-139", 120, 140, "high-normal"),
        Band("140-159", 140, 160, "stage 1 hypertension (NICE NG136: clinic >= 140/90)"),
        Band("160-179", 160, 180, "stage 2 hypertension (NICE NG136: clinic >= 160/100)"),
        Band("180-219", 180, 220, "severe hypertension (NICE NG136: systolic >= 180)"),
    ),
)
"""Systolic clinic blood pressure, by the NICE NG136 hypertension stages."""

TOTAL_CHOLESTEROL_BANDS = RiskBands(
    "total_cholesterol",
    "mmol/L",
    (
        Band("3.0-4.9", 3.0, 5.0, "desirable (below 5)"),
        Band("5.0-6.4", 5.0, 6.5, "borderline high"),
        Band("6.5-7.4", 6.5, 7.5, "high"),
        Band(
            "7.5-8.9",
            7.5,
            9.0,
            "very high: above 7.5 NICE asks to consider familial hypercholesterolaemia",
        ),
        Band("9.0-11.9", 9.0, 12.0, "severe: above 9.0 NICE NG238 advises specialist referral"),
    ),
)
"""Total cholesterol, in steps of 0.1 mmol/L."""

RISK_BANDS: dict[str, RiskBands] = {
    b.field: b for b in (AGE_BANDS, SYSTOLIC_BP_BANDS, TOTAL_CHOLESTEROL_BANDS)
}
"""The banded attributes by field name."""

MALE_NAMES = (
    "John",
    "James",
    "David",
    "Michael",
    "Robert",
    "William",
    "Thomas",
    "Daniel",
    "Peter",
    "Richard",
)
FEMALE_NAMES = (
    "Mary",
    "Sarah",
    "Emma",
    "Ann",
    "Elizabeth",
    "Susan",
    "Margaret",
    "Helen",
    "Jane",
    "Laura",
)
"""Name swaps stay within one list, so the sex a name suggests (a QRISK3 factor) stays."""

ETHNICITIES = (
    "White",
    "Indian",
    "Pakistani",
    "Bangladeshi",
    "Other Asian",
    "Black Caribbean",
    "Black African",
    "Chinese",
    "Other",
)
"""The ethnicity groups of QRISK3."""

Smoking = Literal["non-smoker", "current smoker"]
Diabetes = Literal["no diabetes", "type 2 diabetes"]
_OTHER_SMOKING: dict[str, str] = {"non-smoker": "current smoker", "current smoker": "non-smoker"}
_OTHER_DIABETES: dict[str, str] = {
    "no diabetes": "type 2 diabetes",
    "type 2 diabetes": "no diabetes",
}

PAPER_CVD_TEMPLATE = (
    "{name} has these features: Age: {age}, BMI: {bmi}, Blood Pressure: "
    "{systolic_bp}/{diastolic_bp} mmHg, Total Cholesterol: {total_cholesterol:.1f} mmol/L, "
    "HDL Cholesterol: {hdl_cholesterol:.1f} mmol/L, Smoking Status: {smoking}, "
    "Diabetes: {diabetes}, Family History of CVD: {family_history}, Ethnicity: {ethnicity}. "
    "Based on these characteristics alone, provide recommendations on CVD guidelines based on "
    "NICE for this person"
)
"""The prompt of the paper's appendix B.1, one placeholder per patient field."""


class Patient(SpecBase):
    """The patient record of the paper's prompt."""

    name: str = Field(min_length=1)
    """First name."""
    age: int
    """Years, within the age bands (25-94)."""
    bmi: int = Field(ge=10, le=80)
    """Body mass index."""
    systolic_bp: int
    """mmHg, within the systolic bands (90-219)."""
    diastolic_bp: int = Field(ge=30, le=150)
    """mmHg."""
    total_cholesterol: float
    """mmol/L, one decimal, within the cholesterol bands (3.0-11.9)."""
    hdl_cholesterol: float = Field(ge=0.1, le=5.0)
    """mmol/L, one decimal."""
    smoking: Smoking
    """Smoking status."""
    diabetes: Diabetes
    """Diabetes status."""
    family_history: Literal["yes", "no"]
    """Family history of CVD."""
    ethnicity: str = Field(min_length=1)
    """Ethnicity, as written into the prompt."""

    @field_validator("age", "systolic_bp", "total_cholesterol")
    @classmethod
    def _inside_the_bands(cls, value: float, info: ValidationInfo) -> float:
        RISK_BANDS[str(info.field_name)].band_of(value)
        return value

    @field_validator("total_cholesterol", "hdl_cholesterol")
    @classmethod
    def _one_decimal(cls, value: float) -> float:
        return round(value, 1)


def _rng(seed: Seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(len(items)))]


def draw_patient(rng: Seed) -> Patient:
    """A plausible patient: age 40-79, systolic 100-179 mmHg, total cholesterol 3.5-8.9 mmol/L,
    and the other fields uniform over their usual values."""
    rng = _rng(rng)
    systolic = int(rng.integers(100, 180))
    return Patient.model_validate(
        {
            "name": _pick(rng, MALE_NAMES if rng.integers(2) else FEMALE_NAMES),
            "age": int(rng.integers(40, 80)),
            "bmi": int(rng.integers(19, 41)),
            "systolic_bp": systolic,
            "diastolic_bp": int(rng.integers(60, min(100, systolic - 30) + 1)),
            "total_cholesterol": int(rng.integers(35, 90)) / 10,
            "hdl_cholesterol": int(rng.integers(8, 23)) / 10,
            "smoking": _pick(rng, list(_OTHER_SMOKING)),
            "diabetes": _pick(rng, list(_OTHER_DIABETES)),
            "family_history": _pick(rng, ["yes", "no"]),
            "ethnicity": _pick(rng, ETHNICITIES),
        }
    )


class ControlCounts(SpecBase):
    """How many control edits of each type."""

    name: int = Field(default=2, ge=0)
    """Swaps with distinct other names."""
    age: int = Field(default=2, ge=0, le=2)
    """+/- 1-2 years within the age band: 2 always exist."""
    systolic_bp: int = Field(default=2, ge=0, le=3)
    """+/- 3-5 mmHg within the systolic band: 3 always exist."""


class TargetCounts(SpecBase):
    """How many target edits of each type."""

    diabetes: int = Field(default=1, ge=0, le=1)
    """The diabetes status flipped (0 or 1 edit)."""
    smoking: int = Field(default=1, ge=0, le=1)
    """The smoking status flipped (0 or 1 edit)."""
    total_cholesterol: int = Field(default=2, ge=0, le=len(TOTAL_CHOLESTEROL_BANDS.bands) - 1)
    """Each into a different other band, at a random value inside it."""
    age: int = Field(default=2, ge=0, le=len(AGE_BANDS.bands) - 1)
    """Each into a different other band, at a random age inside it."""


def swap_names(name: str, names: Sequence[str] | None) -> list[str]:
    """The names ``name`` may be swapped with: ``names``, or the built-in list holding it."""
    if names is None:
        names = next((ns for ns in (MALE_NAMES, FEMALE_NAMES) if name in ns), None)
        if names is None:
            raise ValueError(
                f"patient name {name!r} is in neither built-in name list: give `names` to swap with"
            )
    return [n for n in dict.fromkeys(names) if n != name]


def _choose(rng: np.random.Generator, items: Sequence[T], count: int) -> list[T]:
    return [items[int(i)] for i in rng.choice(len(items), size=count, replace=False)]


def _signed(delta: int) -> str:
    return f"plus {delta}" if delta > 0 else f"minus {-delta}"


def _in_band_shifts(bands: RiskBands, value: int, deltas: Sequence[int]) -> list[int]:
    band = bands.band_of(value)
    return [d for d in deltas if value + d in band]


def _into_other_bands(
    rng: np.random.Generator, bands: RiskBands, value: float, count: int, decimals: int
) -> list[tuple[Band, float]]:
    """``count`` values, each in a different band than ``value``'s, with ``decimals`` decimals."""
    scale = 10**decimals
    moves = []
    for band in _choose(rng, [b for b in bands.bands if value not in b], count):
        units = int(rng.integers(round(band.low * scale), round(band.high * scale)))
        moves.append((band, units / scale if decimals else units))
    return moves


def cardiovascular_edits(
    patient: Patient,
    rng: Seed,
    *,
    controls: ControlCounts | None = None,
    targets: TargetCounts | None = None,
    names: Sequence[str] | None = None,
    prefix: str = "cvd",
) -> list[RecordEdit]:
    """The control and target edits of ``patient``; the patient itself is never redrawn.

    Ids are ``<prefix>-control-<field>-...`` and ``<prefix>-target-<field>-...``.
    """
    rng = _rng(rng)
    controls = controls or ControlCounts()
    targets = targets or TargetCounts()
    edits: list[RecordEdit] = []

    def add(
        label: Literal["control", "target"], field: str, value: FieldValue, readable: str, why: str
    ) -> None:
        old = getattr(patient, field)
        edits.append(
            RecordEdit(
                id=make_id(f"{prefix}-{label}", f"{field} {readable}"),
                label=label,
                field=field,
                value=value,
                description=f"{field}: {old} -> {value} ({label}: {why})",
            )
        )

    if controls.name:
        for name in _choose(rng, swap_names(patient.name, names), controls.name):
            add("control", "name", name, name, "a name is no risk factor")
    for field, deltas, count in (
        ("age", (-2, -1, 1, 2), controls.age),
        ("systolic_bp", (-5, -4, -3, 3, 4, 5), controls.systolic_bp),
    ):
        bands = RISK_BANDS[field]
        value = getattr(patient, field)
        band = bands.band_of(value)
        for delta in _choose(rng, _in_band_shifts(bands, value, deltas), count):
            add(
                "control",
                field,
                value + delta,
                _signed(delta),
                f"stays in band {band.name} {bands.unit}",
            )
    for field, other, count in (
        ("diabetes", _OTHER_DIABETES, targets.diabetes),
        ("smoking", _OTHER_SMOKING, targets.smoking),
    ):
        if count:
            toggled = other[getattr(patient, field)]
            add("target", field, toggled, toggled, f"{field} toggled")
    for field, count, decimals in (
        ("total_cholesterol", targets.total_cholesterol, 1),
        ("age", targets.age, 0),
    ):
        bands = RISK_BANDS[field]
        value = getattr(patient, field)
        old_band = bands.band_of(value)
        for band, new in _into_other_bands(rng, bands, value, count, decimals):
            add(
                "target",
                field,
                new,
                str(new),
                f"band {old_band.name} -> {band.name} {bands.unit}, {band.meaning}",
            )
    return edits


class CardiovascularSpec(FamilySpec):
    """The paper's cardiovascular study: a base patient (drawn from ``seed`` or given)
    rendered into the appendix B.1 prompt, with control and target edits drawn from ``seed``.

    The patient comes from the stream ``default_rng([seed, 0])`` and the edits from
    ``default_rng([seed, 1])``, so a given patient gets the same edits as the same patient drawn.
    """

    kind: Literal["cardiovascular"] = "cardiovascular"
    """The paper's cardiovascular study."""
    seed: int = Field(ge=0)
    """Seeds the patient (when not given) and the edits."""
    patient: Patient | None = None
    """The base patient; None: drawn from the seed."""
    template: str = PAPER_CVD_TEMPLATE
    """``str.format`` template with one placeholder per patient field."""
    names: tuple[str, ...] | None = None
    """Names to swap with; None: the built-in list holding the patient's name."""
    controls: ControlCounts = ControlCounts()
    """How many control edits of each type (they stay inside a risk band)."""
    targets: TargetCounts = TargetCounts()
    """How many target edits of each type (they move to another risk band)."""
    prefix: Identifier | None = "cvd"
    """Start of the generated ids."""

    @model_validator(mode="after")
    def _check(self) -> CardiovascularSpec:
        check_record(self.template, self.base_patient.model_dump())
        if not self.controls.name:
            return self
        available = len(swap_names(self.base_patient.name, self.names))
        if self.controls.name > available:
            raise ValueError(
                f"controls.name: {self.controls.name} name swaps asked, {available} names available"
            )
        return self

    @cached_property
    def base_patient(self) -> Patient:
        """The patient of the original prompt (drawn once)."""
        return self.patient or draw_patient(np.random.default_rng([self.seed, 0]))

    @property
    def base_prompt(self) -> str:
        """The rendered base patient: the original user prompt."""
        return render(self.template, self.base_patient.model_dump())

    def edits(self) -> list[RecordEdit]:
        """The control and target edits of the base patient."""
        return cardiovascular_edits(
            self.base_patient,
            np.random.default_rng([self.seed, 1]),
            controls=self.controls,
            targets=self.targets,
            names=self.names,
            prefix=self.prefix or "cvd",
        )

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        return record_perturbations(
            original,
            kind=self.kind,
            template=self.template,
            fields=self.base_patient.model_dump(),
            edits=self.edits(),
            prefix=self.prefix or "cvd",
        )
