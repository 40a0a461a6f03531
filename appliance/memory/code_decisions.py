"""Code decisions: why code is the way it is, stored as ``decision`` items of the ``<project>-decisions``
project (one space per repository), anchored to a commit and to files (``path`` or ``path:10-20``).

Repositories are read only under the configured roots (``[maintenance] code_repo_roots``), only with
read-only git commands (``rev-parse``, ``log``), with a time limit and without the repository's hooks or
file-system monitor: a path outside the roots is never looked at, so a caller cannot probe the file system
through ``repo_path``. Without a readable repository a commit is stored as given, marked unresolved.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.core.model import Revision
from appliance.errors import InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.memory import records
from appliance.memory.spaces import memory_item_name, slug

KIND = "decision"
GIT_SECONDS = 20.0
MAX_DECISIONS = 1000  # decisions one recall looks at
CURSOR = "_code_ingest.cursor"
MAX_MINED = 5000  # commit ids (and mined-session digests) the cursor remembers
COMMIT_BODY = 2000  # characters of a commit message the model reads
_REF = re.compile(r"[A-Za-z0-9._/@{}~^:+-]{1,256}")
_RANGE = re.compile(r"[A-Za-z0-9._/@{}~^:+-]{1,256}(\.\.\.?[A-Za-z0-9._/@{}~^:+-]{0,256})?")
_TOKENS = re.compile(r"[0-9a-z]+")
_LINES = re.compile(r"^(.*?):(\d+)(?:-(\d+))?$")


def decisions_project(project: str) -> str:
    return f"{project}-decisions"


@dataclass(frozen=True)
class Repo:
    name: str  # the space the decisions of this repository go to
    root: Path | None  # its working tree, when it may be read
    note: str = ""  # why it may not


def locate(repo_path: str, roots: list[str]) -> Repo:
    """The repository ``repo_path`` names, readable only when it is a git work tree under one of ``roots``."""
    given = Path(repo_path).expanduser()
    name = slug(given.name or "repo", 64) if given.name not in ("", ".") else "repo"
    if not roots:
        return Repo(name, None, "no repository is readable: [maintenance] code_repo_roots is empty")
    bases = [Path(r).expanduser().resolve() for r in roots]
    candidate = (given if given.is_absolute() else bases[0] / given).resolve()
    base = next((b for b in bases if candidate == b or candidate.is_relative_to(b)), None)
    if base is None:
        return Repo(name, None, "repo_path is not under [maintenance] code_repo_roots")
    # git walks up from the candidate; the ceiling stops it at the root, so a root that is a plain directory
    # inside another repository (a home directory kept in git) does not open that repository
    top = git(candidate, "rev-parse", "--show-toplevel", ceiling=base.parent)
    if top is None:
        return Repo(name, None, "repo_path is not a git work tree the appliance can read")
    root = Path(top.strip()).resolve()
    if not (root == base or root.is_relative_to(base)):  # and whatever git says, never read outside the roots
        return Repo(name, None, "repo_path lies in a git repository that is not under [maintenance] code_repo_roots")
    return Repo(slug(root.name, 64), root)


def git(where: Path, *args: str, ceiling: Path | None = None) -> str | None:
    """A read-only git command's output, or None when git fails (no repository, no git, a bad ref).
    git looks for the repository no higher than ``where`` itself, or than ``ceiling`` when given."""
    command = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-pager", "-C",
               str(where), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=GIT_SECONDS, check=False,
                              env={"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin",
                                   "HOME": "/nonexistent", "LC_ALL": "C",
                                   "GIT_CEILING_DIRECTORIES": str(ceiling or where.parent)})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def check_ref(value: str, field: str, *, allow_range: bool = False) -> str:
    pattern = _RANGE if allow_range else _REF
    if value.startswith("-") or not pattern.fullmatch(value):
        raise InvalidArgument(f"{field}: {value[:60]!r} is not a git {'revision range' if allow_range else 'ref'}; "
                              "use a commit id, branch or tag" + (" (A..B)" if allow_range else ""), field=field)
    return value


def resolve_commit(repo: Repo, ref: str) -> tuple[str, bool]:
    """(commit id, True) when the repository can say; (``ref`` as given, False) otherwise."""
    if repo.root is not None:
        found = git(repo.root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if found:
            return found.strip(), True
    return ref, False


@dataclass(frozen=True)
class Commit:
    id: str
    date: str
    subject: str
    body: str


def log(repo: Repo, rev_range: str, limit: int) -> list[Commit]:
    """Up to ``limit`` commits of ``rev_range`` (default: HEAD's history), newest first, merges left out."""
    assert repo.root is not None
    out = git(repo.root, "log", "--no-merges", "--no-color", f"--max-count={limit}",
              "--format=%H%x1f%aI%x1f%s%x1f%b%x1e", *([rev_range] if rev_range else []), "--")
    if out is None:
        raise InvalidArgument(f"rev_range: git cannot read {rev_range or 'HEAD'!r} in {repo.name}; give a range of "
                              "this repository such as main~20..main", field="rev_range")
    commits = []
    for record in out.split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) == 4 and fields[0]:
            commits.append(Commit(fields[0], fields[1], fields[2][:300], fields[3][:COMMIT_BODY]))
    return commits


