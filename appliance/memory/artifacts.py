"""The start-up sweep of ``<data dir>/artifacts``: what an interrupted write left behind.

A memory's artifact file is written (and fsynced) before the graph transaction that points at it commits.
A crash in between leaves either a ``*.tmp`` file (the write itself was cut short) or a complete file that
no Artifact node references (the commit never happened, so the memory was never acknowledged). The sweep
runs once at start, while this process holds the data directory's lock and before anything writes, so no
write can be in flight: no grace period is needed.

``*.tmp`` files are deleted. Unreferenced files are moved, not deleted, to ``artifacts/.orphaned/`` (same
relative path): a file someone put there by hand, or one a restored older graph no longer names, stays
recoverable. A file is kept when any artifact location ends in its name: file names carry a random suffix,
and matching by name keeps every file of a data directory that was moved or restored elsewhere.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from appliance.fsutil import TEMP_SUFFIX, make_dirs

log = logging.getLogger(__name__)

ORPHANED = ".orphaned"


@dataclass(frozen=True)
class Swept:
    kept: int
    temp_removed: int
    orphans_moved: int


def sweep(root: Path, referenced_locations: set[str]) -> Swept:
    """Delete ``*.tmp`` files under ``root`` and move files no location references to ``root/.orphaned``."""
    if not root.is_dir():
        return Swept(0, 0, 0)
    referenced = {Path(location).name for location in referenced_locations}
    kept = removed = moved = 0
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] == ORPHANED or path.is_symlink() or not path.is_file():
            continue
        if path.name in referenced:
            kept += 1
            continue
        try:
            if path.name.endswith(TEMP_SUFFIX):
                path.unlink(missing_ok=True)
                removed += 1
            else:
                target = root / ORPHANED / relative
                make_dirs(target.parent)
                os.replace(path, target)
                moved += 1
        except OSError as exc:  # a file the sweep cannot move is left where it is; start goes on
            log.warning("artifacts: cannot sweep %s: %s", path, exc.strerror)
    if removed or moved:
        log.warning("artifacts: removed %d unfinished file(s) and moved %d file(s) no memory references to %s "
                    "(left by interrupted writes)", removed, moved, root / ORPHANED)
    return Swept(kept, removed, moved)
