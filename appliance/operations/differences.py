"""Where the appliance's tool schemas differ from Kumiho's reference catalogue, and why: one place, checked by
tests/operations/test_reference_schemas.py (a difference not listed here fails it, and so does a listed one
that no longer exists). Bounds (``maxLength``, ``maxItems``, …) are the appliance's additions everywhere and
are not listed.

Keys are ``(tool, "<property path>:<aspect>")`` with aspect one of ``type``, ``default``, ``enum``,
``required``, ``missing`` (the reference has the property, the appliance not), ``extra`` (the other way
round), or ``(tool, ":<hint>")`` for an annotation."""

from __future__ import annotations

# (the reasons are shown to users in docs/mcp-tools.md: plain words)
_SEED_SESSION = "required here: a reflect names the session it belongs to (Kumiho's server makes it optional)"
_SEED_TAG = ("optional here and `published` by default, the revision agents should read (Kumiho's server "
             "requires a tag)")
_CAPTURE_TYPES = ("open: the ten usual capture types plus any other lowercase word (lesson, discovery, …), "
                  "checked by a pattern instead of a fixed list")

DIFFERENCES: dict[tuple[str, str], str] = {
    ("kumiho_memory_reflect", "session_id:required"): _SEED_SESSION,
    ("kumiho_memory_reflect", "captures[].type:enum"): _CAPTURE_TYPES,
    ("kumiho_get_revision_by_tag", "tag:required"): _SEED_TAG,
    ("kumiho_get_revision_by_tag", "tag:default"): _SEED_TAG,
    ("kumiho_delete_edge", "edge_type:enum"): "SUPPORTS is accepted too: every edge type "
                                              "kumiho_create_edge writes can be deleted again",
}
