"""What a search asks for, independent of the index that answers it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from appliance.core import kref as krefs

Mode = Literal["hybrid", "vector", "text"]


@dataclass(frozen=True)
class SearchFilter:
    """Pre-filters. ``spaces`` match by path segments: ``/P/a`` selects ``/P/a`` and ``/P/a/b`` but not
    ``/P/ab``; with ``exact_spaces`` only ``/P/a`` itself. Several values in one field mean any of them."""

    project: str | None = None
    spaces: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    memory_types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    include_deprecated: bool = False
    exact_spaces: bool = False  # the Memory API's namespaces: the default one's space holds the others' spaces

    def __post_init__(self) -> None:
        normal = tuple(krefs.space_path(krefs.parse_space_path(s, "space_paths")) for s in self.spaces)
        object.__setattr__(self, "spaces", normal)


@dataclass(frozen=True)
class SearchRequest:
    query: str
    filter: SearchFilter = field(default_factory=SearchFilter)
    mode: Mode = "hybrid"
    limit: int = 10
    min_score: float = 0.0


def ancestors(space: str) -> list[str]:
    """``/P/a/b`` → ``["/P", "/P/a", "/P/a/b"]``: what a space-prefix filter matches against."""
    parts = space.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


# ``surrounding_text`` (last): the conversation around a memory, e.g. the message a stored turn answers. A turn
# alone often lacks what a question names ("pottery class" is in the question it answers, not in "I loved it!"):
# indexed with it, the turn is found by it, while recall still shows the memory's own summary.
SEARCH_KEYS = ("title", "summary", "content", "text", "topics", "keywords", "entities", "facts", "events",
               "decisions", "implications", "user_text", "assistant_text", "surrounding_text")


# The version of what ``searchable_text`` builds: an index built with another version is rebuilt on open (its
# rows' texts, and so their vectors and terms, would differ from what new rows get). A bump re-embeds every
# revision on the first start after an upgrade (minutes at 100k), so only a change to existing rows' texts
# bumps it: adding ``surrounding_text`` did not (no memory written before carried that key), nor did leaving out
# repeated values (a row written before keeps its repeated words until its revision is indexed again: the same
# words and meaning, so old and new rows rank alike; a bump would re-embed 100k rows to save nothing).
TEXT_VERSION = 1


def searchable_text(item_name: str, metadata: dict[str, str], tags: list[str]) -> str:
    """The text a revision is found by: its semantic metadata in a fixed order, else every value. A value
    another one already says (the Memory API's ``summary`` is its ``content``; a title is often the summary's
    first words) is left out: repeated, it doubled the tokens the embedder reads for no new meaning."""
    values = _distinct([metadata[k] for k in SEARCH_KEYS if metadata.get(k)])
    if not values:
        values = [v for k, v in sorted(metadata.items()) if v and k not in ("schema", "type")]
        values = values or [item_name.replace("-", " ")]
    user_tags = [t for t in tags if t not in ("latest", "published")]
    return "\n".join(values + ([" ".join(user_tags)] if user_tags else []))


def _distinct(values: list[str]) -> list[str]:
    """``values`` without those another value starts with: an equal one, a shorter one ending at a word's end
    ("Coffee" before "Coffee with oat milk"), or a cut one (a trailing ellipsis: "Drawing flowers is one of my…").
    The first of equal values stays, in its place."""
    texts = [v.strip() for v in values]
    kept = []
    for i, (value, text) in enumerate(zip(values, texts, strict=True)):
        stem = text.removesuffix("…").removesuffix("...").rstrip()
        if stem and text not in texts[:i] and not any(_starts(other, stem, cut=stem != text)
                                                     for j, other in enumerate(texts) if j != i):
            kept.append(value)
    return kept


def _starts(text: str, stem: str, *, cut: bool) -> bool:
    """Whether ``text`` is longer than ``stem`` and begins with it, at a word's end unless ``stem`` was cut."""
    if len(text) <= len(stem) or not text.startswith(stem):
        return False
    return cut or not (text[len(stem)].isalnum() and stem[-1].isalnum())
