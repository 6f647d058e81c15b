"""``examples/prompt_set.yaml``'s own outputs, recorded for ``python -m benchmarks cost``.

``python -m benchmarks.prompt_set_example_data`` runs the example as users do (``dbpa run
examples/prompt_set.yaml``: the embedded SmolLM2-135M-Instruct and all-MiniLM-L6-v2, no
network, nothing paid) into a temporary record, reads it back through ``storage.Store`` and
writes ``data/prompt_set_example_smollm2.npz``: per arm (the original, then the config's
perturbations in order), question (``questions.jsonl``'s order) and output index, the
float16 embedding and the prompt and completion tokens the embedded model reported: the
outputs of the example's own run (k = 8, its seeds: the figures of ``dbpa results`` on it).

Run it pinned to one core (``taskset -c 1 python -m benchmarks.prompt_set_example_data``):
the embedded model then decodes on one thread, which on 2 cores that other jobs keep busy is
many times faster than its default of one thread per core (``prompt_set_data``). So run on
2026-12-06 (load 13-17): 640 outputs in 14 minutes. More outputs per arm, for other draws of
8 to check the fixed audit on, were not sampled: k = 24 unpinned had stored 48 outputs after
20 minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from dbpa.config import load_config
from dbpa.perturbations import Perturbation
from dbpa.plan import plan_audit
from storage import Store

ROOT = Path(__file__).parents[1]
CONFIG = ROOT / "examples" / "prompt_set.yaml"
DATA = Path(__file__).parent / "data" / "prompt_set_example_smollm2.npz"


def record(db: Path) -> None:
    """Run the example into ``db``."""
    command = [sys.executable, "-m", "dbpa.cli", "run", str(CONFIG), "--db", str(db)]
    subprocess.run(command, check=True)


def _described(p: Perturbation) -> dict[str, object]:
    return {"id": p.id, "kind": p.kind, "label": p.label, "description": p.description}


def write(db: Path) -> None:
    """Read the example's arms back from ``db`` and write ``DATA``."""
    plan = plan_audit(load_config(CONFIG))
    members = list(plan.set_members.values())
    arms = [[t.original.arm_id for t in members[0]]]
    arms += [[t.perturbed.arm_id for t in tests] for tests in members]
    with Store(db, read_only=True) as store:
        ids = [a for row in arms for a in row]
        vectors = store.arms_vectors(ids, plan.embedder, plan.k)
        samples = store.samples(ids, first=plan.k).set_index(["arm_id", "idx"])
    missing = [a for a in ids if a not in vectors]
    if missing:
        raise LookupError(f"{len(missing)} arms have fewer than {plan.k} embedded outputs")
    tokens = {
        column: np.array(
            [[[samples.loc[(a, i), column] for i in range(plan.k)] for a in row] for row in arms],
            dtype=np.int32,
        )
        for column in ("prompt_tokens", "completion_tokens")
    }
    np.savez_compressed(
        DATA,
        embeddings=np.stack([[vectors[a] for a in row] for row in arms]).astype(np.float16),
        prompt_tokens=tokens["prompt_tokens"],
        completion_tokens=tokens["completion_tokens"],
        prompts=np.array([t.prompt_id for t in members[0]]),
        meta=json.dumps(
            {
                "config": str(CONFIG.relative_to(ROOT)),
                "k": plan.k,
                "perturbations": [_described(t.perturbation) for t in plan.tests],
                "embedder": plan.embedder,
            }
        ),
    )
    print(f"wrote {DATA} ({DATA.stat().st_size / 2**20:.2f} MiB)")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "prompt_set.duckdb"
        record(db)
        write(db)
