"""The impact snapshot of a project's hard delete (reference §1.2), pure.

Deleting a project for good takes two calls: the first describes what would go (its spaces and items, the
counts of everything in it) and what stands in the way (references from other projects into it) and names
that description with an id (a UUIDv7) and a SHA-256 hash; the second repeats the id and the hash with
``confirmed=true``. The hash covers the id and the whole description, so it is recomputed at the moment of
the deletion: a project that changed in between (an item added, a reference made) no longer matches and is
not deleted. Nothing is stored between the two calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from appliance.errors import InvalidArgument

# At most this many descendants and blockers are listed in an answer (the hash covers all of them).
MAX_LISTED = 100
_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class DeletionImpact:
    snapshot_id: str
    snapshot_hash: str
    project_id: str
    project_name: str
    descendants: list[str]  # space and item krefs, the first MAX_LISTED
    descendant_count: int
    blockers: list[str]  # references from other projects into this one, the first MAX_LISTED
    blocker_count: int
    counts: dict[str, int]  # spaces, items, revisions, artifacts, edges


def new_snapshot_id(now: datetime) -> str:
    """A UUIDv7: 48 bits of Unix milliseconds, the version, 74 random bits (RFC 9562)."""
    value = (int(now.timestamp() * 1000) & (2**48 - 1)) << 80
    value |= 0x7 << 76
    value |= int.from_bytes(os.urandom(10), "big") & ((1 << 74) - 1) & ~(0x3 << 62)
    value |= 0x2 << 62  # the RFC 4122 variant
    return str(uuid.UUID(int=value))


def check_snapshot(snapshot_id: str, snapshot_hash: str) -> None:
    if not _UUID7.fullmatch(snapshot_id):
        raise InvalidArgument("impact_snapshot_id: give the impact_snapshot_id the first force=true call returned",
                              field="impact_snapshot_id")
    if not _SHA256.fullmatch(snapshot_hash):
        raise InvalidArgument("impact_snapshot_hash: give the impact_snapshot_hash the first force=true call "
                              "returned (64 hexadecimal digits)", field="impact_snapshot_hash")


def confirmed_snapshot(force: bool, confirmed: bool, snapshot_id: str | None,
                       snapshot_hash: str | None) -> tuple[str, str] | None:
    """The (id, hash) a delete call confirms, or None when it archives (no force) or asks for the snapshot
    (force alone). Every other combination of the fields is refused, rather than quietly taken as an archive
    or as a request for a fresh snapshot."""
    if not force:
        stray = "confirmed" if confirmed else "impact_snapshot_id" if snapshot_id else \
            "impact_snapshot_hash" if snapshot_hash else None
        if stray:
            raise InvalidArgument(f"{stray}: {stray} needs force=true (without force the project is archived, "
                                  "which needs no confirmation); pass force=true to delete it for good, or leave "
                                  f"{stray} out to archive it", field=stray)
    elif confirmed and not (snapshot_id and snapshot_hash):
        missing = "impact_snapshot_hash" if not snapshot_hash else "impact_snapshot_id"
        raise InvalidArgument(f"{missing}: confirmed=true needs the impact_snapshot_id and impact_snapshot_hash "
                              "that a first force=true call (without confirmed) returned; make that call first",
                              field=missing)
    elif not confirmed and (snapshot_id or snapshot_hash):
        raise InvalidArgument("confirmed: pass confirmed=true with the impact snapshot to delete the project, or "
                              "leave impact_snapshot_id and impact_snapshot_hash out to get a fresh snapshot",
                              field="confirmed")
    return (snapshot_id, snapshot_hash) if force and snapshot_id and snapshot_hash else None


def impact(snapshot_id: str, project_id: str, project_name: str, descendants: Iterable[str],
           blockers: Iterable[str], counts: dict[str, int]) -> DeletionImpact:
    """The snapshot of a project as it is now, under ``snapshot_id``; ``descendants`` and ``blockers`` in a
    stable order."""
    digest = hashlib.sha256()
    for part in (snapshot_id, project_id, project_name, json.dumps(counts, sort_keys=True)):
        digest.update(part.encode() + b"\n")
    listed_descendants, descendant_count = _digest(digest, b"descendants", descendants)
    listed_blockers, blocker_count = _digest(digest, b"blockers", blockers)
    return DeletionImpact(snapshot_id, digest.hexdigest(), project_id, project_name, listed_descendants,
                          descendant_count, listed_blockers, blocker_count, counts)


def _digest(digest: hashlib._Hash, label: bytes, values: Iterable[str]) -> tuple[list[str], int]:
    digest.update(label + b"\n")
    listed: list[str] = []
    count = 0
    for value in values:
        digest.update(value.encode() + b"\n")
        if count < MAX_LISTED:
            listed.append(value)
        count += 1
    return listed, count