def mined_commits(graph: GraphStore, project: str, repo: Repo) -> list[str]:
    """The commits mined already (kept on the repository's ``_code_ingest.cursor`` item, newest last)."""
    return _cursor(graph, project, repo).get("mined", [])


def remember_mined(graph: GraphStore, project: str, repo: Repo, commits: list[str]) -> None:
    """Add ``commits`` to the mined ones (inside the caller's transaction), keeping the last ``MAX_MINED``."""
    _remember(graph, project, repo, "mined", commits)


def session_digest(source: str, transcript: str) -> str:
    """What marks a session's transcript as mined: the same source with the same text is the same work."""
    return hashlib.sha256(f"{source}\0{transcript}".encode()).hexdigest()[:32]


def mined_sessions(graph: GraphStore, project: str, repo: Repo) -> list[str]:
    """The digests of the session transcripts mined already for this repository (newest last)."""
    return _cursor(graph, project, repo).get("sessions", [])


def remember_session(graph: GraphStore, project: str, repo: Repo, digest: str) -> None:
    """Mark a transcript as mined (inside the caller's transaction), keeping the last ``MAX_MINED``."""
    _remember(graph, project, repo, "sessions", [digest])


def _cursor(graph: GraphStore, project: str, repo: Repo) -> dict[str, list[str]]:
    try:
        item = graph.get_item(f"kref://{decisions_project(project)}/{repo.name}/{CURSOR}")
    except (NotFound, InvalidArgument):
        return {}
    return {key: records.json_strings(item.metadata.get(key)) for key in ("mined", "sessions")}


def _remember(graph: GraphStore, project: str, repo: Repo, key: str, values: list[str]) -> None:
    known = _cursor(graph, project, repo).get(key, [])
    merged = [c for c in dict.fromkeys([*known, *values])][-MAX_MINED:]
    graph.ensure_project(decisions_project(project))
    space = graph.ensure_space(f"/{decisions_project(project)}/{repo.name}").path
    name, kind = CURSOR.split(".")
    item = graph.create_item(space, name, kind)
    graph.update_item_metadata(item.kref, {key: json.dumps(merged)})


@dataclass(frozen=True)
class Decision:
    title: str
    decision: str
    rationale: str = ""
    why_question: str = ""
    symbols: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    evidence: tuple[dict[str, str], ...] = ()
    confidence: str = ""
    source: str = "agent"


def store(graph: GraphStore, project: str, repo: Repo, commit: str, resolved: bool,
          decisions: list[Decision]) -> list[dict[str, Any]]:
    """Each decision as a revision of its ``decision`` item (the same title and decision again is a new
    revision of the same item), all in one transaction (the caller's, when it runs inside ``graph.atomic``)."""
    target = decisions_project(project)

    def write() -> list[dict[str, Any]]:
        graph.ensure_project(target)
        space = graph.ensure_space(f"/{target}/{repo.name}").path
        stored = []
        for d in decisions:
            item = graph.create_item(space, memory_item_name(d.title, d.decision), KIND)
            summary = " ".join(p for p in (d.decision, d.rationale) if p)
            meta = {"type": "decision", "memory_type": "decision", "title": d.title, "summary": summary[:4000],
                    "decision": d.decision, "rationale": d.rationale, "why_question": d.why_question,
                    "symbols": json.dumps(list(d.symbols)), "files": json.dumps(list(d.files)),
                    "evidence": json.dumps(list(d.evidence)), "confidence": d.confidence, "commit": commit,
                    "commit_resolved": str(resolved).lower(), "repo": repo.name, "source": d.source}
            revision = graph.create_revision(item.kref, {k: v for k, v in meta.items() if v})
            stored.append({"item_kref": item.kref, "revision_kref": revision.kref, "title": d.title,
                           "files": list(d.files)})
        return stored

    return graph.atomic(write)


