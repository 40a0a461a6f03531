"""The web UI at ``/`` and the interactive API docs at ``/api/docs``: static files of ``appliance/ui/``, no build step.

Everything a page loads comes from this package (the vendored libraries are listed in ``ui/vendor/VENDORED.md``),
so the UI works on an offline machine. Litestar's own docs pages load their scripts from a CDN and start them with
an inline script; ``/api/docs`` is instead a static page whose start script is a file, so that every UI response
can carry a Content-Security-Policy without ``'unsafe-inline'`` scripts.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from litestar import Response, Router, get
from litestar.datastructures import ResponseHeader
from litestar.enums import MediaType
from litestar.response import Redirect
from litestar.static_files import create_static_files_router

UI_ROOT = Path(__file__).resolve().parent.parent / "ui"

# Scripts, styles, images and API calls only from the appliance itself. Inline styles stay allowed: the graph
# library and Swagger UI set a few (they cannot run code); inline scripts, eval and framing do not.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    ResponseHeader(name="Content-Security-Policy", value=CONTENT_SECURITY_POLICY),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    ResponseHeader(name="Referrer-Policy", value="no-referrer"),
    ResponseHeader(name="X-Frame-Options", value="DENY"),
]


PUBLIC_PAGES = frozenset({"/", "/ui", "/ui/", "/api/docs"})
PUBLIC_PREFIXES = ("/ui/assets/", "/ui/vendor/")


def public_page(method: str, path: str) -> bool:
    """Whether a request is for the UI's shell: the pages, scripts and style sheets of this package, which hold no
    data. They load without the token because a browser cannot send one when it opens a page; every API call the
    pages make carries it (the console asks for it on the first 401)."""
    if method not in ("GET", "HEAD") or "/." in path or "//" in path or "\\" in path:
        return False
    return path in PUBLIC_PAGES or path.startswith(PUBLIC_PREFIXES)


@cache
def _page(name: str) -> bytes:
    return (UI_ROOT / name).read_bytes()


def _html(name: str) -> Response[bytes]:
    # no-cache: a browser revalidates, so a new appliance version never runs an old page against a new API
    return Response(_page(name), media_type=MediaType.HTML, headers={"Cache-Control": "no-cache"})


@get("/", include_in_schema=False, sync_to_thread=False)
def index() -> Response[bytes]:
    return _html("index.html")


@get(["/ui", "/ui/"], include_in_schema=False, sync_to_thread=False)
def ui_root() -> Redirect:
    return Redirect("/")


@get("/api/docs", include_in_schema=False, sync_to_thread=False)
def api_docs() -> Response[bytes]:
    return _html("docs.html")


def _with_security_headers(response: Response[Any]) -> Response[Any]:
    # the static-files routers answer with file responses, which a router's response_headers do not reach
    for header in SECURITY_HEADERS:
        response.headers.setdefault(header.name, header.value or "")
    return response


def ui_router() -> Router:
    """The pages and their assets (``/ui/assets/...``: the UI's own scripts and styles; ``/ui/vendor/...``: the
    vendored libraries), every response with the security headers above."""
    assets = create_static_files_router("/ui/assets", directories=[UI_ROOT / "assets"], name="ui-assets",
                                        after_request=_with_security_headers)
    vendor = create_static_files_router("/ui/vendor", directories=[UI_ROOT / "vendor"], name="ui-vendor",
                                        after_request=_with_security_headers)
    return Router("/", route_handlers=[index, ui_root, api_docs, assets, vendor], response_headers=SECURITY_HEADERS,
                  include_in_schema=False)
