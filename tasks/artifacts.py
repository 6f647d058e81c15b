"""Artifact keys, and one version of a key per outcome.

A key's latest version carries the digest of what it was made from (``results <digest>`` at
the end of its description). Publishing the same outcome again, as a re-run of a tick with
no new output or a Prefect retry of a tick does, compares digests and adds no version; a
changed outcome adds one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort

from dbpa.specs import content_hash

DIGEST = re.compile(r"results ([0-9a-f]{12})\)$")


def artifact_key(audit: str, suffix: str) -> str:
    """A Prefect artifact key from the audit name: lower-case letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", audit.lower()).strip("-") or "audit"
    return f"{slug}-{suffix}"


def outcome_digest(*parts: Any) -> str:
    """The digest of an outcome (JSON-able parts)."""
    return content_hash("artifact", *parts)[:12]


def latest_digest(key: str) -> str | None:
    """The outcome digest of the key's latest version (None: no version, or none recorded)."""
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    if not found or not found[0].description:
        return None
    match = DIGEST.search(found[0].description)
    return match.group(1) if match else None


def publish_once(
    create: Callable[..., UUID], key: str, description: str, digest: str, **content: Any
) -> bool:
    """``create(key=..., description=..., **content)`` unless the key's latest version has
    the same outcome ``digest``; True when a version was added."""
    if latest_digest(key) == digest:
        return False
    create(key=key, description=f"{description} (results {digest})", **content)
    return True
