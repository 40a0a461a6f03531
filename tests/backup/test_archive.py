"""The archive: manifest first with every file's checksum, no credential inside; a damaged or truncated archive is
refused by its checksums, naming the bad file, before anything in the data directory changes."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.backup import archive
from tests.appliance_process import cli_env, kumiho_ce
from tests.backup.helpers import backup_now, store
from tests.inprocess import serve_in_process


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A backup of an appliance with two memories and an open working-memory session: (archive, data dir)."""
    data = tmp_path_factory.mktemp("archive") / "data"
    with serve_in_process(data, None, api_token="a-configured-secret-token-of-enough-length",
                          inference={"chat_model": "none", "endpoint_api_key": "sk-never-in-a-backup"}) as app:
        store(app.services, "onex")
        store(app.services, "twox")
        app.services.working.append("demo", "session-1", "user", "remember the milk")
        saved = data.parent / "saved.tar.gz"
        shutil.copyfile(app.services.backups.path_of(backup_now(app)["result"]["name"]), saved)
    yield saved, data


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_the_manifest_comes_first_and_lists_every_file_with_its_checksum(made: tuple[Path, Path]) -> None:
    saved, _ = made
    with tarfile.open(saved) as tar:
        names = tar.getnames()
    assert names[0] == "manifest.json"
    members = _members(saved)
    manifest = json.loads(members["manifest.json"])
    assert manifest["format"] == "kumiho-ce-backup" and manifest["format_version"] == 1
    assert manifest["reason"] == "manual" and manifest["schema_version"] >= 1 and manifest["kumiho_ce_version"]
    assert manifest["counts"]["items"] == 2
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert set(listed) == set(members) - {"manifest.json"}
    assert {"graph/graph.kuzu", "working/working.sqlite3", "config.toml"} <= set(listed)
    assert any(name.startswith("index/") for name in listed) and any(n.startswith("artifacts/") for n in listed)
    for name, entry in listed.items():
        assert entry["size"] == len(members[name])
        assert entry["sha256"] == hashlib.sha256(members[name]).hexdigest()


def test_no_credential_and_no_token_is_in_the_archive(made: tuple[Path, Path]) -> None:
    saved, data = made
    members = _members(saved)
    token = (data / "token").read_text().strip() if (data / "token").exists() else None
    config = members["config.toml"].decode()
    assert "api_token" not in config and "endpoint_api_key" not in config and "*****" not in config
    everything = b"".join(members.values())
    assert b"a-configured-secret-token-of-enough-length" not in everything
    assert b"sk-never-in-a-backup" not in everything
    assert not any(name == "token" or name.endswith("/token") for name in members)
    if token:
        assert token.encode() not in everything


def test_working_memory_is_in_the_archive(made: tuple[Path, Path], tmp_path: Path) -> None:
    saved, _ = made
    (tmp_path / "w.sqlite3").write_bytes(_members(saved)["working/working.sqlite3"])
    import sqlite3

    with sqlite3.connect(tmp_path / "w.sqlite3") as conn:
        assert conn.execute("SELECT content FROM messages").fetchall() == [("remember the milk",)]


