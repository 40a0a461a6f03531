"""Code decisions (offered only when KUMIHO_MEMORY_DECISIONS=1, as Kumiho does): why code is the way it is,
stored as decision memories anchored to commits and files."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import Kref, SessionId

GATE = "KUMIHO_MEMORY_DECISIONS"
RepoPath = Annotated[str, Field(min_length=1, max_length=4096)]
CommitRef = Annotated[str, Field(min_length=1, max_length=256)]
FilePath = Annotated[str, Field(min_length=1, max_length=1024)]


class EvidenceInput(Input):
    kind: Literal["measurement", "review_finding", "incident", "benchmark", "constraint", "rejected_alternative"]
    text: str = Field(min_length=1, max_length=2000)


class DecisionInput(Input):
    title: str = Field(min_length=1, max_length=200)
    decision: str = Field(min_length=1, max_length=4000)
    rationale: str | None = Field(None, max_length=4000)
    why_question: str | None = Field(None, max_length=500)
    symbols: Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=16)] | None = None
    files: Annotated[list[FilePath], Field(max_length=32)] | None = Field(
        None, description="paths relative to the repository; 'path:10-20' anchors lines")
    evidence: Annotated[list[EvidenceInput], Field(max_length=8)] | None = None
    confidence: Literal["high", "medium", "low"] | None = None


class CodeCaptureInput(Input):
    decisions: Annotated[list[DecisionInput], Field(min_length=1, max_length=20)]
    repo_path: RepoPath = "."
    commit_ref: CommitRef = "HEAD"


class CodeWhyInput(Input):
    question: str | None = Field(None, max_length=4000)
    file: FilePath | None = None
    line: int | None = Field(None, ge=1, le=10_000_000)
    commit: str | None = Field(None, max_length=256)
    repo: str | None = Field(None, max_length=512)
    limit: int = Field(5, ge=1, le=50)

    @model_validator(mode="after")
    def _asks_something(self) -> CodeWhyInput:
        if not (self.question or "").strip() and not self.file:
            raise ValueError("question: give a question or a file (or both)")
        return self


class CodeIngestInput(Input):
    repo_path: RepoPath = Field(json_schema_extra={"default": "."})
    rev_range: str | None = Field(None, max_length=512)
    max_commits: int = Field(50, ge=1, le=500)
    force: bool = False


class CodeMineSessionInput(Input):
    session_id: SessionId | None = None
    conversation_kref: Kref | None = None
    repo_path: RepoPath = "."
    ingest_first: bool = True
    force: bool = False


OPERATIONS = (
    Operation("kumiho_code_why", "Explain why code is the way it is",
              "Recall the code decisions stored for a file (and line), a commit or a question: the decision, its "
              "rationale and evidence, with a Markdown context to quote.",
              CodeWhyInput, read_only=True, idempotent=True, gate=GATE),
    Operation("kumiho_code_ingest", "Mine a commit range for decisions",
              "Mine a git commit range into decision memories with the local model.",
              CodeIngestInput, gate=GATE),
    Operation("kumiho_code_capture", "Capture a code decision",
              "Store decisions you state about the code (title, decision, rationale, files, evidence), anchored to "
              "a commit of the repository; no model needed.",
              CodeCaptureInput, gate=GATE),
    Operation("kumiho_code_mine_session", "Mine this session for code decisions",
              "Mine a session's transcript into decision memories with the local model.",
              CodeMineSessionInput, gate=GATE),
)
