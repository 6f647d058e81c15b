"""The output maps: one projection and one frame per family, both arms of every test on it."""

from __future__ import annotations

import numpy as np

from dbpa.report import gather
from storage import Store
from tests.report.conftest import EMBEDDER


def test_one_projection_per_family_and_every_output_on_it(labelled_run):
    with Store(labelled_run.db, read_only=True) as store:
        views = gather(store, labelled_run.run_id).test_views
        for family in labelled_run.families:
            of_family = [v for v in views if v.family == family]
            maps = [v.map for v in of_family]
            assert all(m is not None for m in maps)
            # The original arm is drawn at the same places in every test of its family.
            assert len({m.original for m in maps}) == 1
            assert len({m.frame for m in maps}) == 1
            first, second = maps[0].explained
            assert 1 >= first >= second >= 0
            for m in maps:
                assert len(m.original) == len(m.perturbed) == 10
                x_lo, x_hi, y_lo, y_hi = m.frame
                for x, y in m.original + m.perturbed:
                    assert x_lo <= x <= x_hi
                    assert y_lo <= y <= y_hi
                # The centroid of the projection is the projection of the centroid.
                np.testing.assert_allclose(m.perturbed_centroid, np.mean(m.perturbed, axis=0))
            # Distances on the map are those of the embeddings along two orthonormal axes:
            # no pair is farther apart on the map than in the embedding space.
            arm = labelled_run.arms[(family, "original")]
            vectors = store.arms_vectors([arm], EMBEDDER, 10)[arm].astype(np.float64)
            on_map = np.asarray(maps[0].original)
            full = np.linalg.norm(vectors[:, None] - vectors[None], axis=-1)
            flat = np.linalg.norm(on_map[:, None] - on_map[None], axis=-1)
            assert np.all(flat <= full + 1e-6)


def test_the_comedian_moves_farther_on_the_map_than_the_doctor(labelled_run):
    with Store(labelled_run.db, read_only=True) as store:
        views = {
            (v.family, v.perturbation_id): v.map
            for v in gather(store, labelled_run.run_id).test_views
        }

    def gap(pid: str) -> float:
        m = views[("gpt-4", pid)]
        return float(np.linalg.norm(np.subtract(m.perturbed_centroid, m.original_centroid)))

    assert gap("comedian") > gap("doctor")  # shifts 0.7 and 0 in the synthetic run
