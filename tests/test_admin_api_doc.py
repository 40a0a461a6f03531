"""docs/admin-api.md, run: every ```sh example that starts with ``curl`` is executed, in the order of the page,
against a real ``kumiho-ce serve`` (tmp data directory, seeded with the memories the examples name), and the
page names every route the served OpenAPI document lists.

An example passes when curl exits 0; it uses ``curl -fsS`` so that a 4xx or 5xx answer fails it. An example
that shows an error on purpose prints only the status (``-o /dev/null -w '%{http_code}'``) and says which one
in a comment (``# expect: 404``); one that ends itself with ``--max-time`` (the event feed never ends) says
``# exit: 28``. ``$JOB_ID`` in an example is the id of a job the seed started."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.appliance_process import Running, serve
from tests.mcp_api.hostile import RawMcp

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "admin-api.md"
DOC_URL = "http://127.0.0.1:9190"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
_EXPECT = re.compile(r"#\s*expect:\s*(\d{3})\b")
_EXIT = re.compile(r"#\s*exit:\s*(\d+)\b")
_PATH = re.compile(re.escape(DOC_URL) + r"(/[^\s'\"?]*)")


@dataclass(frozen=True)
class Example:
    line: int  # where the block starts in the page (1-based), for the test id and the failure message
    command: str
    expected_status: str | None
    expected_exit: int

    @property
    def method(self) -> str:
        named = re.search(r"-X\s+([A-Z]+)", self.command)
        if named:
            return named.group(1)
        return "POST" if re.search(r"\s(-d|--data\S*|--json)\s", self.command) else "GET"

    @property
    def label(self) -> str:
        paths = _PATH.findall(self.command)
        return f"line{self.line}-{self.method}-{paths[0] if paths else '?'}"


def examples(text: str) -> list[Example]:
    found = []
    for match in _BLOCK.finditer(text):
        command = match.group(1)
        if not command.lstrip().startswith("curl"):
            continue  # setup lines (TOKEN=…) and other shells' snippets are shown, not run
        line = text.count("\n", 0, match.start()) + 1
        status = _EXPECT.search(command)
        exit_code = _EXIT.search(command)
        found.append(Example(line, command, status.group(1) if status else None,
                             int(exit_code.group(1)) if exit_code else 0))
    return found


EXAMPLES = examples(DOC.read_text())


def test_every_example_either_fails_on_an_error_status_or_names_the_status_it_shows() -> None:
    assert len(EXAMPLES) >= 20, "docs/admin-api.md lost its curl examples"
    for example in EXAMPLES:
        assert DOC_URL in example.command, (example.line, "examples talk to " + DOC_URL)
        if example.expected_status is not None:
            assert "-w '%{http_code}'" in example.command and "-o /dev/null" in example.command, example.line
        else:
            assert re.search(r"curl -fsS\b", example.command), (
                example.line, "use curl -fsS (a 4xx/5xx must fail the example), or show the status with "
                "-sS -o /dev/null -w '%{http_code}' and say it: # expect: NNN")


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("admin-doc") / "data") as running:
        try:
            yield running
        finally:
            running.stop()


def _store(mcp: RawMcp, arguments: dict[str, object]) -> dict[str, object]:
    answer = mcp.call("kumiho_memory_store", {"project": "demo", "space_path": "notes", **arguments})
    assert answer.payload and answer.payload.get("stored"), answer.text
    return answer.payload


@pytest.fixture(scope="module")
def seeded(appliance: Running) -> dict[str, str]:
    """The memories the page's examples name (their krefs follow from their text, so they are the page's), and
    the environment the examples run with."""
    mcp = RawMcp(appliance.base_url)
    try:
        espresso = _store(mcp, {"title": "Espresso preference", "user_text": "I take my espresso without sugar.",
                                "memory_type": "fact", "tags": ["coffee"], "bundle_name": "breakfast"})
        _store(mcp, {"title": "Morning routine", "user_text": "Every morning I walk the dog before coffee.",
                     "source_revision_krefs": [espresso["revision_kref"]]})
        draft = mcp.call("kumiho_create_item", {"space_path": "/demo/notes", "item_name": "draft", "kind": "note"})
        assert draft.payload and "error" not in draft.payload, draft.text
        # graph maintenance runs as a job without a chat model (the examples' $JOB_ID)
        dream = mcp.call("kumiho_memory_dream_state", {"project": "demo", "dry_run": True, "maintain_graph": True})
        assert dream.payload and "error" not in dream.payload, dream.text
    finally:
        mcp.close()
    jobs = _jobs(appliance.base_url)
    assert jobs, "the seed started no job"
    return {"JOB_ID": jobs[0]["job_id"], "BACKUP": _backup(appliance.base_url),
            "KUMIHO_CE_DATA_DIR": str(appliance.data_dir)}


def _backup(base_url: str) -> str:
    """The name of a backup the examples download, refuse to restore and delete."""
    job = httpx.post(base_url + "/api/v1/backups", timeout=30).json()
    for _ in range(1200):
        job = httpx.get(f"{base_url}/api/v1/jobs/{job['job_id']}", timeout=30).json()
        if job["state"] not in ("queued", "running"):
            break
        time.sleep(0.05)
    assert job["state"] == "done", job
    return str(job["result"]["name"])


def _jobs(base_url: str) -> list[dict[str, str]]:
    for path in ("/api/v1/jobs", "/api/jobs"):  # the older path answers until the console's routes exist
        answer = httpx.get(base_url + path, timeout=30)
        if answer.status_code == 200:
            return answer.json()["jobs"]  # type: ignore[no-any-return]
    raise AssertionError("no job list at /api/v1/jobs or /api/jobs")


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.label for e in EXAMPLES])
def test_the_example_runs_against_a_real_appliance(example: Example, appliance: Running,
                                                   seeded: dict[str, str]) -> None:
    command = example.command.replace(DOC_URL, appliance.base_url)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(appliance.data_dir.parent), **seeded}
    done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    where = f"docs/admin-api.md line {example.line}:\n{example.command}\nstdout: {done.stdout[:2000]}\n" \
            f"stderr: {done.stderr[:2000]}"
    assert done.returncode == example.expected_exit, where
    if example.expected_status is not None:
        assert done.stdout.strip() == example.expected_status, where
    else:
        assert done.stdout.strip(), where  # every route the page shows answers something


def _route_pattern(path: str) -> re.Pattern[str]:
    """``/api/v1/jobs/{job_id}`` → a pattern that matches ``/api/v1/jobs/$JOB_ID`` in an example."""
    parts = re.split(r"\{[^}]+\}", path)
    return re.compile("^" + "[^/]+".join(re.escape(part) for part in parts) + "/?$")


def test_the_page_shows_every_route_of_the_schema(appliance: Running) -> None:
    schema = httpx.get(appliance.base_url + "/api/schema", timeout=30).json()
    shown = {(e.method, path) for e in EXAMPLES for path in _PATH.findall(e.command)}
    missing = []
    for path, operations in schema["paths"].items():
        pattern = _route_pattern(path)
        for method in operations:
            if method.upper() in ("HEAD", "OPTIONS"):
                continue
            if not any(m == method.upper() and pattern.match(p) for m, p in shown):
                missing.append(f"{method.upper()} {path}")
    assert not missing, f"docs/admin-api.md has no curl example for: {missing}"
