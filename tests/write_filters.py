"""The seed's write filters as one table of inputs, checked against Revka's own functions
(src/memory/mod.rs: ``should_skip_autosave_content`` trims Unicode white space, lower-cases in ASCII and tests
``[cron:``, ``[heartbeat task``, ``[distilled_`` as prefixes and ``distilled_index_sig:`` anywhere;
``is_assistant_autosave_key`` trims, lower-cases and tests ``assistant_resp`` / ``assistant_resp_*``).
The pure tests, the Memory API's REST route and ``kumiho_memory_store`` over MCP all run this table."""

from __future__ import annotations

# (content, why it is skipped): every one of them Revka's should_skip_autosave_content drops
SKIPPED_CONTENT: tuple[tuple[str, str], ...] = (
    ("[cron:hourly] patrol check", "cron output is never stored"),
    ("[CRON:x] upper case", "cron output is never stored"),
    ("  \n\t[cron:x] after white space", "cron output is never stored"),
    ("\u3000\u00a0[cron:x] after Unicode spaces", "cron output is never stored"),
    ("[Heartbeat Task | high] Execute scheduled patrol", "heartbeat task output is never stored"),
    ("[heartbeat task] lower case", "heartbeat task output is never stored"),
    ("[HEARTBEAT TASK 3] upper case", "heartbeat task output is never stored"),
    ("[distilled_memory_chunk 1/2] summary", "distilled content is never stored again"),
    ("[DISTILLED_MEMORY_CHUNK 1/2] upper case", "distilled content is never stored again"),
    ("notes distilled_index_sig:abc123", "distilled index signatures are never stored"),
    ("notes DISTILLED_INDEX_SIG:abc123", "distilled index signatures are never stored"),
)
SKIPPED_BLANK: tuple[str, ...] = ("", "   \n", "\u00a0\u2003\u3000")  # Rust's trim leaves nothing

# content Revka keeps: the markers elsewhere than at the start, near misses, and what Rust's trim or ASCII
# lower-casing does not touch
KEPT_CONTENT: tuple[str, ...] = (
    "User prefers concise answers.",
    "the cron job [cron:x] ran",  # only a prefix counts
    "summary of [distilled_42] notes",  # so for distilled chunks
    "[cron :x] a space before the colon",
    "Heartbeat Task without a bracket",
    "[heartbeat] no task",
    "distilled water",
    "distilled_index_sig without its colon",
    "\u200b[cron:x] after a zero-width space",  # no white space for Rust
    "\x1c[cron:x] after a file separator",  # Python's strip would remove it; Rust's trim does not
    "[heartbeat tas\u212a] with the Kelvin sign",  # lower-cases to k in Unicode, not in ASCII
)

# auto-save keys (the content is a plain fact)
SKIPPED_KEYS: tuple[str, ...] = ("assistant_resp", "assistant_resp_1234", "ASSISTANT_RESP_abcd", " assistant_resp ",
                                 "Assistant_Resp")
KEPT_KEYS: tuple[str, ...] = ("assistant_response", "assistant_resp-1", "assistant_respx", "my_assistant_resp",
                              "user_msg_1234")
