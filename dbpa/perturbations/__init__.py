"""dbpa.perturbations: what the perturbed arms of an audit are.

An audit lists perturbation specs (a pydantic union on ``kind``); ``expand(original, specs)``
turns them into concrete, labelled perturbations with stable ids. Kinds: ``prompt``
(explicit prompt variants), ``template`` and ``personas`` (a template over values, e.g. the
paper's eight personas), ``system_prompt``, ``model`` and ``sampling`` (system swaps),
``record`` (a structured prompt edited one field at a time), ``cardiovascular`` (the
paper's control/target patient study), ``noise`` (seeded typos, casing, whitespace,
punctuation, filler words and contractions) and ``swap`` (person names, gender). Pure
Python: pydantic, numpy and the standard library.
"""

from ._cardiovascular import (
    AGE_BANDS,
    ETHNICITIES,
    FEMALE_NAMES,
    MALE_NAMES,
    PAPER_CVD_TEMPLATE,
    SYSTOLIC_BP_BANDS,
    TOTAL_CHOLESTEROL_BANDS,
    Band,
    CardiovascularSpec,
    ControlCounts,
    Patient,
    RiskBands,
    TargetCounts,
    cardiovascular_edits,
    draw_patient,
)
from ._expand import PerturbationSpec, base_prompt, expand, parse_specs
from ._kinds import (
    ModelSwapSpec,
    ModelVariant,
    PromptSpec,
    SamplingSpec,
    SamplingVariant,
    SystemPromptSpec,
    TemplateSpec,
    TemplateValue,
    TextVariant,
)
from ._model import Label, Perturbation
from ._names import GENDER_PAIRS, PERSON_NAMES, PersonName
from ._noise import DEFAULT_OPERATIONS, NoiseSpec
from ._noise_ops import (
    CONTRACTIONS,
    FILLERS,
    OPERATIONS,
    QWERTY_NEIGHBOURS,
    TYPO_KINDS,
    apply_noise,
)
from ._personas import PAPER_PERSONAS, PERSONA_TEMPLATE, PersonasSpec
from ._records import RecordEdit, RecordSpec
from ._swap import GenderSwap, SwapSpec, swap_gender, swap_names

__all__ = [
    "AGE_BANDS",
    "CONTRACTIONS",
    "DEFAULT_OPERATIONS",
    "ETHNICITIES",
    "FEMALE_NAMES",
    "FILLERS",
    "GENDER_PAIRS",
    "MALE_NAMES",
    "OPERATIONS",
    "PAPER_CVD_TEMPLATE",
    "PAPER_PERSONAS",
    "PERSONA_TEMPLATE",
    "PERSON_NAMES",
    "QWERTY_NEIGHBOURS",
    "SYSTOLIC_BP_BANDS",
    "TOTAL_CHOLESTEROL_BANDS",
    "TYPO_KINDS",
    "Band",
    "CardiovascularSpec",
    "ControlCounts",
    "GenderSwap",
    "Label",
    "ModelSwapSpec",
    "ModelVariant",
    "NoiseSpec",
    "Patient",
    "PersonName",
    "PersonasSpec",
    "Perturbation",
    "PerturbationSpec",
    "PromptSpec",
    "RecordEdit",
    "RecordSpec",
    "RiskBands",
    "SamplingSpec",
    "SamplingVariant",
    "SwapSpec",
    "SystemPromptSpec",
    "TargetCounts",
    "TemplateSpec",
    "TemplateValue",
    "TextVariant",
    "apply_noise",
    "base_prompt",
    "cardiovascular_edits",
    "draw_patient",
    "expand",
    "parse_specs",
    "swap_gender",
    "swap_names",
]
