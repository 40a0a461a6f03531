"""``kumiho-ce memory …`` in both of its modes: against a running ``kumiho-ce serve`` (a real subprocess
command over HTTP), and with no appliance running (the command opens the data directory itself; run as
``appliance.cli.main`` in this process, which saves each call the interpreter's start, 10 s on a busy
machine). The same scenario runs in each: store, get, list, recall, count, export, forget, purge, health,
errors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.appliance_process import cli_env, kumiho_ce, serve


class Cli:
    def __init__(self, data_dir: Path, base_url: str | None, monkeypatch: pytest.MonkeyPatch | None = None
                 ) -> None:
        self.env, self.base_url, self.monkeypatch = cli_env(data_dir), base_url, monkeypatch

    def run(self, *args: str, code: int = 0, stdin: str | None = None) -> str:
        if self.monkeypatch is not None:
            done = self._in_process(args, stdin)
        else:
            done = kumiho_ce("memory", *args, env=self.env, timeout=120) if stdin is None else _with_stdin(
                args, self.env, stdin)
        assert done.returncode == code, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout if code == 0 else done.stderr

    def _in_process(self, args: tuple[str, ...], stdin: str | None) -> Any:
        import io
        import subprocess
        from contextlib import redirect_stderr, redirect_stdout

        from appliance.cli import main

        assert self.monkeypatch is not None
        for name in [k for k in os.environ if k.startswith("KUMIHO_CE_")]:
            self.monkeypatch.delenv(name)
        for name, value in self.env.items():
            if name.startswith(("KUMIHO_CE_", "XDG_")):
                self.monkeypatch.setenv(name, value)
        self.monkeypatch.setattr("sys.stdin", io.StringIO(stdin or ""))
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["memory", *args])
        return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json"))


def _with_stdin(args: tuple[str, ...], env: dict[str, str], stdin: str) -> Any:
    import subprocess
    import sys

    from tests.appliance_process import ROOT

    return subprocess.run([sys.executable, "-m", "appliance", "memory", *args], cwd=ROOT, env=env, text=True,
                          input=stdin, capture_output=True, timeout=120)


@pytest.fixture(params=["running", "local"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    data_dir = tmp_path / "data"
    if request.param == "local":
        yield Cli(data_dir, None, monkeypatch)
        return
    with serve(data_dir) as running:
        try:
            yield Cli(data_dir, running.base_url)
        finally:
            running.stop()


def test_every_memory_command(cli: Cli, tmp_path: Path) -> None:
    stored = cli.json("store", "deploy/steps", "Run make deploy, then check the health page.", "-c", "daily",
                      "--session", "s1", "--importance", "0.7", "--meta", "source=runbook")
    assert stored["key"] == "deploy/steps" and stored["category"] == "daily" and stored["importance"] == 0.7
    assert stored["metadata"] == {"source": "runbook"}
    assert "stored 'db-host' in default" in cli.run("store", "db-host", "-", stdin="The db runs on db1.\n")
    cli.run("store", "ops-note", "Pager rotation is weekly.", "--namespace", "ops")
    skipped = cli.json("store", "tick", "[cron:hourly] patrol")
    assert skipped == {"stored": False, "skipped": "cron output is never stored"}

    shown = cli.run("get", "deploy/steps")
    assert "Key:           deploy/steps" in shown and "Run make deploy" in shown and "source:        runbook" in shown
    assert cli.json("get", "db-host")["content"] == "The db runs on db1.\n"

    listing = cli.run("list")
    assert "deploy/steps\t[daily]\tRun make deploy" in listing and "2 of 2 entries in default." in listing
    assert [e["key"] for e in cli.json("list", "--category", "daily")["entries"]] == ["deploy/steps"]
    assert [e["key"] for e in cli.json("list", "-n", "ops")["entries"]] == ["ops-note"]

    recalled = cli.json("recall", "how do I deploy", "--limit", "2")["entries"]
    assert recalled[0]["key"] == "deploy/steps" and 0 < recalled[0]["score"] <= 1
    assert "ops-note" not in [e["key"] for e in recalled]  # another namespace
    assert cli.json("recall", "deploy", "--since", "2999-01-01T00:00:00Z")["entries"] == []

    assert cli.run("count") == "2 entries in default\n"
    assert cli.json("count", "-n", "ops") == {"count": 1, "namespace": "ops"}

    exported = [json.loads(line) for line in cli.run("export").splitlines()]
    assert [e["key"] for e in exported] == ["deploy/steps", "db-host"]  # oldest first
    target = tmp_path / "ops.jsonl"
    cli.run("export", "-n", "ops", "-o", str(target))
    assert [json.loads(line)["key"] for line in target.read_text().splitlines()] == ["ops-note"]

    assert "forgot 'deploy/steps'" in cli.run("forget", "deploy/steps")
    assert "no entry with key 'deploy/steps'" in cli.run("get", "deploy/steps", code=2)
    assert cli.json("count")["count"] == 1
    cli.run("store", "count", "A key named like a route.", "-n", "ops")
    assert "forgot 'count'" in cli.run("forget", "count", "-n", "ops")  # DELETE /api/v1/memories/count is GET's
    assert cli.json("count", "-n", "ops")["count"] == 1

    assert "add --yes" in cli.run("purge", code=2)
    assert cli.json("count")["count"] == 1
    assert cli.run("purge", "--yes") == "deleted 2 entries of default\n"  # the forgotten one too
    assert cli.json("purge", "-n", "ops", "--session", "none", "--yes")["deleted"] == 0
    assert cli.json("health") == {"healthy": True, "namespace": "default", "entries": 0,
                                  "detail": "graph and index answer"}

    assert "importance: Input should be less than or equal to 1" in cli.run(
        "store", "k", "v", "--importance", "3", code=2)
    assert "namespace" in cli.run("list", "-n", "bad/name", code=2)
    if cli.base_url:  # the CLI talked to the running appliance: it sees the same entries over HTTP
        answer = httpx.get(cli.base_url + "/api/v1/memories/count", params={"namespace": "ops"}, timeout=30)
        assert answer.json() == {"count": 1, "namespace": "ops"}
