"""The code-decision family (offered with KUMIHO_MEMORY_DECISIONS=1): capture and recall decisions about
code (keyless), and mine them from git history or a session's transcript with the local model."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from appliance.core.ports import answer_budget
from appliance.errors import InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.inference import prompts
from appliance.jobs import Job
from appliance.memory import code_decisions as code
from appliance.memory.client import Client
from appliance.memory.spaces import project_for
from appliance.memory.working import WorkingMemory
from appliance.operations.code import CodeCaptureInput, CodeIngestInput, CodeMineSessionInput, CodeWhyInput
from appliance.services.model_work import ModelWork

if TYPE_CHECKING:
    from appliance.services import Handler, Parts

COMMITS_PER_CALL = 5
MAX_TRANSCRIPT = 12_000  # characters of a session the model reads
INGEST_FIRST_COMMITS = 50  # commits of HEAD's history mine_session's ingest_first looks at (ingest's default)


def decisions_schema(sources: int) -> dict[str, Any]:
    text = {"type": "string", "maxLength": 300}
    return {"type": "object", "properties": {"decisions": {"type": "array", "maxItems": 8, "items": {
        "type": "object", "properties": {"source": {"type": "integer", "minimum": 1, "maximum": max(1, sources)},
                                         "title": {"type": "string", "minLength": 3, "maxLength": 120},
                                         "decision": {"type": "string", "minLength": 3, "maxLength": 300},
                                         "rationale": text},
        "required": ["source", "title", "decision", "rationale"], "additionalProperties": False}}},
        "required": ["decisions"], "additionalProperties": False}


class CodeService:
    def __init__(self, graph: GraphStore, work: ModelWork, working: WorkingMemory, repo_roots: list[str]) -> None:
        self.graph, self.work, self.working, self.repo_roots = graph, work, working, repo_roots

    @classmethod
    def of(cls, parts: Parts) -> CodeService:
        return cls(parts.graph, parts.work, parts.working, parts.settings.maintenance.code_repo_roots)

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_code_why": self.why, "kumiho_code_capture": self.capture, "kumiho_code_ingest": self.ingest,
                "kumiho_code_mine_session": self.mine_session}

    def capture(self, args: CodeCaptureInput, client: Client) -> dict[str, Any]:
        project = project_for(None, client)
        ref = code.check_ref(args.commit_ref, "commit_ref")
        repo = code.locate(args.repo_path, self.repo_roots)
        commit, resolved = code.resolve_commit(repo, ref)
        decisions = [code.Decision(d.title.strip(), d.decision.strip(), (d.rationale or "").strip(),
                                   (d.why_question or "").strip(), tuple(d.symbols or ()), tuple(d.files or ()),
                                   tuple({"kind": e.kind, "text": e.text} for e in d.evidence or ()),
                                   d.confidence or "") for d in args.decisions]
        stored = code.store(self.graph, project, repo, commit, resolved, decisions)
        result: dict[str, Any] = {"success": True, "captured": len(stored), "decisions": stored,
                                  "project": code.decisions_project(project), "repo": repo.name, "commit": commit,
                                  "commit_resolved": resolved}
        if not resolved:
            result["note"] = f"the commit is stored as given: {repo.note or f'git does not know {ref!r}'}"
        return result

    def why(self, args: CodeWhyInput, client: Client) -> dict[str, Any]:
        project = project_for(None, client)
        found = code.recall(self.graph, project, question=args.question or "", file=args.file or "", line=args.line,
                            commit=args.commit or "", repo=args.repo or "", limit=args.limit)
        return {"decisions": found, "count": len(found), "context": code.markdown(found),
                "project": code.decisions_project(project)}

    def ingest(self, args: CodeIngestInput, client: Client) -> dict[str, Any]:
        project = project_for(None, client)
        rev_range = code.check_ref(args.rev_range, "rev_range", allow_range=True) if args.rev_range else ""
        repo = self._readable(args.repo_path)
        unready = self.work.model_ready()
        if unready:
            return {"success": False, "commits_scanned": 0, "decisions_stored": 0,
                    "skipped": f"{unready}: mining commits needs the local model"}
        return self._ingest(project, repo, rev_range, args.max_commits, args.force)

    def _ingest(self, project: str, repo: code.Repo, rev_range: str, max_commits: int,
                force: bool) -> dict[str, Any]:
        """Mine the commits of ``rev_range`` (HEAD's history when empty) not mined yet (all with ``force``)."""
        commits = code.log(repo, rev_range, max_commits)
        done = set() if force else set(code.mined_commits(self.graph, project, repo))
        fresh = [c for c in commits if c.id not in done]

        def mine(job: Job) -> dict[str, Any]:
            stored: list[dict[str, Any]] = []
            batches = [fresh[i:i + COMMITS_PER_CALL] for i in range(0, len(fresh), COMMITS_PER_CALL)]
            for number, batch in enumerate(batches):
                job.progress(number, len(batches), f"commits {number * COMMITS_PER_CALL + 1}–"
                                                   f"{number * COMMITS_PER_CALL + len(batch)} of {len(fresh)}")
                material = "\n\n".join(f"{i}. commit {c.id[:12]} ({c.date[:10]}): {c.subject}\n{c.body}".strip()
                                       for i, c in enumerate(batch, 1))
                found = self._extract("Commits", material, len(batch), job)
                # a batch's decisions and the mark that its commits are mined commit together: after a failure
                # or a crash, the next ingest mines the batch again without storing any of it twice
                stored += self.graph.atomic(partial(self._store_batch, project, repo, batch, found))
            job.progress(len(batches), len(batches))
            return {"decisions": stored}

        job = self.work.queue().submit("code_ingest", mine, lane="interactive", key=f"code_ingest:{repo.name}",
                                       description=f"mine {len(fresh)} commits of {repo.name}")
        result = self.work.wait_for(job)
        if "decisions" not in result:
            return {"success": True, **result}
        return {"success": True, "repo": repo.name, "project": code.decisions_project(project),
                "commits_scanned": len(commits), "commits_skipped": len(commits) - len(fresh),
                "decisions_stored": len(result["decisions"]), "decisions": result["decisions"], "job_id": job.id}

    def mine_session(self, args: CodeMineSessionInput, client: Client) -> dict[str, Any]:
        project = project_for(None, client)
        if not args.session_id and not args.conversation_kref:
            raise InvalidArgument("session_id: give the session to mine (session_id) or a consolidated "
                                  "conversation (conversation_kref)", field="session_id")
        transcript = self._transcript(project, args)
        repo = code.locate(args.repo_path, self.repo_roots)
        unready = self.work.model_ready()
        if unready:
            return {"success": False, "decisions_stored": 0,
                    "skipped": f"{unready}: mining a session needs the local model"}
        messages = transcript[-MAX_TRANSCRIPT:]
        digest = code.session_digest(args.conversation_kref or f"session:{args.session_id}", messages)
        if not args.force and digest in code.mined_sessions(self.graph, project, repo):
            return {"success": True, "repo": repo.name, "project": code.decisions_project(project),
                    "decisions_stored": 0, "decisions": [], "characters_read": 0,
                    "skipped": "this session was mined already and has not changed since; force=true mines it again"}
        history = self._history_first(project, repo) if args.ingest_first else "no"
        commit, resolved = code.resolve_commit(repo, "HEAD")

        def mine(job: Job) -> dict[str, Any]:
            found = [d for _, d in self._extract("Session transcript (message 1)", messages, 1, job)]

            def write() -> list[dict[str, Any]]:  # the decisions and the mark that this transcript is mined
                stored = code.store(self.graph, project, repo, commit, resolved, found) if found else []
                code.remember_session(self.graph, project, repo, digest)
                return stored

            return {"decisions": self.graph.atomic(write)}

        job = self.work.queue().submit("code_mine_session", mine, lane="interactive",
                                       description="mine a session for code decisions")
        result = self.work.wait_for(job)
        if "decisions" not in result:
            return {"success": True, "ingest_first": history, **result}
        return {"success": True, "repo": repo.name, "project": code.decisions_project(project), "commit": commit,
                "commit_resolved": resolved, "decisions_stored": len(result["decisions"]),
                "decisions": result["decisions"], "characters_read": len(messages), "job_id": job.id,
                "ingest_first": history}

    def _history_first(self, project: str, repo: code.Repo) -> dict[str, Any] | str:
        """mine_session's ``ingest_first``: HEAD's history not mined yet, as kumiho_code_ingest with its defaults
        would mine it; what it did, or why it could not."""
        if repo.root is None:
            return f"skipped: {repo.note}"
        if not code.resolve_commit(repo, "HEAD")[1]:
            return "skipped: the repository has no commit yet"
        done = self._ingest(project, repo, "", INGEST_FIRST_COMMITS, False)
        return {k: v for k, v in done.items() if k not in ("success", "repo", "project", "decisions")}

    # -- helpers ----------------------------------------------------------------------------------------
    def _store_batch(self, project: str, repo: code.Repo, batch: list[code.Commit],
                     found: list[tuple[int, code.Decision]]) -> list[dict[str, Any]]:
        """One batch of commits' decisions, each anchored to its commit, and the batch marked as mined (inside
        the caller's transaction)."""
        stored = []
        for index, decision in found:
            stored += code.store(self.graph, project, repo, batch[index - 1].id, True, [decision])
        code.remember_mined(self.graph, project, repo, [c.id for c in batch])
        return stored

    def _readable(self, repo_path: str) -> code.Repo:
        repo = code.locate(repo_path, self.repo_roots)
        if repo.root is None:
            raise InvalidArgument(f"repo_path: {repo.note}; the operator lists the directories whose repositories "
                                  "may be read in [maintenance] code_repo_roots", field="repo_path")
        return repo

    def _extract(self, source: str, material: str, sources: int, job: Job) -> list[tuple[int, code.Decision]]:
        schema = decisions_schema(sources)
        answer = self.work.model.complete_json(
            prompts.render("code_decisions", source=source, material=material), schema,
            max_tokens=answer_budget(schema), timeout=self.work.options.call_timeout, cancel=job.cancel)
        return [(int(d["source"]), code.Decision(d["title"].strip(), d["decision"].strip(), d["rationale"].strip(),
                                                 source="git" if source == "Commits" else "session"))
                for d in answer.get("decisions") or [] if 1 <= int(d["source"]) <= sources]

    def _transcript(self, project: str, args: CodeMineSessionInput) -> str:
        if args.conversation_kref:
            found = self.graph.resolve(args.conversation_kref)
            if found.revision is None:
                raise NotFound("conversation_kref: no stored conversation there", field="conversation_kref")
            meta = found.revision.metadata
            return f"{meta.get('title', '')}\n{meta.get('summary', '')}"
        messages = self.working.all_messages(project, args.session_id or "")
        if not messages:
            raise NotFound(f"session_id: session {args.session_id} has no buffered messages; give a consolidated "
                           "conversation's conversation_kref instead", field="session_id")
        return "\n\n".join(f"{m.role}: {m.content}" for m in messages)
