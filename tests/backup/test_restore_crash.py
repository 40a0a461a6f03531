"""A restore cut short between its renames (the process killed, or a rename failing) is finished by the next
start, `serve` or `kumiho-ce restore`, from its staging and pre-restore directories: the data directory never
comes up without its graph, and neither directory is deleted on the way."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.backup import archive, restore
from appliance.datadir import DataDir
from appliance.errors import StorageError
from tests.appliance_process import ROOT, cli_env, kumiho_ce
from tests.backup.helpers import found, store
from tests.inprocess import serve_in_process

# every part of a served data directory moves aside, then every part of the archive moves in: 8 renames
RENAMES = 2 * len(archive.PARTS)

# restores ``archive`` into ``data dir`` and kills itself right after the n-th rename of a data directory part
_CRASHING_RESTORE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from appliance.backup.restore import restore
    from appliance.datadir import DataDir

    data, source, crash_after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    real_rename, done = os.rename, []

    def rename(old, new):
        real_rename(old, new)
        done.append(new)
        if len(done) == crash_after:
            os._exit(9)  # as a kill: no cleanup, no finally

    os.rename = rename
    restore(DataDir(data), source)
""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A backup holding one memory, ``restoredx``."""
    data = tmp_path_factory.mktemp("crash") / "source"
    with serve_in_process(data, None) as app:
        store(app.services, "restoredx")
        made = app.services.backups.create("manual")
        copy = data.parent / "saved.tar.gz"
        shutil.copyfile(made.path, copy)
    yield copy


def _data_dir_with_another_memory(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    with serve_in_process(data, None) as app:
        store(app.services, "previousx")
    return data


def _assert_restored(data: Path) -> None:
    """The next start serves the archive's memory; the previous data is whole in pre-restore-…; no marker and
    no staging are left."""
    with serve_in_process(data, None) as app:
        assert app.services.graph.stats()["items"] == 1
        assert app.services.index_worker.wait_idle(60)
        assert found(app.services, "restoredx") and not found(app.services, "previousx")
    assert not (data / restore.MARKER).exists()
    assert not list(data.glob(f"{restore.STAGING_PREFIX}*"))
    (aside,) = data.glob(f"{restore.ASIDE_PREFIX}*")
    assert sorted(p.name for p in aside.iterdir()) == sorted(archive.PARTS)
    assert (aside / "graph" / "graph.kuzu").is_file()


@pytest.mark.parametrize("crash_after", [1, len(archive.PARTS), len(archive.PARTS) + 1, RENAMES - 1])
def test_a_restore_killed_between_its_renames_is_finished_by_the_next_start(saved: Path, tmp_path: Path,
                                                                            crash_after: int) -> None:
    data = _data_dir_with_another_memory(tmp_path)
    killed = subprocess.run([sys.executable, "-c", _CRASHING_RESTORE, str(data), str(saved), str(crash_after)],
                            cwd=ROOT, env=cli_env(data), capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    assert (data / restore.MARKER).exists()
    assert list(data.glob(f"{restore.STAGING_PREFIX}*"))  # the restored data waits there
    _assert_restored(data)


def test_kumiho_ce_restore_finishes_an_interrupted_restore_before_its_own(saved: Path, tmp_path: Path) -> None:
    data = _data_dir_with_another_memory(tmp_path)
    killed = subprocess.run([sys.executable, "-c", _CRASHING_RESTORE, str(data), str(saved), "2"],
                            cwd=ROOT, env=cli_env(data), capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    done = kumiho_ce("restore", "--yes", str(saved), env=cli_env(data), timeout=120)
    assert done.returncode == 0, done.stderr
    asides = sorted(data.glob(f"{restore.ASIDE_PREFIX}*"))
    assert len(asides) == 2  # the interrupted restore's (the previous memory) and this one's
    assert all(sorted(p.name for p in aside.iterdir()) == sorted(archive.PARTS) for aside in asides)
    assert not (data / restore.MARKER).exists()
    with serve_in_process(data, None) as app:
        assert app.services.graph.stats()["items"] == 1
        assert app.services.index_worker.wait_idle(60)
        assert found(app.services, "restoredx")
    previous = tmp_path / "previous"
    shutil.copytree(asides[0], previous)  # the interrupted restore's aside: the memory it replaced, whole
    with serve_in_process(previous, None, memory={"auto_hydrate": False}) as app:
        assert app.services.index_worker.wait_idle(60)
        assert found(app.services, "previousx") and not found(app.services, "restoredx")


def test_a_failed_rename_deletes_nothing_and_the_next_start_finishes_the_restore(
        saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _data_dir_with_another_memory(tmp_path)
    real_rename, done = os.rename, []

    def rename(old: str, new: str) -> None:
        if len(done) == len(archive.PARTS) + 1:  # the second staged part cannot come in
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_rename(old, new)
        done.append(new)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(StorageError, match="nothing was deleted") as failed:
        restore.restore(DataDir(data), saved)
    monkeypatch.undo()
    assert "start the appliance or run the restore again" in failed.value.message
    (staging,) = data.glob(f"{restore.STAGING_PREFIX}*")
    assert [p.name for p in staging.iterdir() if p.name in archive.PARTS]  # the parts not yet moved are kept
    assert (data / restore.MARKER).exists()
    _assert_restored(data)