def recall(graph: GraphStore, project: str, *, question: str = "", file: str = "", line: int | None = None,
           commit: str = "", repo: str = "", limit: int = 5) -> list[dict[str, Any]]:
    """The decisions that answer: those anchored to ``file`` (and a line range holding ``line``) when a file is
    given, else those sharing words with ``question``; ``commit`` and ``repo`` narrow and rank."""
    context = decisions_project(project) + (f"/{slug(repo, 64)}" if repo else "")
    try:
        page = graph.search_items(context_filter=context, kind_filter=KIND, page_size=MAX_DECISIONS)
    except InvalidArgument:
        return []
    current = graph.current_revisions([i.kref for i in page.items])
    asked = set(_TOKENS.findall(question.casefold()))
    scored = []
    for revision in current.values():
        if revision.deprecated:
            continue
        score = 0.0
        if file:
            hit = _file_score(records.json_strings(revision.metadata.get("files")), file, line)
            if not hit:
                continue
            score += hit
        if commit:
            stored = revision.metadata.get("commit", "")
            if stored and (stored.startswith(commit) or commit.startswith(stored)):
                score += 0.5
        if asked:
            words = set(_TOKENS.findall(" ".join(revision.metadata.get(k, "") for k in (
                "title", "decision", "rationale", "why_question", "symbols")).casefold()))
            overlap = len(asked & words) / len(asked)
            if not file and not overlap:
                continue
            score += overlap
        scored.append((score, revision))
    scored.sort(key=lambda pair: pair[1].created_at, reverse=True)  # the newest first among equals
    scored.sort(key=lambda pair: -pair[0])
    return [view(revision, score) for score, revision in scored[:limit]]


def view(revision: Revision, score: float) -> dict[str, Any]:
    m = revision.metadata
    return {"kref": revision.kref, "item_kref": revision.item_kref, "title": m.get("title", ""),
            "decision": m.get("decision", ""), "rationale": m.get("rationale", ""),
            "why_question": m.get("why_question", ""), "files": records.json_strings(m.get("files")),
            "symbols": records.json_strings(m.get("symbols")), "evidence": _json_objects(m.get("evidence")),
            "confidence": m.get("confidence", ""), "commit": m.get("commit", ""),
            "commit_resolved": m.get("commit_resolved") == "true", "repo": m.get("repo", ""),
            "source": m.get("source", ""), "created_at": revision.created_at, "score": round(score, 4)}


def markdown(found: list[dict[str, Any]]) -> str:
    if not found:
        return "No recorded decision matches."
    blocks = []
    for d in found:
        lines = [f"### {d['title']}", "", d["decision"]]
        if d["rationale"]:
            lines += ["", f"Why: {d['rationale']}"]
        for e in d["evidence"]:
            lines.append(f"- {e.get('kind', 'evidence')}: {e.get('text', '')}")
        anchor = ", ".join(d["files"]) or "no files"
        lines += ["", f"<sub>{anchor} · commit {d['commit'][:12] or 'unknown'} · {d['kref']}</sub>"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _file_score(files: list[str], wanted: str, line: int | None) -> float:
    wanted = wanted.strip().lstrip("./")
    best = 0.0
    for entry in files:
        path, start, end = entry, None, None
        if match := _LINES.match(entry):
            path, start = match.group(1), int(match.group(2))
            end = int(match.group(3) or start)
        path = path.strip().lstrip("./")
        if not (path == wanted or path.endswith("/" + wanted) or wanted.endswith("/" + path)):
            continue
        score = 1.0
        if line is not None and start is not None:
            score += 0.5 if start <= line <= (end or start) else -0.25
        best = max(best, score)
    return best


def _json_objects(text: str | None) -> list[dict[str, str]]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
