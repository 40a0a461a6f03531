"""The web UI in headless chromium against a real ``kumiho-ce serve`` with memories stored through MCP: the
dashboard, search, a memory with its provenance and Markdown text, deprecate and restore behind a confirmation,
the live event feed, the graph view, the API docs, the token prompt, and keyboard use. Every page is checked for
script errors, Content-Security-Policy violations and requests to other hosts.

The long test (``make test-browser``) draws the graph at 10,000 memories, prints its figures as JSON and takes
the screenshots of docs/screenshots/."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from tests.appliance_process import Running, free_port, serve
from tests.mcp_api.clients import call
from tests.ui.browser import SCREENSHOTS, Watched, browser, watched_page
from tests.ui.seed import BULK_PROJECT, Seeded, mcp_steps, seed_bulk, seed_one, seed_through_mcp

pytest.importorskip("playwright", reason="pip install -e '.[test]' installs Playwright")

WAIT_MS = 30_000  # the longest a step may take before the test fails (a bound, not a speed assertion)


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, Seeded]]:
    with serve(tmp_path_factory.mktemp("ui") / "data") as running:
        yield running, seed_through_mcp(running.base_url)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as launched:
        yield launched


@pytest.fixture
def page(chromium: Any, appliance: tuple[Running, Seeded]) -> Iterator[Watched]:
    with watched_page(chromium, appliance[0].base_url) as watched:
        yield watched
        watched.assert_clean()


def inspect(running: Running, kref: str) -> dict[str, Any]:
    response = httpx.get(running.base_url + "/api/v1/inspect", params={"kref": kref}, timeout=30)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def test_the_dashboard_shows_health_counts_index_model_and_jobs(page: Watched,
                                                                appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    p: Any = page.page
    p.goto(running.base_url + "/")
    p.wait_for_function("""() => [...document.querySelectorAll('.card-body')].every(
        (body) => body.textContent && !body.textContent.includes('Loading'))""", timeout=WAIT_MS)
    for card in ("health", "index", "model", "stats", "jobs"):
        body = p.locator(f"#{card} .card-body")
        assert not body.locator(".notice").count(), (card, body.inner_text())  # every part answered
    assert p.locator("#index dd[data-testid=index-lag]").inner_text() == "0"
    assert "items" in p.locator("#stats").inner_text()
    assert p.locator("#health .badge.ok").count() >= 1
    assert p.locator("h1").inner_text() == "Dashboard"
    assert p.evaluate("document.activeElement.tagName") == "H1"  # focus moved to the view for keyboard users


def test_the_dashboard_refreshes_after_the_last_refresh_ends_and_not_while_hidden(
        chromium: Any, appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    with watched_page(chromium, running.base_url) as watched:
        p: Any = watched.page
        held: list[Any] = []  # /stats requests the test lets through when it chooses: a very slow appliance
        p.route(re.compile(r".*/api/v1/stats$"), lambda route: held.append(route))

        def asked() -> int:
            return sum(url.endswith("/api/_health") for url, _ in watched.api_requests)

        def wait_until(condition: Any) -> None:
            deadline = time.monotonic() + WAIT_MS / 1000
            while not condition() and time.monotonic() < deadline:
                p.wait_for_timeout(100)
            assert condition()

        p.goto(running.base_url + "/#/dashboard")
        wait_until(lambda: held)
        held.pop().continue_()  # the first refresh ends…
        wait_until(lambda: asked() == 2 and held)  # …and the next one starts and waits for /stats
        p.wait_for_timeout(7_000)  # past a refresh period
        assert (len(held), asked()) == (1, 2)  # no third refresh piled on the one still running
        held.pop().continue_()
        wait_until(lambda: asked() == 3 and held)  # once it finished, the next one came
        held.pop().continue_()
        p.locator("#stats .card-body dl").wait_for(timeout=WAIT_MS)
        p.evaluate("Object.defineProperty(document, 'hidden', { configurable: true, get: () => true })")
        before = asked()
        p.wait_for_timeout(7_000)  # past a refresh period
        assert asked() == before  # a hidden tab asks nothing
        watched.assert_clean()


def test_a_missing_endpoint_shows_a_not_available_state_instead_of_breaking_the_page(
        chromium: Any, appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    with watched_page(chromium, running.base_url, expected_failures=("status of 404",)) as watched:
        p: Any = watched.page
        # an older appliance: neither the statistics nor their description exist
        p.route(re.compile(r".*/api/v1/stats(\?.*)?$"), lambda route: route.fulfill(
            status=404, content_type="application/problem+json",
            body=json.dumps({"type": "urn:kumiho-ce:problem:not_found", "title": "Not found", "status": 404,
                             "detail": "no route", "code": "not_found", "instance": "/api/v1/stats"})))
        p.route(re.compile(r".*/api/schema/openapi\.json$"), lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps({"openapi": "3.1.0", "paths": {}})))
        p.goto(running.base_url + "/#/dashboard")
        p.locator("#stats .notice.unavailable").wait_for(timeout=WAIT_MS)
        assert "not available" in p.locator("#stats").inner_text()
        p.locator("#index dd[data-testid=index-lag]").wait_for(timeout=WAIT_MS)  # the rest of the page works
        watched.assert_clean()


def test_search_finds_a_memory_and_opens_it(page: Watched, appliance: tuple[Running, Seeded]) -> None:
    running, seeded = appliance
    p: Any = page.page
    p.goto(running.base_url + "/#/memories")
    p.get_by_label("Search").fill("backup policy")
    p.get_by_role("button", name="Search").click()
    p.locator(".result-list .result").first.wait_for(timeout=WAIT_MS)
    assert "q=backup+policy" in p.url or "q=backup%20policy" in p.url  # the list is in the URL: Back returns to it
    hit = p.locator(".result a", has_text="Backup policy summary")
    hit.wait_for(timeout=WAIT_MS)
    hit.click()
    p.locator("h1", has_text="Backup policy summary").wait_for(timeout=WAIT_MS)
    assert seeded.derived["item_kref"] in p.locator("main").inner_text()


def test_browsing_a_project_lists_its_spaces_and_a_space_its_memories(page: Watched,
                                                                     appliance: tuple[Running, Seeded]) -> None:
    running, seeded = appliance
    p: Any = page.page
    p.goto(running.base_url + "/#/memories")
    p.locator("#filter-project option[value=CognitiveMemory]").wait_for(state="attached", timeout=WAIT_MS)
    p.select_option("#filter-project", "CognitiveMemory")
    space = p.locator(".space-list a", has_text="/CognitiveMemory/ops")
    space.wait_for(timeout=WAIT_MS)
    space.click()
    listed = p.locator(".result-list .result a")
    listed.first.wait_for(timeout=WAIT_MS)
    assert {seeded.source["item_kref"], seeded.derived["item_kref"]} <= {
        unquote(link.get_attribute("href").split("kref=", 1)[1]) for link in listed.all()}
    assert p.locator("#filter-space").input_value() == "/CognitiveMemory/ops"


def test_a_memory_shows_its_provenance_revisions_tags_and_its_text_rendered_safely(
        page: Watched, appliance: tuple[Running, Seeded]) -> None:
    running, seeded = appliance
    p: Any = page.page
    p.goto(f"{running.base_url}/#/item?kref={seeded.derived['item_kref']}")
    p.locator("h1", has_text="Backup policy summary").wait_for(timeout=WAIT_MS)
    provenance = p.locator("section[aria-labelledby=sec-provenance]")
    source_link = provenance.locator("a", has_text="Nightly backup schedule")
    source_link.wait_for(timeout=WAIT_MS)
    text = p.locator(".artifact .markdown")
    assert text.locator("strong", has_text="nightly").count() == 1  # Markdown rendered…
    assert "<script>window.pwned = 1</script>" in text.inner_text()  # …and HTML in it shown as text
    assert p.evaluate("window.pwned") is None
    assert p.locator("section[aria-labelledby=sec-revisions] tbody tr").count() >= 1
    source_link.click()  # along the DERIVED_FROM chain to the source memory
    p.locator("h1", has_text="Nightly backup schedule").wait_for(timeout=WAIT_MS)
    derived = p.locator("section[aria-labelledby=sec-provenance]").locator("a", has_text="Backup policy summary")
    derived.wait_for(timeout=WAIT_MS)
    assert "backup" in p.locator("section[aria-labelledby=sec-tags]").inner_text()


def test_deprecate_and_restore_ask_for_confirmation_and_escape_cancels(
        page: Watched, appliance: tuple[Running, Seeded]) -> None:
    running, seeded = appliance
    kref = seeded.other["item_kref"]
    p: Any = page.page
    p.goto(f"{running.base_url}/#/item?kref={kref}")
    button = p.locator("#toggle-deprecated")
    button.wait_for(timeout=WAIT_MS)
    assert button.inner_text() == "Deprecate"

    button.click()
    dialog = p.locator("#confirm-dialog")
    dialog.wait_for(state="visible", timeout=WAIT_MS)
    assert p.evaluate("document.activeElement.id") == "confirm-reason"  # focus in the dialog, on its field
    p.keyboard.press("Escape")
    dialog.wait_for(state="hidden", timeout=WAIT_MS)
    assert p.evaluate("document.activeElement.id") == "toggle-deprecated"  # focus back where it was
    assert inspect(running, kref)["item"]["deprecated"] is False  # cancelled: nothing changed

    button.click()
    p.get_by_label("Reason (optional)").fill("checked with Alex: wrong tea")
    p.locator("#confirm-ok").click()
    p.locator("#deprecated-badge").wait_for(timeout=WAIT_MS)
    assert inspect(running, kref)["item"]["deprecated"] is True

    restore = p.locator("#toggle-deprecated", has_text="Restore")
    restore.wait_for(timeout=WAIT_MS)
    restore.click()
    p.locator("#confirm-ok").click()
    p.locator("#toggle-deprecated", has_text="Deprecate").wait_for(timeout=WAIT_MS)
    assert p.locator("#deprecated-badge").count() == 0
    assert inspect(running, kref)["item"]["deprecated"] is False


def test_a_text_built_to_break_the_renderer_leaves_the_memory_readable_and_deprecatable(
        chromium: Any, tmp_path: Path) -> None:
    """5,000 nested block-quote marks (once one call each: the stack overflowed) and 60,000 link openers (a
    quadratic scan: seconds of a frozen tab) in one summary."""
    kref = seed_one(tmp_path / "data", "Hostile text", ">" * 5000 + "[" * 60000)
    few_seconds = 10_000  # the heading and the button appear at once; before, never (the view failed)
    with serve(tmp_path / "data") as running, watched_page(chromium, running.base_url) as watched:
        p: Any = watched.page
        p.goto(f"{running.base_url}/#/item?kref={kref}")
        p.locator("h1", has_text="Hostile text").wait_for(timeout=few_seconds)
        p.locator("#toggle-deprecated", has_text="Deprecate").wait_for(timeout=few_seconds)
        summary = p.locator("section[aria-labelledby=sec-summary]")
        summary.wait_for(timeout=few_seconds)
        assert summary.locator("blockquote").count() == 8  # nesting stops at 8 levels…
        deepest = summary.locator("blockquote").nth(7).inner_text()
        assert deepest.startswith(">" * 4992) and deepest.endswith("[" * 100)  # …the rest stays text
        assert p.evaluate("document.activeElement.tagName") == "H1"  # the view finished loading
        watched.assert_clean()


@contextmanager
def model_that_thinks_until(release: threading.Event) -> Iterator[str]:
    """An OpenAI-compatible chat endpoint on loopback that answers no call before ``release`` is set (at most a
    minute): a model job started against it stays running as long as the test needs. Yields its base URL."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            release.wait(60)
            body = json.dumps({"error": {"message": "the test model has nothing to say"}}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_the_dashboard_cancels_a_running_job(chromium: Any, tmp_path: Path) -> None:
    release = threading.Event()
    with model_that_thinks_until(release) as endpoint, serve(
            tmp_path / "data", KUMIHO_CE_INFERENCE__CHAT_MODEL="endpoint", KUMIHO_CE_INFERENCE__ENDPOINT_URL=endpoint,
            KUMIHO_CE_INFERENCE__TOOL_WAIT_SECONDS="1") as running:
        async def consolidate(session: Any) -> dict[str, Any]:
            await call(session, "kumiho_memory_ingest", user_id="ui", session_id="s-cancel",
                       message="Remember that the printer moved to the second floor.")
            return await call(session, "kumiho_memory_consolidate", session_id="s-cancel")

        started = mcp_steps(running.base_url, consolidate)
        assert started["status"] == "running", started  # the model has not answered: the job goes on
        job_id = started["job_id"]
        with watched_page(chromium, running.base_url) as watched:
            p: Any = watched.page
            p.goto(running.base_url + "/#/dashboard")
            button = p.locator(f"#jobs button[data-job-id='{job_id}']")
            button.wait_for(timeout=WAIT_MS)
            assert button.inner_text() == "Cancel"
            with p.expect_request(lambda request: request.url.endswith("/cancel")) as sent:
                button.click()
            request = sent.value
            assert request.method == "POST"
            assert request.url == f"{running.base_url}/api/v1/jobs/{job_id}/cancel"
            assert request.headers["content-type"] == "application/json"
            p.locator("#jobs-status", has_text="to stop").wait_for(timeout=WAIT_MS)
            release.set()  # the model call returns; the job sees its cancel and ends
            row = p.locator("#jobs tbody tr", has=p.locator("td", has_text="cancelled"))
            row.wait_for(timeout=WAIT_MS)  # the next refresh shows it, without its button
            assert not p.locator(f"#jobs button[data-job-id='{job_id}']").count()
            watched.assert_clean()
        answer = httpx.get(f"{running.base_url}/api/v1/jobs/{job_id}", timeout=30).json()
        assert answer["state"] == "cancelled", answer


def test_a_refused_cancel_shows_the_appliances_reason(chromium: Any, appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    with watched_page(chromium, running.base_url, expected_failures=("status of 404",)) as watched:
        p: Any = watched.page
        # a job the listing still shows but the appliance has since forgotten (its history keeps the last ones)
        gone = {"job_id": "job-gone", "kind": "dream_state", "lane": "background", "state": "running",
                "description": "Dream State", "progress": {"done": 1, "total": 4},
                "created_at": "2026-01-01T00:00:00+00:00"}
        p.route(re.compile(r".*/api/v1/jobs$"), lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps({"jobs": [gone], "count": 1})))
        p.goto(running.base_url + "/#/dashboard")
        p.locator("#jobs button[data-job-id=job-gone]").click(timeout=WAIT_MS)
        refusal = p.locator("#jobs-status .notice.error")
        refusal.wait_for(timeout=WAIT_MS)
        assert "job job-gone is unknown" in refusal.inner_text()  # the problem's detail, as the appliance said it
        assert p.locator("#jobs button[data-job-id=job-gone]").is_enabled()  # it can be tried again
        watched.assert_clean()


def test_the_live_view_shows_a_write_as_it_happens(page: Watched, appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    p: Any = page.page
    p.goto(running.base_url + "/#/live")
    p.locator("#stream-state", has_text="open").wait_for(timeout=WAIT_MS)

    async def store(session: Any) -> dict[str, Any]:
        return await call(session, "kumiho_memory_store", title="Printer location", space_path="office",
                          user_text="The office printer is on the second floor next to the kitchen.")

    stored = mcp_steps(running.base_url, store)
    row = p.locator("table.events tbody tr", has_text=stored["item_kref"].split("//", 1)[1])
    row.first.wait_for(timeout=WAIT_MS)


def test_the_graph_view_draws_the_memories_and_stops_its_simulation(
        page: Watched, appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    p: Any = page.page
    p.goto(running.base_url + "/#/graph")
    canvas = p.locator("#graph-canvas[data-engine=stopped]")
    canvas.wait_for(timeout=WAIT_MS)
    assert int(canvas.get_attribute("data-nodes")) >= 3
    assert int(canvas.get_attribute("data-ticks")) <= 300  # the simulation's bound
    assert p.locator("#graph-canvas canvas").count() >= 1
    p.get_by_label("Find in graph").fill("Favourite tea")
    p.keyboard.press("Enter")
    link = p.locator(".graph-details a", has_text="Open this memory")
    link.wait_for(timeout=WAIT_MS)
    assert p.evaluate("document.activeElement.textContent") == "Open this memory"  # reachable without a mouse


def test_the_api_docs_run_offline_on_the_served_schema(page: Watched, appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    p: Any = page.page
    p.goto(running.base_url + "/api/docs")
    p.locator(".swagger-ui .info .title", has_text="kumiho-ce").wait_for(timeout=WAIT_MS)
    p.locator(".opblock-summary-path", has_text="/api/v1/search").first.wait_for(timeout=WAIT_MS)


def test_the_keyboard_reaches_everything_and_the_focus_is_visible(page: Watched,
                                                                 appliance: tuple[Running, Seeded]) -> None:
    running, _ = appliance
    p: Any = page.page
    p.goto(running.base_url + "/#/memories")
    # the view has loaded when the console has moved the focus to its heading
    p.wait_for_function("() => document.activeElement && document.activeElement.tagName === 'H1'", timeout=WAIT_MS)
    focused = """() => { const el = document.activeElement;
        return {text: (el.labels && el.labels[0] ? el.labels[0].textContent : el.textContent).trim(),
                outline: getComputedStyle(el).outlineStyle}; }"""

    def walk(key: str, steps: int) -> list[dict[str, str]]:
        p.locator("h1").focus()  # where the console puts the focus when a view opens
        seen = []
        for _ in range(steps):
            p.keyboard.press(key)
            seen.append(p.evaluate(focused))
        return seen

    forward, backward = walk("Tab", 5), walk("Shift+Tab", 6)
    # from the heading into the view's controls, in reading order, each with its label
    assert [v["text"] for v in forward] == ["Search", "Project", "Kind", "include deprecated", "Search"], forward
    # back up through the navigation to the skip link
    assert [v["text"] for v in backward] == ["API docs", "Live events", "Graph", "Memories", "Dashboard",
                                             "Skip to content"], backward
    assert all(v["outline"] != "none" for v in forward + backward)  # a visible focus ring on each


def test_a_token_appliance_asks_for_the_token_once_and_sends_it_as_a_bearer_header(
        chromium: Any, tmp_path: Path) -> None:
    with serve(tmp_path / "data", KUMIHO_CE_REQUIRE_TOKEN="true") as running:
        token = (running.data_dir / "token").read_text().strip()
        assert httpx.get(running.base_url + "/api/_ready", timeout=10).status_code == 401
        with watched_page(chromium, running.base_url, expected_failures=("status of 401",)) as watched:
            p: Any = watched.page
            p.goto(running.base_url + "/#/dashboard")
            dialog = p.locator("#token-dialog")
            dialog.wait_for(state="visible", timeout=WAIT_MS)
            p.get_by_label("Token", exact=True).fill(token)
            p.keyboard.press("Enter")
            p.locator("#index dd[data-testid=index-lag]").wait_for(timeout=WAIT_MS)
            assert dialog.is_hidden()
            p.goto(running.base_url + "/#/memories")  # the next view does not ask again
            p.locator("h1", has_text="Memories").wait_for(timeout=WAIT_MS)
            assert dialog.is_hidden()
            assert p.evaluate("sessionStorage.getItem('kumiho-ce.token')") == token
            watched.assert_clean()
            sent = [(url, auth) for url, auth in watched.api_requests if auth]
            assert sent and all(auth == f"Bearer {token}" for _, auth in sent)
            assert not [url for url, _ in watched.api_requests if token in url]  # never in a URL

        # the API docs page: a wrong token is asked for once, then dropped, not asked for again and again
        with watched_page(chromium, running.base_url, expected_failures=("status of 401",)) as watched:
            p = watched.page
            prompts: list[str] = []

            def answer(dialog: Any) -> None:
                prompts.append(dialog.message)
                dialog.accept("not-the-token" if len(prompts) == 1 else token)

            p.on("dialog", answer)
            p.goto(running.base_url + "/api/docs")
            p.locator("#docs-status", has_text="refused that token").wait_for(timeout=WAIT_MS)
            assert len(prompts) == 1 and "token" in prompts[0]
            assert p.evaluate("sessionStorage.getItem('kumiho-ce.token')") is None
            p.reload()  # a reload asks again; the right token opens the docs
            p.locator(".swagger-ui .info .title", has_text="kumiho-ce").wait_for(timeout=WAIT_MS)
            assert len(prompts) == 2
            watched.assert_clean()


@pytest.mark.long
def test_the_graph_view_at_10k_memories_and_the_screenshots(chromium: Any, tmp_path: Path) -> None:
    memories = 10_000
    data_dir = tmp_path / "data"
    started = time.monotonic()
    seed_bulk(data_dir, memories, edges=memories - 1)
    seeded_s = time.monotonic() - started
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with serve(data_dir) as running:
        seeded = seed_through_mcp(running.base_url)
        with watched_page(chromium, running.base_url) as watched:
            p: Any = watched.page
            p.goto(running.base_url + "/#/dashboard")
            p.locator("#stats .card-body dl, #stats .card-body .notice").first.wait_for(timeout=WAIT_MS)
            p.screenshot(path=str(SCREENSHOTS / "dashboard.png"))

            p.goto(f"{running.base_url}/#/item?kref={seeded.derived['item_kref']}")
            p.locator("section[aria-labelledby=sec-provenance] a").first.wait_for(timeout=WAIT_MS)
            p.screenshot(path=str(SCREENSHOTS / "memory.png"))

            # the frames the page painted while the simulation ran: the longest gap says how responsive it stayed
            p.goto(running.base_url + "/#/dashboard")
            p.evaluate("""() => { window.__gaps = []; let last = performance.now();
                const frame = (now) => { window.__gaps.push(now - last); last = now; requestAnimationFrame(frame); };
                requestAnimationFrame(frame); }""")
            loaded = time.monotonic()
            p.goto(f"{running.base_url}/#/graph?project={BULK_PROJECT}&limit={memories}")
            canvas = p.locator("#graph-canvas[data-engine=stopped]")
            canvas.wait_for(timeout=180_000)
            layout_s = time.monotonic() - loaded
            gaps = sorted(p.evaluate("window.__gaps"))
            # still answering input after the layout: the navigation works at once
            p.get_by_role("link", name="Dashboard").focus()
            p.screenshot(path=str(SCREENSHOTS / "graph.png"))
            figures = {
                "memories": memories, "seed_s": round(seeded_s, 1),
                "nodes_drawn": int(canvas.get_attribute("data-nodes")),
                "memories_drawn": int(canvas.get_attribute("data-memories")),
                "edges_drawn": int(canvas.get_attribute("data-links")),
                "ticks": int(canvas.get_attribute("data-ticks")),
                "layout_ms_in_page": int(canvas.get_attribute("data-layout-ms")),
                "load_and_layout_s": round(layout_s, 1),
                "frames": len(gaps), "frame_gap_ms_p50": round(gaps[len(gaps) // 2], 1) if gaps else None,
                "frame_gap_ms_max": round(gaps[-1], 1) if gaps else None,
            }
            print(json.dumps({"ui_graph_10k": figures}))
            p.get_by_role("link", name="Dashboard").click()
            p.locator("h1", has_text="Dashboard").wait_for(timeout=WAIT_MS)
            watched.assert_clean()
        assert figures["memories_drawn"] == memories  # all of them: 10,000 is the most one drawing holds
        assert figures["ticks"] <= 120  # the large-graph bound of the simulation
