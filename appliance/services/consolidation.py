"""``kumiho_memory_consolidate``: which session, whether it can be consolidated now, and where the work runs.
The pipeline itself is ``appliance.memory.consolidation.Consolidator`` (the idle-session sweep runs it too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from appliance.errors import Conflict, InvalidArgument
from appliance.jobs import Job
from appliance.memory.client import Client
from appliance.memory.consolidation import Consolidator, summary_shape
from appliance.memory.sessions import resolve_session
from appliance.memory.spaces import project_for
from appliance.operations.sessions import ConsolidateInput
from appliance.services.model_work import ModelWork

if TYPE_CHECKING:
    from appliance.services import Handler


class ConsolidationService:
    def __init__(self, consolidator: Consolidator, work: ModelWork) -> None:
        self.consolidator, self.work = consolidator, work

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_memory_consolidate": self.consolidate}

    def consolidate(self, args: ConsolidateInput, client: Client) -> dict[str, Any]:
        """Summarise the session's buffer with the model (or store an agent-written ``summary``), write the
        transcript artifact, store the summary, clear the buffer (reference §4.10). The model's work runs on
        the interactive job lane; after ``tool_wait_seconds`` the answer says it goes on in the background."""
        project = project_for(None, client)
        working = self.consolidator.working
        provided = args.summary or None
        if provided is not None:
            summary_shape(provided)  # refused before a session is resolved (or minted)
        # without a summary there must be messages: a user's session is looked up, never minted empty
        session_id, source = resolve_session(working, session_id=args.session_id, user_id=args.user_id,
                                             context=args.context, host_session_id=client.host_session_id,
                                             project=project, mint=provided is not None)
        if provided is None:
            if not working.count(project, session_id):
                raise Conflict(f"No messages to consolidate in session {session_id}: nothing was buffered "
                               "(or it was consolidated already)", field="session_id")
            unready = self.work.model_ready()
            if unready:
                raise InvalidArgument(f"summary: {unready} to summarise the session; pass an agent-written "
                                      "summary (text or {title, summary, …}), or install the model "
                                      "(`kumiho-ce models install`)", field="summary")

        def work(job: Job | None) -> dict[str, Any]:
            return self.consolidator.run(project, session_id, summary=provided, job=job,
                                         host_session_id=client.host_session_id, evidence_level=args.evidence_level,
                                         source=args.source, implications=list(args.implications or []))

        if provided is not None:
            result = work(None)
        else:
            result = self.work.run("consolidate", work, key=f"consolidate:{project}:{session_id}",
                                    description=f"consolidate session {session_id}")
        return {**result, "session_id": session_id, "session_id_source": source}
