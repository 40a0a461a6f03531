"""``kumiho-ce doctor`` on real data directories a user got wrong: each finding, its status and its fix.

Every case runs the real command (``kumiho-ce doctor --json``) on a real tmp data directory (real Kùzu, real
LanceDB, real sockets); the models search path and the CPU's instruction sets are checked in-process where the
machine cannot be changed (an empty installation models directory, a CPU without AVX-512)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kuzu
import pytest

from appliance.config import load_settings
from appliance.datadir import DataDir, write_private_file
from appliance.doctor_machine import SYSTEM_INFO, cpu_flags, lacking_features
from appliance.doctor_models import check_chat_model, kv_bytes_per_token
from appliance.graph import GraphStore, NewRevision, schema
from tests.appliance_process import cli_env, free_port, kumiho_ce, serve

TOKEN = "doctor-test-token-0123456789abcdefghijklmnop"
FIELDS = {"name", "status", "detail", "fix"}


def doctor(data_dir: Path, *options: str, **env: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """``kumiho-ce [options] doctor --json``: exit status, the checks by name, and everything printed."""
    env = {"KUMIHO_CE_PORT": str(free_port()), **env}
    result = kumiho_ce(*options, "doctor", "--json", env=cli_env(data_dir, **env))
    printed = result.stdout + result.stderr
    assert "Traceback" not in printed, printed
    checks = json.loads(result.stdout)
    return result.returncode, {c["name"]: c for c in checks}, printed


def private_dir(path: Path) -> Path:
    DataDir(path).ensure()
    return path


# -- a first start ---------------------------------------------------------------------------------------------

def test_a_first_start_passes_with_warnings_that_each_carry_a_fix(tmp_path: Path) -> None:
    """What the systemd unit's ExecStartPre meets: an empty data directory (StateDirectory= made it, 0700), no
    configuration file, the real default models and ports: nothing fails, every warning says what to do."""
    data = tmp_path / "state"
    data.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUMIHO_CE_")}
    env.update({"KUMIHO_CE_DATA_DIR": str(data), "XDG_CONFIG_HOME": str(tmp_path / "no-config"),
                "KUMIHO_CE_PORT": str(free_port())})
    result = kumiho_ce("doctor", env=env)
    assert result.returncode == 0, result.stdout
    assert "[FAIL]" not in result.stdout and "Traceback" not in result.stdout + result.stderr
    assert "[ok  ] data_dir" in result.stdout and f"{data} (owner " in result.stdout
    assert "graph.kuzu not created yet" in result.stdout and "kumiho-ce serve creates it" in result.stdout
    assert "0 failed" in result.stdout.splitlines()[-1]
    lines = result.stdout.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("[WARN]"):
            assert lines[i + 1].strip().startswith("fix: "), line  # every warning is followed by its fix

    missing = kumiho_ce("doctor", env={**env, "KUMIHO_CE_DATA_DIR": str(tmp_path / "not-yet")})
    assert missing.returncode == 0 and "not-yet does not exist yet" in missing.stdout
    assert f"mkdir -p -m 700 {tmp_path / 'not-yet'}" in missing.stdout


def test_the_json_shape(tmp_path: Path) -> None:
    """A list of {name, status, detail, fix}: fix is a string for every warning and failure, null for ok."""
    data = private_dir(tmp_path / "data")
    data.chmod(0o750)
    result = kumiho_ce("doctor", "--json", env=cli_env(data, KUMIHO_CE_PORT=str(free_port())))
    assert result.returncode == 0 and result.stderr == ""
    entries = json.loads(result.stdout)
    checks = {entry["name"]: entry for entry in entries}
    assert isinstance(entries, list) and len(entries) == len(checks)  # one entry a check, names unique
    for entry in entries:
        assert set(entry) == FIELDS and entry["status"] in ("ok", "warn", "fail")
        assert isinstance(entry["detail"], str) and entry["detail"]
        assert (entry["fix"] is None) == (entry["status"] == "ok"), entry
    assert {"config", "variables", "data_dir", "disk", "lock", "database", "index", "token", "port", "embedder",
            "chat_model", "memory", "cpu"} <= set(checks)
    assert checks["data_dir"]["status"] == "warn" and checks["data_dir"]["fix"] == f"chmod 700 {data}"


# -- the data directory ----------------------------------------------------------------------------------------

def test_a_data_directory_open_to_others_or_owned_by_another_user(tmp_path: Path) -> None:
    data = private_dir(tmp_path / "data")
    data.chmod(0o755)
    status, checks, _ = doctor(data)
    assert status == 0
    assert checks["data_dir"]["status"] == "warn" and "open to other users (mode 755)" in checks["data_dir"]["detail"]
    assert checks["data_dir"]["fix"] == f"chmod 700 {data}"
    if os.geteuid() != 0:
        return  # handing a directory to another user needs root
    data.chmod(0o700)
    os.chown(data, 65534, 65534)  # nobody
    status, checks, _ = doctor(data)
    assert status == 0 and checks["data_dir"]["status"] == "warn"
    assert "is owned by nobody, not by root who runs doctor" in checks["data_dir"]["detail"]
    assert "sudo -u nobody kumiho-ce doctor" in checks["data_dir"]["fix"] and f"chown -R root {data}" in \
        checks["data_dir"]["fix"]


def test_a_file_where_the_data_directory_should_be_fails(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("oops")
    status, checks, _ = doctor(tmp_path / "data")
    assert status == 1 and checks["data_dir"]["status"] == "fail"
    assert "KUMIHO_CE_DATA_DIR" in checks["data_dir"]["fix"]


def test_doctor_leaves_the_lock_file_as_it_found_it(tmp_path: Path) -> None:
    """Who holds the data directory is read from /proc/locks: doctor never takes the lock (an appliance starting
    at that moment would be refused) and so never writes its own pid into the lock file."""
    data = private_dir(tmp_path / "data")
    (data / "lock").write_text("424242\n")
    status, checks, _ = doctor(data)
    assert status == 0 and checks["lock"]["status"] == "ok" and "free" in checks["lock"]["detail"]
    assert (data / "lock").read_text() == "424242\n"


# -- the token file --------------------------------------------------------------------------------------------

def test_an_empty_token_file(tmp_path: Path) -> None:
    data = private_dir(tmp_path / "data")
    write_private_file(data / "token", "")
    status, checks, _ = doctor(data, KUMIHO_CE_REQUIRE_TOKEN="true")
    assert status == 0  # the next start writes a new one: nothing stops it
    assert checks["token"]["status"] == "warn" and checks["token"]["detail"] == f"{data / 'token'} is empty"
    assert checks["token"]["fix"] == "none needed: the next start writes a new one"


def test_a_token_file_other_users_may_read(tmp_path: Path) -> None:
    data = private_dir(tmp_path / "data")
    write_private_file(data / "token", TOKEN + "\n")
    (data / "token").chmod(0o644)
    status, checks, printed = doctor(data, KUMIHO_CE_REQUIRE_TOKEN="true")
    assert status == 0, "the data directory (0700) keeps the others out: a warning"
    assert checks["token"]["status"] == "warn" and "open to other users (mode 644)" in checks["token"]["detail"]
    assert checks["token"]["fix"] == f"chmod 600 {data / 'token'}"

    data.chmod(0o755)  # now they can reach it, and the token is required: the token protects nothing
    status, checks, printed = doctor(data, KUMIHO_CE_REQUIRE_TOKEN="true")
    assert status == 1 and checks["token"]["status"] == "fail"
    assert checks["token"]["fix"] == f"chmod 600 {data / 'token'}"
    assert TOKEN not in printed  # never shown

    status, checks, _ = doctor(data)  # on loopback without require_token nothing uses it
    assert status == 0 and checks["token"]["status"] == "warn"


def test_a_malformed_token_file_fails_only_where_a_token_is_required(tmp_path: Path) -> None:
    data = private_dir(tmp_path / "data")
    write_private_file(data / "token", "short\n")
    status, checks, _ = doctor(data, KUMIHO_CE_REQUIRE_TOKEN="true")
    assert status == 1 and checks["token"]["status"] == "fail"
    assert "is 5 characters long; at least 32 are required" in checks["token"]["detail"]
    assert checks["token"]["fix"].startswith(f"rm {data / 'token'} and restart kumiho-ce")
    status, checks, _ = doctor(data)
    assert status == 0 and checks["token"]["status"] == "warn" and "unused on loopback" in checks["token"]["detail"]
    write_private_file(data / "token", TOKEN + "\n")
    status, checks, _ = doctor(data, KUMIHO_CE_REQUIRE_TOKEN="true")
    assert checks["token"]["status"] == "ok" and f"{len(TOKEN)} characters, owner" in checks["token"]["detail"]


# -- ports -----------------------------------------------------------------------------------------------------

def test_a_port_another_program_listens_on(tmp_path: Path) -> None:
    port = free_port()
    with socket.create_server(("127.0.0.1", port)):
        status, checks, _ = doctor(private_dir(tmp_path / "data"), KUMIHO_CE_PORT=str(port))
    assert status == 1 and checks["port"]["status"] == "fail"
    assert checks["port"]["detail"].startswith(f"127.0.0.1:{port} is taken by pid {os.getpid()} (")
    assert "KUMIHO_CE_PORT" in checks["port"]["fix"]
    status, checks, _ = doctor(tmp_path / "data", KUMIHO_CE_PORT=str(port))
    assert status == 0 and checks["port"] == {"name": "port", "status": "ok", "detail": f"127.0.0.1:{port} is free",
                                              "fix": None}


def test_a_taken_working_memory_port_is_a_warning(tmp_path: Path) -> None:
    port = free_port()
    with socket.create_server(("127.0.0.1", port)):
        status, checks, _ = doctor(private_dir(tmp_path / "data"), KUMIHO_CE_KUMIHO__REDIS_PORT=str(port))
    assert status == 0 and checks["redis"]["status"] == "warn"
    assert "KUMIHO_CE_KUMIHO__REDIS_PORT" in checks["redis"]["fix"]


def test_next_to_the_running_appliance(tmp_path: Path) -> None:
    """The appliance's own port is no failure; its store is not opened (the index check says skipped); it goes
    on answering, and the lock stays its own."""
    with serve(tmp_path / "data") as app:
        port = app.base_url.rsplit(":", 1)[1]
        status, checks, _ = doctor(app.data_dir, KUMIHO_CE_PORT=port)
        assert status == 0
        assert checks["port"]["status"] == "ok"
        assert checks["port"]["detail"] == f"127.0.0.1:{port}: this data directory's running appliance (pid " \
                                           f"{app.process.pid}) listens there"
        assert checks["index"]["detail"].startswith(f"skipped: the running appliance (pid {app.process.pid}) holds "
                                                    "the store")
        assert f"schema version {schema.LATEST_VERSION}" in checks["database"]["detail"]
        assert checks["memory"]["status"] == "ok" and "the running appliance holds its models" in \
            checks["memory"]["detail"]
        assert (app.data_dir / "lock").read_text().strip() == str(app.process.pid)
        assert kumiho_ce("doctor", env=cli_env(app.data_dir, KUMIHO_CE_PORT=port)).returncode == 0
        assert app.process.poll() is None
        app.stop()


# -- the stores ------------------------------------------------------------------------------------------------

def test_a_graph_written_by_a_newer_kumiho_ce(tmp_path: Path) -> None:
    data = private_dir(tmp_path / "data")
    GraphStore.open(DataDir(data).graph_path).close()
    database = kuzu.Database(str(DataDir(data).graph_path))
    kuzu.Connection(database).execute("CREATE (:SchemaMigration {version: $v, name: 'from the future', "
                                      "applied_at: ''})", {"v": schema.LATEST_VERSION + 1})
    database.close()
    status, checks, _ = doctor(data)
    assert status == 1 and checks["database"]["status"] == "fail"
    assert checks["database"]["detail"].startswith(f"schema version {schema.LATEST_VERSION + 1} is newer than this "
                                                   f"kumiho-ce knows ({schema.LATEST_VERSION})")
    assert "kumiho-ce restore" in checks["database"]["fix"]


def test_after_kill_9_doctor_passes_and_leaves_the_write_ahead_log_alone(tmp_path: Path) -> None:
    """The unit restarts a killed appliance after ExecStartPre's doctor: a graph with an unreplayed write-ahead log
    opens read-only (Kùzu replays it in memory), so doctor neither blocks the restart nor changes a byte."""
    import hashlib

    import httpx

    with serve(tmp_path / "data") as app:
        stored = httpx.post(app.base_url + "/api/v1/memories", json={"key": "boiler", "content": "serviced in May"})
        assert stored.status_code == 201, stored.text
        app.process.kill()
        app.process.wait()
    graph = sorted((tmp_path / "data" / "graph").iterdir())
    assert [p.name for p in graph] == ["graph.kuzu", "graph.kuzu.wal"]
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in graph}
    status, checks, _ = doctor(tmp_path / "data")
    assert status == 0
    assert checks["database"]["status"] == "ok" and checks["server"]["status"] == "warn"
    assert checks["index"]["status"] in ("ok", "warn")  # the write may or may not have reached the index
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in graph} == before


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[Path]:
    """A stopped data directory with three memories, all indexed (as a stopped appliance leaves it)."""
    from appliance.app import make_embedder
    from appliance.search.index import SearchIndex
    from appliance.search.sync import IndexSync

    data_dir = DataDir(tmp_path / "data")
    data_dir.ensure()
    settings = load_settings(data_dir=data_dir.root, search={"embedder": "hashing"})
    embedder = make_embedder(settings)
    with GraphStore.open(data_dir.graph_path) as graph:
        graph.ensure_space("/CognitiveMemory/notes")
        graph.create_revisions([NewRevision(f"kref://CognitiveMemory/notes/m{i}.fact", {"title": f"memory {i}"})
                                for i in range(3)])
        IndexSync(graph, SearchIndex(data_dir.root / "index", embedder.dim, embedder.model_id), embedder).run_pending()
    yield data_dir.root


def test_index_rows_and_revisions_that_disagree(indexed: Path) -> None:
    status, checks, _ = doctor(indexed)
    assert checks["index"]["status"] == "ok", checks["index"]
    assert "3 rows, every file readable; every revision searchable" in checks["index"]["detail"]
    with GraphStore.open(DataDir(indexed).graph_path) as graph:  # changed behind the index's back (a crash)
        graph.create_revisions([NewRevision("kref://CognitiveMemory/notes/late.fact", {"title": "late"})])
        graph.delete_item("kref://CognitiveMemory/notes/m0.fact", force=True)
    status, checks, _ = doctor(indexed)
    assert status == 0 and checks["index"]["status"] == "warn"
    assert "1 revision is not searchable yet" in checks["index"]["detail"]
    assert "1 index row belongs to revisions the graph no longer has" in checks["index"]["detail"]
    assert checks["index"]["fix"].endswith("kumiho-ce reindex")
    reindex = kumiho_ce("reindex", env=cli_env(indexed))
    assert reindex.returncode == 0, reindex.stderr
    status, checks, _ = doctor(indexed)
    assert checks["index"]["status"] == "ok" and "every revision searchable" in checks["index"]["detail"]


# -- the configuration -----------------------------------------------------------------------------------------

def test_a_configuration_with_an_unknown_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("port = 9191\n[search]\nembeder = \"minilm\"\n")
    status, checks, _ = doctor(tmp_path / "data", "--config", str(config))
    assert status == 1 and list(checks) == ["config", "variables"]  # nothing else: it may name another data dir
    assert checks["config"]["status"] == "fail" and "unknown setting 'search.embeder'" in checks["config"]["detail"]
    assert str(config) in checks["config"]["fix"]
    config.write_text("port = \n")
    status, checks, _ = doctor(tmp_path / "data", "--config", str(config))
    assert status == 1 and "is not valid TOML" in checks["config"]["detail"]


def test_a_configuration_file_holding_the_token_others_may_read(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'api_token = "{TOKEN}"\n')
    config.chmod(0o644)
    status, checks, printed = doctor(private_dir(tmp_path / "data"), "--config", str(config))
    assert status == 0 and checks["config"]["status"] == "warn"
    assert checks["config"]["fix"] == f"chmod 600 {config}" and TOKEN not in printed
    config.chmod(0o600)
    assert doctor(tmp_path / "data", "--config", str(config))[1]["config"]["status"] == "ok"


def test_a_misspelt_variable(tmp_path: Path) -> None:
    status, checks, _ = doctor(private_dir(tmp_path / "data"), KUMIHO_CE_SEARCH_EMBEDDER="minilm")
    assert status == 0 and checks["variables"]["status"] == "warn"
    assert "KUMIHO_CE_SEARCH_EMBEDDER (did you mean KUMIHO_CE_SEARCH__EMBEDDER?)" in checks["variables"]["detail"]


# -- models, memory and CPU ------------------------------------------------------------------------------------

def test_a_model_on_no_directory_of_an_empty_search_path(tmp_path: Path, installation_models: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    settings = load_settings(data_dir=tmp_path / "data", models_dir=models)
    check, found = check_chat_model(settings)
    assert found is None and check.status == "warn"
    for directory, label in ((models, "models_dir"), (tmp_path / "data" / "models", "data_dir")):
        assert f"{directory} ({label})" in check.detail
    assert str(installation_models) not in check.detail  # a models_dir replaces the installation's directory
    unset, _ = check_chat_model(load_settings(data_dir=tmp_path / "data"))
    for directory, label in ((installation_models, "installation"), (tmp_path / "data" / "models", "data_dir")):
        assert f"{directory} ({label})" in unset.detail
    assert check.fix is not None and check.fix.startswith("kumiho-ce models install")


def test_memory_for_a_chat_model_bigger_than_the_machine(tmp_path: Path) -> None:
    huge = tmp_path / "huge.gguf"
    with huge.open("wb") as handle:
        handle.truncate(1 << 42)  # 4 TiB, sparse: no disk used
    status, checks, _ = doctor(private_dir(tmp_path / "data"), KUMIHO_CE_INFERENCE__CHAT_MODEL="gguf",
                               KUMIHO_CE_INFERENCE__MODEL_PATH=str(huge))
    assert status == 0 and checks["memory"]["status"] == "warn"
    assert "1.5 × the 4,194,304 MiB chat model" in checks["memory"]["detail"]
    assert "inference.context_tokens" in checks["memory"]["fix"]


def test_the_kv_cache_is_read_from_the_gguf_header(tmp_path: Path) -> None:
    from appliance.inference.gguf_fixture import write_tiny_llama

    model = write_tiny_llama(tmp_path / "tiny.gguf", n_embd=64, n_layer=2, n_head=4)
    assert kv_bytes_per_token(model) == 2 * 4 * (16 + 16) * 2  # layers × KV heads × (K + V dims) × f16
    (tmp_path / "not.gguf").write_bytes(b"\0" * 64)
    assert kv_bytes_per_token(tmp_path / "not.gguf") is None


def test_a_llama_build_for_instructions_the_cpu_lacks() -> None:
    """The build's own report (llama_print_system_info, as doctor reads it) against a CPU without AVX-512."""
    info = subprocess.run([sys.executable, "-c", SYSTEM_INFO], capture_output=True, text=True, check=True).stdout
    flags = cpu_flags()
    assert flags is not None and lacking_features(info, flags) == []  # this build runs on this CPU
    without_avx512 = {f for f in flags if not f.startswith("avx512")}
    built_for_avx512 = "AVX512 = 1" in info
    assert (lacking_features(info, without_avx512) != []) == built_for_avx512
    assert lacking_features("CPU : AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 |", {"avx2", "f16c", "fma"}) == \
        ["AVX512"]
    assert cpu_flags("processor\t: 0\nflags\t\t: fpu avx2 fma\n") == {"fpu", "avx2", "fma"}
    assert cpu_flags("Features\t: fp asimd\n") is None


