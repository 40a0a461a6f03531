"""16 SDK clients at once, each with its own gRPC channel (the official CE caps a server at 4 connections and
starves a fifth), running a mixed flow for a bounded time: zero errors, and every revision a client was told it
created is in the graph afterwards. ``make test`` runs a few seconds; ``make test-sdk-long`` a minute."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from tests.kumiho_sdk.conftest import Appliance

CLIENTS = 16


def run_mixed(appliance: Appliance, project: str, seconds: float) -> dict[str, object]:
    seen = appliance.sdk("mixed", "mixed", project=project, clients=CLIENTS, seconds=seconds)
    print(json.dumps({k: v for k, v in seen.items() if k != "created"}))
    assert seen["errors"] == [], seen["errors"]
    assert seen["clients"] == CLIENTS and all(n > 0 for n in seen["per_client"]), seen["per_client"]
    created = [kref for krefs in seen["created"] for kref in krefs]
    for start in range(0, len(created), 1000):
        chunk = created[start:start + 1000]
        answer = httpx.post(f"{appliance.running.base_url}/api/v1/revisions/batch",
                            json={"revision_krefs": chunk}, timeout=60)
        assert answer.status_code in (200, 201), answer.text
        assert answer.json()["not_found"] == [], "acknowledged writes are missing"
    return seen  # type: ignore[no-any-return]


def test_sixteen_sdk_clients_for_a_few_seconds(appliance: Appliance, project_name: str) -> None:
    run_mixed(appliance, project_name, seconds=4)


@pytest.mark.long
def test_sixteen_sdk_clients_for_a_minute(appliance: Appliance, project_name: str) -> None:
    run_mixed(appliance, project_name, seconds=float(os.environ.get("KUMIHO_SDK_LOAD_SECONDS", "60")))
