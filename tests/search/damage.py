"""Damage done to a search index as disks, crashes and careless hands do it (a data directory's ``index/``)."""

from __future__ import annotations

from pathlib import Path


def table_dir(data_dir: Path) -> Path:
    return data_dir / "index" / "revisions.lance"


def truncate_latest_manifest(data_dir: Path) -> None:
    """Cut the manifest of the table's latest version short (a crash or a full disk while it was written)."""
    def version(manifest: Path) -> int:
        number = int(manifest.stem)
        return 2**64 - 1 - number if number >= 2**63 else number  # newer LanceDB names it u64::MAX − version

    latest = max((table_dir(data_dir) / "_versions").glob("*.manifest"), key=version)
    latest.write_bytes(latest.read_bytes()[:100])


def delete_a_data_file(data_dir: Path) -> None:
    """The newest one: the latest version reads it (an older one may be left over from before a compaction)."""
    max((table_dir(data_dir) / "data").glob("*.lance"), key=lambda file: file.stat().st_mtime_ns).unlink()


def delete_every_data_file(data_dir: Path) -> None:
    for file in (table_dir(data_dir) / "data").glob("*.lance"):
        file.unlink()
