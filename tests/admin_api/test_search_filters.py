"""``GET /api/v1/search``'s filters over real HTTP: bounded, and a value no memory can carry is refused with a
problem naming the parameter, not answered with an empty list (the schema fuzz found both)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from appliance.admin_api.search import MAX_SPACES, MAX_TAGS
from tests.inprocess import InProcess, serve_in_process
from tests.problems import problem


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("search-filters") / "data", None,
                          inference={"chat_model": "none"}) as running:
        yield running


def _search(app: InProcess, **params: object) -> httpx.Response:
    return httpx.get(app.base_url + "/api/v1/search", params={"q": "coffee", **params}, timeout=30)


@pytest.mark.parametrize(("field", "value"), [
    ("project", "[{'a': ''}]"), ("project", "bad name"), ("kind", "no/slash"), ("tag", " padded "),
    ("project", "p" * 129), ("space", "/p/" + "s" * 600), ("memory_type", "m" * 65), ("kind", "k" * 129),
])
def test_a_filter_no_memory_can_match_is_refused_naming_it(app: InProcess, field: str, value: str) -> None:
    answer = _search(app, **{field: value})
    assert answer.status_code == 400, answer.text
    found = problem(answer)
    assert found["code"] == "invalid_argument" and found["field"] == field, found
    assert field in found["detail"], found


@pytest.mark.parametrize(("field", "limit", "value"), [("space", MAX_SPACES, "/CognitiveMemory"),
                                                        ("tag", MAX_TAGS, "coffee")])
def test_filters_take_a_bounded_number_of_values(app: InProcess, field: str, limit: int, value: str) -> None:
    assert _search(app, **{field: [value] * limit}).status_code == 200
    over = _search(app, **{field: [value] * (limit + 1)})
    assert over.status_code == 400 and problem(over)["field"] == field, over.text


def test_valid_filters_still_search(app: InProcess) -> None:
    answer = _search(app, project="CognitiveMemory", kind="conversation", tag="published", memory_type="summary",
                     space="/CognitiveMemory")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"query": "coffee", "mode": "hybrid", "count": 0, "results": []}
