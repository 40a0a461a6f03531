"""Run by the Kumiho SDK's Python (its own virtual environment), never imported by the tests: drives the stock
sidecar's own ``RedisMemoryBuffer`` (kumiho-memory) against the appliance, through whichever door its
environment names (``KUMIHO_UPSTASH_REDIS_URL`` or ``KUMIHO_MEMORY_PROXY_URL``), and prints what each buffer
operation returned as one JSON object.

    python sidecar_buffer.py <project> <session id kept> <session id cleared> <user> <day>
"""

import asyncio
import json
import sys

from kumiho_memory.redis_memory import RedisMemoryBuffer


async def main(project: str, kept: str, cleared: str, user: str, day: str) -> dict:
    buffer = RedisMemoryBuffer()
    out: dict = {"door": "redis" if buffer.redis_url else "proxy"}
    try:
        out["add"] = [await buffer.add_message(project=project, session_id=kept, role=role, content=text,
                                               metadata={"channel": "test", "n": i})
                      for i, (role, text) in enumerate([("user", "I take my espresso without sugar."),
                                                        ("assistant", "Noted: espresso, no sugar."),
                                                        ("user", "My api key is sk-abcdefghijklmnopqrstuvwxyz123456")])]
        out["read_last_two"] = await buffer.get_messages(project=project, session_id=kept, limit=2)
        out["read_offset"] = await buffer.get_messages(project=project, session_id=kept, limit=1, offset=2)
        out["read_missing"] = await buffer.get_messages(project=project, session_id="no-such-session", limit=5)
        await buffer.set_session_metadata(project, kept, {"user_id": user, "context": "personal"})
        out["metadata"] = await buffer.get_session_metadata(project, kept)
        await buffer.add_message(project=project, session_id=cleared, role="user", content="to be cleared")
        await buffer.set_session_metadata(project, cleared, {"user_id": user})
        out["listed"] = await buffer.list_sessions(project, limit=20)
        out["sequence"] = [await buffer.next_session_sequence(user_canonical_id=user, date_str=day)
                           for _ in range(2)]
        claim = dict(context="personal", user_canonical_id=user)
        out["claim_first"] = await buffer.set_active_session(**claim, session_id=kept, nx=True)
        out["claim_second"] = await buffer.set_active_session(**claim, session_id=cleared, nx=True)
        out["active"] = await buffer.get_active_session(**claim)
        await buffer.clear_active_session(**claim, only_if=cleared)
        out["active_after_wrong_only_if"] = await buffer.get_active_session(**claim)
        await buffer.clear_active_session(**claim, only_if=kept)
        out["active_after_clear"] = await buffer.get_active_session(**claim)
        await buffer.set_active_session(**claim, session_id=cleared)
        out["active_after_plain_set"] = await buffer.get_active_session(**claim)
        out["generation_before"] = await buffer.get_session_generation(f"host-{user}")
        out["generation_bumped"] = [await buffer.bump_session_generation(f"host-{user}") for _ in range(2)]
        out["generation_after"] = await buffer.get_session_generation(f"host-{user}")
        out["clear"] = await buffer.clear_session(project, cleared)
        out["cleared_read"] = await buffer.get_messages(project=project, session_id=cleared)
        out["cleared_metadata"] = await buffer.get_session_metadata(project, cleared)
        out["listed_after_clear"] = await buffer.list_sessions(project, limit=20)
        try:
            await buffer.add_message(project=project, session_id=kept, role="narrator", content="x")
            out["bad_role"] = "accepted"
        except Exception as exc:  # what the sidecar sees: the door's error text
            out["bad_role"] = f"{type(exc).__name__}: {exc}"
    finally:
        await buffer.close()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:6]))))