def _rewrite(saved: Path, target: Path, change: str) -> None:
    """A copy of the archive (uncompressed, so a byte can be changed inside one file) with ``change`` made."""
    members = _members(saved)
    with tarfile.open(saved) as tar:
        order = tar.getnames()
    if change == "flip":
        body = bytearray(members["graph/graph.kuzu"])
        body[len(body) // 2] ^= 0xFF
        members["graph/graph.kuzu"] = bytes(body)
    elif change == "drop":
        order.remove("config.toml")
    elif change == "extra":
        order.append("graph/../../escape")
        members["graph/../../escape"] = b"x"
    with tarfile.open(target, "w") as tar:
        for name in order:
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tar.addfile(info, io.BytesIO(members[name]))


@pytest.mark.parametrize(("change", "named", "why"), [
    ("flip", "graph/graph.kuzu", "does not match its sha256"),
    ("drop", "config.toml", "missing from the archive"),
    ("extra", "graph/../../escape", "refused"),
])
def test_a_changed_archive_is_refused_naming_the_file(made: tuple[Path, Path], tmp_path: Path, change: str,
                                                      named: str, why: str) -> None:
    bad = tmp_path / "bad.tar"
    _rewrite(made[0], bad, change)
    with pytest.raises(Exception, match=why) as refused:
        archive.verify(bad)
    assert named in str(refused.value)


def test_a_flipped_byte_or_a_truncation_is_refused_by_restore_and_nothing_changes(made: tuple[Path, Path],
                                                                                 tmp_path: Path) -> None:
    saved, _ = made
    data = tmp_path / "data"
    with serve_in_process(data, None) as app:
        store(app.services, "currentx")
    before = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if "backups" not in p.parts)
    raw = saved.read_bytes()
    flipped = bytearray(gzip.decompress(raw))
    with tarfile.open(fileobj=io.BytesIO(bytes(flipped))) as tar:
        graph = tar.getmember("graph/graph.kuzu")
    flipped[graph.offset_data + graph.size // 2] ^= 0x01  # one bit in the middle of the graph's database file
    cases = {"flipped.tar": bytes(flipped), "truncated.tar.gz": raw[: len(raw) * 2 // 3]}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        done = kumiho_ce("restore", "--yes", str(tmp_path / name), env=cli_env(data))
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert "was refused and nothing was changed" in done.stderr, (name, done.stderr)
        assert "Traceback" not in done.stderr
        after = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if "backups" not in p.parts)
        assert after == before, name  # no pre-restore-…, no staging left, nothing replaced


def test_a_truncated_archive_names_where_it_ends(made: tuple[Path, Path], tmp_path: Path) -> None:
    raw = made[0].read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(Exception, match=r"truncated|damaged") as refused:
        archive.verify(cut)
    assert "the archive was refused" in str(refused.value)


def test_an_archive_of_a_newer_schema_is_refused(made: tuple[Path, Path], tmp_path: Path) -> None:
    members = _members(made[0])
    manifest = json.loads(members["manifest.json"])
    manifest["schema_version"] = 999
    members["manifest.json"] = json.dumps(manifest).encode()
    newer = tmp_path / "newer.tar"
    with tarfile.open(newer, "w") as tar:
        for name in ["manifest.json", *[n for n in members if n != "manifest.json"]]:
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tar.addfile(info, io.BytesIO(members[name]))
    done = kumiho_ce("restore", "--yes", str(newer), env=cli_env(tmp_path / "data"))
    assert done.returncode == 2
    assert "schema version 999, newer than this kumiho-ce knows" in done.stderr
    assert "upgrade kumiho-ce" in done.stderr


def test_a_member_larger_than_its_manifest_entry_is_refused_before_it_is_written(made: tuple[Path, Path],
                                                                                tmp_path: Path) -> None:
    members = _members(made[0])
    manifest = json.loads(members["manifest.json"])
    entry = next(f for f in manifest["files"] if f["path"] == "graph/graph.kuzu")
    entry["size"], entry["sha256"] = 10, hashlib.sha256(b"0123456789").hexdigest()  # the manifest says 10 bytes
    members["manifest.json"] = json.dumps(manifest).encode()
    members["graph/graph.kuzu"] = b"\0" * (3 * archive.CHUNK)  # the tar header says 3 MB: a disk filler
    crafted = tmp_path / "crafted.tar"
    with tarfile.open(crafted, "w") as tar:
        for name in ["manifest.json", *[n for n in members if n != "manifest.json"]]:
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tar.addfile(info, io.BytesIO(members[name]))
    staging = tmp_path / "staging"
    staging.mkdir()
    written: list[int] = []
    with pytest.raises(Exception, match="where the manifest says 10") as refused:
        archive.verify(crafted, lambda done, total: written.append(done), extract_to=staging)
    assert "graph/graph.kuzu" in str(refused.value) and "was refused" in str(refused.value)
    staged = staging / "graph" / "graph.kuzu"
    assert not staged.exists() or staged.stat().st_size <= 10  # not 3 MB on disk first, refused after
    assert all(done <= _total(manifest) for done in written)


def _total(manifest: dict[str, object]) -> int:
    return sum(int(f["size"]) for f in manifest["files"])  # type: ignore[attr-defined, index]


def _limit_file_size(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # the kernel refuses writes past ``limit`` bytes


def test_a_write_error_during_a_restore_is_reported_as_such_not_as_a_damaged_archive(made: tuple[Path, Path],
                                                                                   tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.appliance_process import ROOT

    saved, _ = made
    limit = max(f.size for f in archive.read_manifest(saved).files) // 2  # the largest file cannot be written
    data = tmp_path / "data"
    with serve_in_process(data, None) as app:
        store(app.services, "currentx")
    before = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if "backups" not in p.parts)
    # a real write error from the kernel (as a full disk gives ENOSPC): the file size limit gives EFBIG
    done = subprocess.run([sys.executable, "-m", "appliance", "restore", "--yes", str(saved)], cwd=ROOT,
                          env=cli_env(data), text=True, capture_output=True, timeout=120,
                          preexec_fn=functools.partial(_limit_file_size, limit))
    assert done.returncode != 0, done.stdout
    assert f"cannot write into {data}" in done.stderr, done.stderr
    assert "damaged" not in done.stderr and "truncated" not in done.stderr and "Traceback" not in done.stderr
    after = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if "backups" not in p.parts)
    assert after == before  # staging removed, nothing moved