def test_the_operations_guide_explains_every_check_with_the_code_s_thresholds() -> None:
    from appliance.doctor_files import LOW_FREE_BYTES, MIN_FREE_BYTES
    from appliance.doctor_models import APPLIANCE_BYTES, MIB, MODEL_FACTOR

    guide = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    section = guide[guide.index("## Checking the appliance (doctor)"):]
    for name in ("config", "variables", "data_dir", "disk", "lock", "database", "index", "token", "server", "port",
                 "redis", "http", "grpc", "openai", "embedder", "chat_model", "memory", "cpu"):
        assert f"`{name}`" in section, name
    assert f"under {MIN_FREE_BYTES // MIB} MiB" in section and f"under {LOW_FREE_BYTES // (1024 * MIB)} GiB" in section
    assert f"{APPLIANCE_BYTES // MIB} MiB for the appliance and its embedder + {MODEL_FACTOR} ×" in section
    install = (Path(__file__).resolve().parents[1] / "docs" / "install.md").read_text()
    assert "kumiho-ce doctor --json" in install and "operations.md#checking-the-appliance-doctor" in install


def test_the_install_guide_s_doctor_commands_run(tmp_path: Path) -> None:
    """Every ```sh block of docs/install.md's "Checking an installation", run with ``bash -e`` on a scratch data
    directory with ``kumiho-ce`` (this checkout) on the PATH: each exits 0 and prints something."""
    import re

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "install.md").read_text()
    start = text.index("## Checking an installation\n")
    section = text[start:text.find("\n## ", start + 1)]
    commands = re.findall(r"^```sh\n(.*?)^```", section, re.S | re.M)
    assert len(commands) >= 2
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kumiho-ce").write_text(f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" -m appliance "$@"\n')
    (bin_dir / "kumiho-ce").chmod(0o755)
    env = cli_env(private_dir(tmp_path / "data"), KUMIHO_CE_PORT=str(free_port()))
    env.update({"HOME": str(tmp_path), "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"})
    for command in commands:
        done = subprocess.run(["bash", "-e", "-c", command], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and done.stdout.strip(), f"{command}\n{done.stdout}\n{done.stderr}"
