"""Experience and outcome snapshots: what a host's model extracted from a piece of work (the situation, the
decision, why, what was expected) and, separately, what was later observed. Pure: no storage.

A snapshot is a report, not a belief: it is stored unpublished with ``evidence:unverified`` and never
promoted. Its canonical form (``record_id``, a SHA-256 of the normalised record) is its deduplication key:
recording the same experience again finds the snapshot already stored instead of writing a second one."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from appliance.core import kref as krefs
from appliance.errors import InvalidArgument

SCHEMA = "kumiho.experience.v1"
KIND = "experience"  # the item kind of experience and outcome snapshots
MAX_RECORD_CHARS = 24000  # the canonical record, JSON-encoded: a snapshot, not a document store
ORIGINS = ("user", "agent", "imported", "observed", "external", "unknown")
DECISION_STATES = ("proposal", "proposed", "accepted", "rejected", "contested", "superseded", "unknown")
OUTCOME_STATUSES = ("success", "failure", "mixed", "unknown")
ACCEPTANCES = ("accepted", "rejected", "unknown")
EXPERIENCE_TEXTS = ("title", "situation", "goal", "decision", "rationale", "expected_outcome")
_EXPERIENCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


def pinned(value: str, field: str) -> krefs.Kref:
    """A revision kref (``kref://P/space/item.kind?r=N``): snapshots cite exact revisions, never a moving
    item or tag, so that what was read can be read again."""
    parsed = krefs.parse(value, field)
    if not parsed.is_item or parsed.revision is None or parsed.artifact or parsed.tag or parsed.time:
        raise InvalidArgument(f"{field}: give a revision kref pinned with ?r=N, such as "
                              "kref://CognitiveMemory/experiences/pilot.experience?r=1", field=field)
    return parsed


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


def normalize_experience(record: dict[str, Any], field: str = "record") -> dict[str, Any]:
    """The canonical experience: texts stripped (the required ones non-empty), lists de-duplicated, absent
    enums ``unknown``, ``observed_at`` in UTC, and its ``record_id``. Bounds are the schema's."""
    experience_id = _text(record.get("experience_id"), f"{field}.experience_id", required=True)
    if not _EXPERIENCE_ID.fullmatch(experience_id):
        raise InvalidArgument(f"{field}.experience_id: use a stable identifier of letters, digits and . _ : - "
                              "(starting with a letter or digit), the same one on every retry",
                              field=f"{field}.experience_id")
    result: dict[str, Any] = {"schema": SCHEMA, "record_type": "experience", "experience_id": experience_id}
    for key in EXPERIENCE_TEXTS:
        result[key] = _text(record.get(key), f"{field}.{key}", required=True)
    for key in ("alternatives", "applicability_conditions"):
        result[key] = _texts(record.get(key), f"{field}.{key}")
    result["decision_state"] = record.get("decision_state") or "unknown"
    result["origin"] = record.get("origin") or "unknown"
    result["source_krefs"] = _sources(record.get("source_krefs"), f"{field}.source_krefs")
    result.update(_observation(record, field, required=False))
    return _finish(result, field)


def normalize_outcome(experience_kref: str, outcome: dict[str, Any], field: str = "outcome") -> dict[str, Any]:
    """The canonical outcome observation of the experience revision ``experience_kref``."""
    pinned(experience_kref, "experience_kref")
    result: dict[str, Any] = {"schema": SCHEMA, "record_type": "outcome", "experience_kref": experience_kref}
    result.update(_observation(outcome, field, required=True))
    result["origin"] = outcome.get("origin") or "unknown"
    result["source_krefs"] = _sources(outcome.get("source_krefs"), f"{field}.source_krefs")
    return _finish(result, field)


def decode(metadata: dict[str, str]) -> dict[str, Any] | None:
    """The snapshot a revision holds (its ``experience_record`` metadata), or None when it holds none or one
    whose identity no longer matches its content (edited by hand: not evidence)."""
    raw = metadata.get("experience_record")
    if not raw or len(raw) > MAX_RECORD_CHARS + 1024:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return None
    if record.get("record_type") not in ("experience", "outcome"):
        return None
    body = {k: v for k, v in record.items() if k not in ("record_id", "recorded_at")}
    return record if record.get("record_id") == digest(body) else None


def _finish(record: dict[str, Any], field: str) -> dict[str, Any]:
    encoded = canonical(record)
    if len(encoded) > MAX_RECORD_CHARS:
        raise InvalidArgument(f"{field}: {len(encoded)} characters in total, JSON-encoded; at most "
                              f"{MAX_RECORD_CHARS}: shorten the texts or lists", field=field)
    return {**record, "record_id": digest(record)}


def _observation(record: dict[str, Any], field: str, *, required: bool) -> dict[str, Any]:
    observed = _text(record.get("observed_outcome"), f"{field}.observed_outcome", required=required)
    when = _text(record.get("observed_at"), f"{field}.observed_at", required=required)
    status = record.get("outcome_status") or "unknown"
    if bool(observed) != bool(when):
        missing = "observed_at" if observed else "observed_outcome"
        raise InvalidArgument(f"{field}.{missing}: an observed outcome needs both observed_outcome (what happened) "
                              "and observed_at (when it was observed)", field=f"{field}.{missing}")
    if status != "unknown" and not observed:
        raise InvalidArgument(f"{field}.observed_outcome: outcome_status {status!r} needs the observed outcome "
                              "that shows it (with observed_at)", field=f"{field}.observed_outcome")
    return {"observed_outcome": observed, "observed_at": _timestamp(when, f"{field}.observed_at") if when else "",
            "outcome_status": status, "acceptance": record.get("acceptance") or "unknown"}


def _timestamp(value: str, field: str) -> str:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidArgument(f"{field}: give when it was observed as an ISO-8601 time with its time zone, such as "
                              "2026-03-27T10:15:00+00:00 (not when it was recorded)", field=field)
    return moment.astimezone(UTC).isoformat()


def _text(value: Any, field: str, *, required: bool = False) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if required and not text:
        raise InvalidArgument(f"{field}: give a non-empty text", field=field)
    return text


def _texts(values: Any, field: str) -> list[str]:
    found = []
    for index, value in enumerate(values or []):
        found.append(_text(value, f"{field}[{index}]", required=True))
    return list(dict.fromkeys(found))


def _sources(values: Any, field: str) -> list[str]:
    for index, value in enumerate(values or []):
        pinned(value, f"{field}[{index}]")
    return list(dict.fromkeys(values or []))
