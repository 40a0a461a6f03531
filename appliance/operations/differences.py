"""Where the appliance's tool schemas differ from Kumiho's reference catalogue, and why: one place, checked by
tests/operations/test_reference_schemas.py (a difference not listed here fails it, and so does a listed one
that no longer exists). Bounds (``maxLength``, ``maxItems``, …) are the appliance's additions everywhere and
are not listed.

Keys are ``(tool, "<property path>:<aspect>")`` with aspect one of ``type``, ``default``, ``enum``,
``required``, ``missing`` (the reference has the property, the appliance not), ``extra`` (the other way
round), or ``(tool, ":<hint>")`` for an annotation."""

from __future__ import annotations

_SEED_SESSION = "the seed makes session_id required on reflect: a reflect must name the session it closes"
_SEED_TAG = "the seed's default tag is published, the tag that marks the memory agents should read"
_CAPTURE_TYPES = ("capture types are open: the seed's ten plus other lowercase words (lesson, discovery…), "
                  "checked by a pattern instead of an enum")

DIFFERENCES: dict[tuple[str, str], str] = {
    ("kumiho_memory_reflect", "session_id:required"): _SEED_SESSION,
    ("kumiho_memory_reflect", "captures[].type:enum"): _CAPTURE_TYPES,
    ("kumiho_get_revision_by_tag", "tag:required"): _SEED_TAG,
    ("kumiho_get_revision_by_tag", "tag:default"): _SEED_TAG,
    ("kumiho_delete_edge", "edge_type:enum"): "delete_edge takes SUPPORTS too: every edge type create_edge can "
                                              "write can be deleted again",
}
