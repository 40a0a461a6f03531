"""Imports run as jobs of kind ``import`` (progress in bytes of the file, checked then written)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.core.caller import calling, current_caller
from appliance.jobs import Job
from appliance.portability.importer import Importer

if TYPE_CHECKING:
    from appliance.app import Services

KIND = "import"


def start_import(services: Services, path: Path, *, dry_run: bool, remove_after: bool) -> Job:
    """Queue the import of the staged file ``path``; ``remove_after`` for an upload (the file is ours)."""
    caller = current_caller().doing("import")  # the job runs on a worker thread: who asked travels with it
    artifact_root = services.data_dir.root / "artifacts"

    def work(job: Job) -> dict[str, Any] | None:
        importer = Importer(services.graph, artifact_root,
                            progress=lambda done, total, note: job.progress(done, total, note),
                            cancelled=job.cancel.is_set)
        with calling(caller):
            return importer.run(path, dry_run=dry_run)

    what = "check" if dry_run else "import"
    # an upload is removed when its job ends, also when it is cancelled before it starts (work never runs)
    cleanup = (lambda: path.unlink(missing_ok=True)) if remove_after else None
    try:
        return services.jobs.submit(KIND, work, description=f"{what} {path.name}", cleanup=cleanup)
    except BaseException:
        if cleanup is not None:
            cleanup()
        raise
