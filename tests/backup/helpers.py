"""Shared steps of the backup tests: storing memories, finding them by search, waiting for backup jobs."""

from __future__ import annotations

from typing import Any

import httpx

from appliance.app import Services
from tests.inprocess import InProcess, wait_job


def store(services: Services, marker: str, project: str = "demo") -> str:
    """Store a memory whose text carries ``marker``; its item kref."""
    answer = services.perform("kumiho_memory_store", {
        "project": project, "space_path": "notes", "title": f"note {marker}", "user_text": f"kiwi {marker} remembers"})
    assert answer.get("stored"), answer
    return str(answer["item_kref"])


def found(services: Services, marker: str) -> set[str]:
    """The item krefs full-text search finds for ``marker``."""
    answer = services.perform("kumiho_fulltext_search", {"query": marker, "limit": 50})
    return {result["item"]["kref"] for result in answer["results"]}


def backup_now(app: InProcess) -> dict[str, Any]:
    """POST /api/v1/backups and the finished job."""
    answer = httpx.post(app.base_url + "/api/v1/backups", timeout=30)
    assert answer.status_code == 202, answer.text
    assert answer.json()["kind"] == "backup"
    job = wait_job(app, answer.json()["job_id"])
    assert job["state"] == "done", job
    return job
