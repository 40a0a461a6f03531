r"""JSON schema → llama.cpp grammar (GBNF), with two fixes to llama-cpp-python's converter, and answer cleanup.

llama-cpp-python's ``json_schema_to_gbnf`` (a Python port of llama.cpp's converter) differs from
llama.cpp's own in two ways that matter to small models:

* its string characters include raw control characters (``[^"\\]``): a newline inside a string is
  invalid JSON, and random weights find it at once. We use llama.cpp's rule (no ``\x00-\x1F``, ``\x7F``);
* it ignores ``minimum``/``maximum``: an integer of a small range becomes an ``enum`` for the grammar, which
  it does enforce. Other numeric bounds are only checked after generation: prefer integer ranges.

And a schema that bounds nothing (Kumiho's stock sidecar sends such schemas to the OpenAI-compatible endpoint)
lets a small model fill one string until the token limit: measured on the default model, a summary field
repeating for 6,000 tokens. So the grammar bounds what the schema leaves free: a plain string at
``FREE_STRING_CHARS`` characters, an array without bounds at ``FREE_ARRAY_ITEMS`` items. The bounds are written
as GBNF repetitions (``char{0,2000}``): the converter's own form for ``maxLength`` nests one rule per character,
which llama.cpp refuses at these sizes. The answer is still validated against the schema as given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from appliance.core.ports import ModelError

_INTEGER_BOUNDS = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
FREE_STRING_CHARS = 2000
FREE_ARRAY_ITEMS = 64
# the converter's rule for a string with no bounds (shared by every such string), and the tail of an array
# with no bounds: ``"[" space (item ("," space item)*)? "]" space``
_FREE_STRING = 'string ::= "\\"" char* "\\"" space'
_BOUNDED_STRING = f'string ::= "\\"" char{{0,{FREE_STRING_CHARS}}} "\\"" space'
_FREE_ARRAY_TAIL = ')*)? "]" space'
_BOUNDED_ARRAY_TAIL = f'){{0,{FREE_ARRAY_ITEMS - 1}}})? "]" space'
_LOOSE_CHAR = r'char ::= [^"\\] |'
_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def schema_grammar(schema: Mapping[str, Any]) -> str:
    """The GBNF text of ``schema``."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        grammar: str = json_schema_to_gbnf(json.dumps(for_grammar(schema)))  # typed Any by llama-cpp-python
        grammar = grammar.replace(_LOOSE_CHAR, _STRICT_CHAR, 1)
        return grammar.replace(_FREE_STRING, _BOUNDED_STRING).replace(_FREE_ARRAY_TAIL, _BOUNDED_ARRAY_TAIL)
    except (ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise ModelError(f"cannot make a grammar from the schema: {exc}") from None


def for_grammar(schema: Any) -> Any:
    """``schema`` with every integer of a small range (minimum..maximum, at most 256 values) as an enum.

    llama-cpp-python's schema converter ignores numeric bounds; an enum it does enforce. Other numeric
    bounds are still checked after generation (``validate_output``): prefer integer ranges in schemas.
    """
    if isinstance(schema, list):
        return [for_grammar(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: for_grammar(v) for k, v in schema.items()}
    if out.get("type") != "integer" or "enum" in out:
        return out
    lows = [math.ceil(out["minimum"])] if "minimum" in out else []
    lows += [math.floor(out["exclusiveMinimum"]) + 1] if "exclusiveMinimum" in out else []
    highs = [math.floor(out["maximum"])] if "maximum" in out else []
    highs += [math.ceil(out["exclusiveMaximum"]) - 1] if "exclusiveMaximum" in out else []
    if lows and highs and 0 <= min(highs) - max(lows) < 256:
        out = {k: v for k, v in out.items() if k not in _INTEGER_BOUNDS}
        out["enum"] = list(range(max(lows), min(highs) + 1))
    return out


def clean_strings(value: Any) -> Any:
    """Strings without lone surrogates (a model may write a lone \\ud800 escape): UTF-8 cannot store them."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [clean_strings(v) for v in value]
    if isinstance(value, dict):
        return {clean_strings(k): clean_strings(v) for k, v in value.items()}
    return value
