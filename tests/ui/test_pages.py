"""The web UI's and the API docs' pages over real HTTP: every asset they load is served by the appliance itself
(nothing from another host), under a Content-Security-Policy that allows no inline script; the vendored libraries
are the files VENDORED.md names, byte for byte; the front door guards the pages like every other route."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from appliance.admin_api.ui import CONTENT_SECURITY_POLICY, UI_ROOT, public_page
from tests.inprocess import InProcess, serve_in_process

PAGES = ("/", "/api/docs")
OWN_SOURCES = [p for p in UI_ROOT.rglob("*") if p.suffix in (".html", ".js", ".css") and "vendor" not in p.parts]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("ui") / "data", None) as running:
        yield running


class Tags(HTMLParser):
    """Scripts (with and without src), style sheets and event-handler attributes of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.inline_scripts = 0
        self.styles: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "script":
            self._in_script = True
            if found.get("src"):
                self.scripts.append(str(found["src"]))
        if tag == "link" and found.get("rel") == "stylesheet":
            self.styles.append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_scripts += 1


def parsed(html: str) -> Tags:
    tags = Tags()
    tags.feed(html)
    return tags


def module_graph(app: InProcess, entry: str) -> set[str]:
    """Every JS module reachable from ``entry`` by its static imports, each fetched (200, JavaScript)."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        response = httpx.get(app.base_url + url, timeout=10)
        assert response.status_code == 200, url
        assert "javascript" in response.headers["content-type"], (url, response.headers["content-type"])
        base = url.rsplit("/", 1)[0]
        for target in re.findall(r'^import [^;]*? from "(\.{1,2}/[^"]+)";', response.text, re.M):
            parts = [*base.split("/"), *target.split("/")]
            resolved: list[str] = []
            for part in parts:
                if part == "..":
                    resolved.pop()
                elif part != ".":
                    resolved.append(part)
            todo.append("/".join(resolved))
    return seen


@pytest.mark.parametrize("path", PAGES)
def test_a_page_and_every_asset_it_loads_come_from_the_appliance_under_the_policy(app: InProcess, path: str) -> None:
    page = httpx.get(app.base_url + path, timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY and "unsafe-eval" not in CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    tags = parsed(page.text)
    assert tags.inline_scripts == 0 and tags.handlers == []  # nothing the policy would block
    assert tags.scripts and tags.styles
    for url in tags.scripts + tags.styles:
        assert url.startswith("/ui/"), f"{path} loads {url} from outside the package"
        asset = httpx.get(app.base_url + url, timeout=10)
        assert asset.status_code == 200, url
        assert asset.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        kind = "css" if url.endswith(".css") else "javascript"
        assert kind in asset.headers["content-type"], (url, asset.headers["content-type"])


def test_every_module_of_the_console_is_served(app: InProcess) -> None:
    modules = module_graph(app, "/ui/assets/app.js")
    own = {"/ui/assets/" + p.relative_to(UI_ROOT / "assets").as_posix() for p in OWN_SOURCES
           if p.suffix == ".js" and p.name != "docs.js"}
    assert modules == own  # every file is used, every import resolves


def test_the_console_names_no_other_host() -> None:
    for source in OWN_SOURCES:
        text = re.sub(r"^\s*//.*$", "", source.read_text(), flags=re.M)  # code, not its comments
        assert not re.search(r"(?<![\\/])//[a-z0-9-]+\.[a-z]", text), source
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text, source


def test_the_vendored_files_are_the_ones_vendored_md_lists() -> None:
    vendor = UI_ROOT / "vendor"
    listed = dict(re.findall(r"^\| `([^`]+)` \| \d+ \| `([0-9a-f]{64})` \|$", (vendor / "VENDORED.md").read_text(),
                             re.M))
    present = {p.relative_to(vendor).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in vendor.rglob("*") if p.is_file() and p.name != "VENDORED.md"}
    assert present == listed
    for library in ("swagger-ui-dist", "force-graph"):
        assert (vendor / library / "LICENSE").is_file()


def test_the_ui_paths_stay_inside_the_package(app: InProcess) -> None:
    for path in ("/ui/assets/../../admin_api/ui.py", "/ui/assets/%2e%2e/%2e%2e/app.py", "/ui/vendor/../index.html",
                 "/ui/assets/missing.js"):
        response = httpx.get(app.base_url + path, timeout=10)
        assert response.status_code == 404, path
        assert "def " not in response.text
    assert httpx.get(app.base_url + "/ui", timeout=10).headers.get("location") == "/"


def test_the_front_door_guards_the_pages(app: InProcess) -> None:
    rebound = httpx.get(app.base_url + "/", headers={"Host": "attacker.example"}, timeout=10)
    assert rebound.status_code == 421
    framed = httpx.get(app.base_url + "/ui/assets/app.js", headers={"Origin": "https://attacker.example"}, timeout=10)
    assert framed.status_code == 403


def test_the_pages_are_not_api_operations(app: InProcess) -> None:
    paths = httpx.get(app.base_url + "/api/schema/openapi.json", timeout=10).json()["paths"]
    assert not [p for p in paths if p == "/" or p.startswith(("/ui", "/api/docs"))]


def test_the_docs_page_starts_swagger_on_the_served_schema() -> None:
    script = (UI_ROOT / "assets" / "docs.js").read_text()
    assert '"/api/schema/openapi.json"' in script and "validatorUrl: null" in script
    assert Path(UI_ROOT / "vendor" / "swagger-ui-dist" / "swagger-ui-bundle.js").stat().st_size > 1_000_000


def test_only_the_ui_shell_loads_without_the_token(tmp_path: Path) -> None:
    """Beyond loopback every request needs the token, but a browser opening the console cannot send one: the
    pages and their assets (no data in them) load without it; the API calls they make do not."""
    with serve_in_process(tmp_path / "data", None, host="0.0.0.0") as guarded:  # the guard on; served on loopback
        for path in ("/", "/api/docs", "/ui/assets/app.js", "/ui/vendor/force-graph/force-graph.min.js"):
            assert httpx.get(guarded.base_url + path, timeout=10).status_code == 200, path
        for method, path in (("GET", "/api/v1/search?q=tea"), ("GET", "/api/schema/openapi.json"), ("POST", "/"),
                             ("GET", "/ui/assets/../../api/_ready"), ("GET", "//api/_ready")):
            response = httpx.request(method, guarded.base_url + path, timeout=10)
            assert response.status_code == 401, (method, path, response.status_code)
    assert not public_page("DELETE", "/ui/assets/app.js") and not public_page("GET", "/ui/assets/.hidden")
