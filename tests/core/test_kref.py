"""krefs parse strictly, format canonically, and round-trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core import kref as krefs
from appliance.core.kref import Kref
from appliance.errors import InvalidArgument, InvalidKref

segment = st.from_regex(r"[A-Za-z0-9_가-힣][A-Za-z0-9_가-힣-]{0,15}", fullmatch=True)
kinds = st.from_regex(r"[a-z0-9_][a-z0-9_-]{0,7}(\.[a-z0-9_][a-z0-9_-]{0,5})?", fullmatch=True)
artifacts = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_-]{0,7}(\.[A-Za-z0-9_-]{1,4})?", fullmatch=True)


@st.composite
def item_krefs(draw: st.DrawFn) -> Kref:
    path = tuple(draw(st.lists(segment, min_size=2, max_size=5)))
    revision = draw(st.none() | st.integers(1, krefs.MAX_REVISION))
    artifact = draw(st.none() | artifacts) if revision else None
    return Kref(path, draw(kinds), revision, artifact)


@given(item_krefs())
def test_item_krefs_round_trip(kref: Kref) -> None:
    text = krefs.format_kref(kref)
    assert krefs.parse(text) == kref
    assert krefs.format_kref(krefs.parse(text)) == text


@given(st.lists(segment, min_size=1, max_size=5))
def test_kindless_paths_round_trip(path: list[str]) -> None:
    text = "kref://" + "/".join(path)
    parsed = krefs.parse(text)
    assert parsed.kind is None and parsed.path == tuple(path)
    assert str(parsed) == text


def test_components_of_a_full_kref() -> None:
    k = krefs.parse("kref://my-project/characters/hero.model?r=3&a=mesh.fbx")
    assert (k.project, k.space_segments, k.item_name, k.kind) == ("my-project", ("characters",), "hero", "model")
    assert (k.revision, k.artifact, k.space_path) == (3, "mesh.fbx", "/my-project/characters")


def test_kind_is_split_at_the_first_dot() -> None:
    k = krefs.parse("kref://P/s/name.kind.with.dots")
    assert (k.item_name, k.kind) == ("name", "kind.with.dots")


def test_item_at_project_root() -> None:
    k = krefs.parse("kref://CognitiveMemory/_dream_state.conversation")
    assert k.space_path == "/CognitiveMemory" and k.space_segments == ()


def test_tag_and_time_selectors() -> None:
    k = krefs.parse("kref://P/s/a.model?tag=published&time=202603271015")
    assert (k.tag, k.time) == ("published", "202603271015")
    assert str(k) == "kref://P/s/a.model?t=published&time=202603271015"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kref://P/../x.k", "'..'"),
        ("kref://P/s/a.k\x00", "control character"),
        ("kref://P//a.k", "empty segment"),
        ("kref://P/s/", "empty segment"),
        ("kref:///space", "empty segment"),
        ("http://P/s/a.k", "must start with 'kref://'"),
        ("kref://P/s/a.k?r=0", "revision number"),
        ("kref://P/s/a.k?r=-1", "revision number"),
        ("kref://P/s/a.k?r=01", "revision number"),
        ("kref://P/s/a.k?r=2147483648", "revision number"),
        ("kref://P/s/a.k?r=x", "revision number"),
        ("kref://P/s/a.k?a=f", "needs a revision"),
        ("kref://P/s/a.k?r=1&r=2", "given twice"),
        ("kref://P/s/a.k?q=1", "unknown or empty"),
        ("kref://P/s/a.k?r=1&a=bad/name", "artifact name"),
        ("kref://P/s p/a.k", "may hold only"),
        ("kref://P/s.x/a.k", "may hold only"),
        ("kref://a.k", "needs a project"),
        ("kref://P/s/a.k?time=yesterday", "not a time"),
    ],
)
def test_bad_krefs_are_refused_with_a_clear_reason(text: str, needle: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        krefs.parse(text, "item_kref")
    assert needle in caught.value.message
    assert caught.value.field == "item_kref"


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidKref):
        krefs.parse(42)


def test_compact_time_means_the_end_of_that_minute() -> None:
    assert krefs.parse_time("202603271015") == "2026-03-27T10:15:59.000000+00:00"
    assert krefs.parse_time("2026-03-27T12:15:30+02:00") == "2026-03-27T10:15:30.000000+00:00"


@pytest.mark.parametrize("path", ["/P/a/b", "P/a/b", "kref://P/a/b", "/P/a/b/"])
def test_space_paths_in_any_spelling(path: str) -> None:
    assert krefs.parse_space_path(path) == ("P", "a", "b")


@pytest.mark.parametrize("path", ["", "/", "/P/../x", "/P/a b", "/P/a.b"])
def test_bad_space_paths(path: str) -> None:
    with pytest.raises(InvalidArgument):
        krefs.parse_space_path(path)
