"""What an operation is: a name, the words an agent reads, its annotations and one typed input model.

Every front door (MCP today; the admin REST API and Kumiho's gRPC service later) calls the same operations.
The input model is the one definition of an operation's parameters: the MCP input schema is generated from
it (``input_schema``), arguments are checked against that schema (messages that name the field and the fix,
``appliance.operations.validation``) and then handed to the service as an instance of the model, defaults
filled in, so no service re-checks or repeats a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

# Unknown argument names are ignored (Kumiho's clients send ones a local appliance has no use for, such as
# ``auth_token``), but an arguments object holds at most this many keys, a nested object (a capture) this many.
MAX_ARGUMENTS = 64
MAX_NESTED_KEYS = 16


class Input(BaseModel):
    """The base of every operation's input: unknown keys ignored (bounded by ``MAX_ARGUMENTS``), immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    # Set by an input whose reference schema closes it (``additionalProperties: false``): unknown keys refused.
    closed: ClassVar[bool] = False


class ClosedInput(Input):
    """An input that refuses unknown keys, as its reference schema does."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    closed: ClassVar[bool] = True


@dataclass(frozen=True)
class Operation:
    """One operation of the catalogue. ``gate`` names the environment switch that must be on for a front
    door to offer it (Kumiho serves its code-decision tools only with ``KUMIHO_MEMORY_DECISIONS=1``)."""

    name: str
    title: str
    description: str
    input: type[Input]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    gate: str | None = None
    family: str = field(default="", compare=False)

    @property
    def annotations(self) -> dict[str, Any]:
        return {"title": self.title, "readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent, "openWorldHint": False}

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        return input_schema(self.input)


def input_schema(model: type[Input]) -> dict[str, Any]:
    """The JSON schema agents see: plain JSON Schema without titles or ``$ref`` (several agent hosts do not
    resolve references), optional fields as their type (no ``null``), a default only where one is useful."""
    schema = model.model_json_schema(schema_generator=_PlainSchema)
    definitions = schema.pop("$defs", {})
    inlined: dict[str, Any] = _inline(schema, definitions)
    inlined.setdefault("required", [])
    if "maxProperties" in inlined:
        inlined["maxProperties"] = MAX_ARGUMENTS
    return inlined


class _PlainSchema(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        generated = super().model_schema(schema)
        generated.pop("title", None)
        generated.pop("description", None)  # a model's docstring is for its readers, not for agents
        if generated.get("additionalProperties") is not False:
            generated["maxProperties"] = MAX_NESTED_KEYS
        return generated

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        generated = super().dict_schema(schema)
        if generated.get("additionalProperties") is True:  # any JSON object: plain {"type": "object"}
            generated.pop("additionalProperties")
        return generated

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])  # `X | None = None`: the agent may leave it out

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        generated = super().default_schema(schema)
        if generated.get("default", 0) is None:
            generated.pop("default")
        return generated


def _inline(value: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        if "$ref" in value:
            name = value["$ref"].rsplit("/", 1)[-1]
            return _inline({**definitions[name], **{k: v for k, v in value.items() if k != "$ref"}}, definitions)
        return {key: _inline(item, definitions) for key, item in value.items()}
    if isinstance(value, list):
        return [_inline(item, definitions) for item in value]
    return value
