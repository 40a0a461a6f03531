"""The parameter types operations share, each with its bound: an agent that exceeds one gets an error naming
the field and the limit (tools/list shows every bound in the tool's input schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

DEFAULT_PROJECT = "CognitiveMemory"

Kref = Annotated[str, Field(max_length=1024)]
SpacePath = Annotated[str, Field(max_length=512)]
Name = Annotated[str, Field(max_length=128)]  # a project, space, item or bundle name; a kind; an artifact name
Tag = Annotated[str, Field(max_length=128)]
SessionId = Annotated[str, Field(max_length=256)]
UserId = Annotated[str, Field(max_length=256)]
Context = Annotated[str, Field(max_length=200)]  # a session's context label ("personal", "work", …)
Query = Annotated[str, Field(max_length=8192)]
MemoryType = Annotated[str, Field(max_length=64)]
EdgeType = Annotated[str, Field(max_length=50)]
Topic = Annotated[str, Field(max_length=200)]
AuthToken = Annotated[str, Field(max_length=8192, description="accepted for Kumiho's clients and ignored: a local "
                                 "appliance has no accounts")]

# Where a memory came from and where a decision stands (Kumiho's provenance vocabulary).
Origin = Literal["user", "agent", "imported", "observed", "external", "unknown"]
DecisionState = Literal["proposal", "proposed", "accepted", "rejected", "contested", "superseded", "unknown"]

Krefs = Annotated[list[Kref], Field(max_length=50)]
SpacePaths = Annotated[list[SpacePath], Field(max_length=16)]
MemoryTypes = Annotated[list[MemoryType], Field(max_length=16)]
Tags = Annotated[list[Tag], Field(max_length=8)]
EdgeTypes = Annotated[list[EdgeType], Field(max_length=16)]

# An absent project is the calling client's default project (its X-Kumiho-Project header, else the
# configured default), which the schema documents as Kumiho's default.
Project = Annotated[str | None, Field(max_length=128, json_schema_extra={"default": DEFAULT_PROJECT})]

# Caller metadata: string keys; values are strings, or JSON values that are stored JSON-encoded.
METADATA_KEYS, METADATA_KEY_LENGTH, METADATA_VALUE_LENGTH = 32, 256, 4096
MetadataValue = Annotated[Any, WithJsonSchema({"maxLength": METADATA_VALUE_LENGTH, "maxItems": 64,
                                               "maxProperties": 32})]
Metadata = Annotated[dict[Annotated[str, Field(max_length=METADATA_KEY_LENGTH)], MetadataValue],
                     Field(max_length=METADATA_KEYS)]

# String-valued metadata, as the graph stores it (items, revisions, spaces, edges, bundles)
StringMetadata = Annotated[dict[Annotated[str, Field(max_length=METADATA_KEY_LENGTH)],
                                Annotated[str, Field(max_length=METADATA_VALUE_LENGTH)]],
                           Field(max_length=METADATA_KEYS)]
