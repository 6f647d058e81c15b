"""The Store: every record over one connection, idempotent writes across them."""

from __future__ import annotations

from tests.storage.conftest import count, make_arm, make_gen, make_record


def test_writes_are_idempotent(store):
    arm = make_arm()
    for _ in range(2):
        store.add_arms([arm, arm])
        store.add_samples(arm.arm_id, [make_gen(0), make_gen(1)])
        store.add_tests([make_record()])
        store.add_family(
            "run",
            [
                dict(
                    family="m",
                    perturbation_id="p",
                    position=0,
                    kind="variant",
                    label=None,
                    description="d",
                    original_arm="a",
                    perturbed_arm="b",
                    test_id="t1",
                )
            ],
        )
    assert count(store, "arms") == 1
    assert count(store, "samples") == 2
    assert count(store, "tests") == 1
    assert count(store, "run_tests") == 1
