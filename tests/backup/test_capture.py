"""``TreeCopy``: the second pass of a backup copies exactly what changed since the first."""

from __future__ import annotations

import os
from pathlib import Path

from appliance.backup.capture import QUIET_NS, TreeCopy


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_second_pass_brings_new_changed_and_removed_files(tmp_path: Path) -> None:
    source, target = tmp_path / "index", tmp_path / "copy"
    (source / "t" / "data").mkdir(parents=True)
    (source / "t" / "data" / "a.lance").write_bytes(b"a" * 10)
    (source / "t" / "_latest.manifest").write_bytes(b"v1")
    (source / "t" / "gone.lance").write_bytes(b"g")
    copy = TreeCopy(source, target)
    copy.sync()
    assert _tree(target) == _tree(source)
    (source / "t" / "data" / "b.lance").write_bytes(b"b")
    (source / "t" / "_latest.manifest").write_bytes(b"v2, longer")  # rewritten in place
    (source / "t" / "gone.lance").unlink()
    (source / "t" / "data" / "c.lance.tmp").write_bytes(b"in flight")
    copy.sync()
    assert _tree(target) == {k: v for k, v in _tree(source).items() if not k.endswith(".tmp")}
    assert copy.files == 3


def test_immutable_files_are_linked_and_a_quiet_folder_is_not_listed_again(tmp_path: Path) -> None:
    source, target = tmp_path / "artifacts", tmp_path / "copy"
    (source / "p" / "s").mkdir(parents=True)
    old = source / "p" / "s" / "old.md"
    old.write_text("old")
    quiet = (source.stat().st_mtime_ns - 2 * QUIET_NS)
    for folder in (source, source / "p", source / "p" / "s"):
        os.utime(folder, ns=(quiet, quiet))  # unchanged for longer than the quiet time
    copy = TreeCopy(source, target, immutable=True)
    copy.sync()
    assert (target / "p" / "s" / "old.md").stat().st_ino == old.stat().st_ino  # a hard link
    # a file planted without moving its folder's time: the quiet, unchanged folder is not listed again
    (source / "p" / "s" / "planted.md").write_text("x")
    os.utime(source / "p" / "s", ns=(quiet, quiet))
    copy.sync()
    assert "p/s/planted.md" not in _tree(target)
    (source / "p" / "s" / "new.md").write_text("new")  # a real write moves the folder's time: listed again
    (source / "p" / "t").mkdir()
    (source / "p" / "t" / "other.md").write_text("other")
    copy.sync()
    assert _tree(target) == _tree(source)


def test_a_folder_changed_just_before_it_was_listed_is_listed_again(tmp_path: Path) -> None:
    source, target = tmp_path / "artifacts", tmp_path / "copy"
    (source / "s").mkdir(parents=True)
    copy = TreeCopy(source, target, immutable=True)
    copy.sync()  # the folders were just created: not quiet
    stamp = (source / "s").stat().st_mtime_ns
    (source / "s" / "same-tick.md").write_text("written in the same clock tick")
    os.utime(source / "s", ns=(stamp, stamp))  # as if the clock had not moved on
    copy.sync()
    assert "s/same-tick.md" in _tree(target)
