"""The Kumiho data model as plain values (reference §1): what the graph port returns.

Krefs are kept as canonical strings; timestamps are ISO-8601 with an explicit ``+00:00`` offset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

Direction = Literal["outgoing", "incoming", "both"]


@dataclass(frozen=True, slots=True)
class Project:
    project_id: str
    name: str
    description: str
    created_at: str
    updated_at: str
    deprecated: bool
    allow_public: bool
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class Space:
    path: str  # "/project/a/b"
    name: str
    project: str
    parent_path: str  # "" for a project's root space
    type: Literal["root", "sub"]  # "root" = directly under the project
    created_at: str
    modified_at: str
    author: str
    username: str
    metadata: dict[str, str]

    @property
    def kref(self) -> str:
        return "kref:/" + self.path


@dataclass(frozen=True, slots=True)
class Item:
    kref: str
    project: str
    space_path: str
    item_name: str
    kind: str
    created_at: str
    modified_at: str
    author: str
    username: str
    metadata: dict[str, str]
    deprecated: bool

    @property
    def name(self) -> str:
        return f"{self.item_name}.{self.kind}"


@dataclass(frozen=True, slots=True)
class Revision:
    kref: str
    item_kref: str
    number: int
    tags: list[str]
    metadata: dict[str, str]
    created_at: str
    modified_at: str
    author: str
    username: str
    deprecated: bool
    default_artifact: str | None

    @property
    def latest(self) -> bool:
        return "latest" in self.tags

    @property
    def published(self) -> bool:
        return "published" in self.tags


@dataclass(frozen=True, slots=True)
class Artifact:
    kref: str
    name: str
    location: str
    revision_kref: str
    item_kref: str
    created_at: str
    modified_at: str
    author: str
    username: str
    metadata: dict[str, str]
    deprecated: bool


@dataclass(frozen=True, slots=True)
class Edge:
    source_kref: str
    target_kref: str
    edge_type: str
    metadata: dict[str, str]
    created_at: str
    author: str
    username: str


@dataclass(frozen=True, slots=True)
class BundleMember:
    item_kref: str
    added_at: str
    added_by: str
    added_by_username: str
    added_in_revision: int


@dataclass(frozen=True, slots=True)
class BundleChange:
    revision_number: int
    action: Literal["CREATED", "ADDED", "REMOVED"]
    member_item_kref: str
    author: str
    username: str
    created_at: str
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class PathStep:
    revision_kref: str
    edge_type: str
    depth: int


@dataclass(frozen=True, slots=True)
class Reached:
    """A revision reached by a traversal, at its shortest depth, with the path that reached it."""

    revision_kref: str
    depth: int
    path: list[PathStep]

    @property
    def path_types(self) -> list[str]:
        return [step.edge_type for step in self.path]


@dataclass(frozen=True, slots=True)
class Traversal:
    origin: str
    reached: list[Reached]
    truncated: bool


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None
    total_count: int

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def every_item(fetch: Callable[[str | None], Page[T]], limit: int | None = None) -> list[T]:
    """The items of a paged listing, page after page (``fetch(cursor)`` reads one); at most about ``limit``
    when given (the page that reaches it is kept whole)."""
    items: list[T] = []
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        items += page.items
        cursor = page.next_cursor
        if not cursor or (limit is not None and len(items) >= limit):
            return items


@dataclass(frozen=True, slots=True)
class Attribute:
    key: str
    value: str | None
    exists: bool


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a kref names: the entity, its canonical kref and, for item/revision/artifact krefs, the
    revision they lead to."""

    target: Literal["project", "space", "item", "revision", "artifact"]
    kref: str
    project: Project | None = None
    space: Space | None = None
    item: Item | None = None
    revision: Revision | None = None
    artifact: Artifact | None = None
