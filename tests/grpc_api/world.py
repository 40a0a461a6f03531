"""Projects, spaces and items for the gRPC tests, made through the appliance's MCP tools (another front door of
the same store), so that each test file exercises only its own methods."""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession

from tests.mcp_api.clients import call, in_http_session


def build(base_url: str, project: str, spaces: tuple[str, ...] = ("s",),
          items: tuple[tuple[str, str, str], ...] = ()) -> list[str]:
    """Project ``project`` with ``spaces`` under it and ``items`` (space, name, kind) in them, in one MCP session;
    returns the items' krefs."""
    async def steps(session: ClientSession) -> list[str]:
        await _ok(session, "kumiho_create_project", name=project)
        for space in spaces:
            parent, _, name = f"/{project}/{space}".rpartition("/")
            await _ok(session, "kumiho_create_space", project_name=project, space_name=name, parent_path=parent)
        made = []
        for space, name, kind in items:
            answer = await _ok(session, "kumiho_create_item", space_path=f"/{project}/{space}", item_name=name,
                               kind=kind)
            made.append(answer["item"]["kref"])
        return made

    return in_http_session(base_url, steps)  # type: ignore[no-any-return]


def tool(base_url: str, tool_name: str, **arguments: Any) -> dict[str, Any]:
    """One MCP tool call's JSON result."""
    async def steps(session: ClientSession) -> dict[str, Any]:
        return await call(session, tool_name, **arguments)

    return in_http_session(base_url, steps)  # type: ignore[no-any-return]


async def _ok(session: ClientSession, tool_name: str, **arguments: Any) -> dict[str, Any]:
    answer = await call(session, tool_name, **arguments)
    assert "error" not in answer, answer
    return answer
