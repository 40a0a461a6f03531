"""Names, tags, edge types and metadata are validated with messages that say the fix."""

from __future__ import annotations

import pytest

from appliance.core import names
from appliance.errors import InvalidArgument


@pytest.mark.parametrize("good", ["DERIVED_FROM", "A", "X1_2", "A" * 50])
def test_edge_types_that_match_the_server_rule(good: str) -> None:
    assert names.edge_type(good) == good


@pytest.mark.parametrize("bad", ["derived_from", "1ABC", "_A", "A-B", "A" * 51, "", None])
def test_edge_types_that_do_not(bad: object) -> None:
    with pytest.raises(InvalidArgument, match=r"\^\[A-Z\]"):
        names.edge_type(bad)


def test_latest_is_not_a_user_tag() -> None:
    with pytest.raises(InvalidArgument, match="managed by the appliance"):
        names.user_tag("latest")
    assert names.user_tag("evidence:official") == "evidence:official"


@pytest.mark.parametrize("bad", ["", " x", "x ", "a\nb", "t" * 129])
def test_bad_tags(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        names.tag(bad)


def test_metadata_values_must_be_strings() -> None:
    with pytest.raises(InvalidArgument) as caught:
        names.metadata({"count": 3})
    assert caught.value.field == "metadata.count"
    assert "JSON-encode int" in caught.value.message


def test_metadata_must_be_an_object() -> None:
    with pytest.raises(InvalidArgument, match="object"):
        names.metadata(["a"])
    assert names.metadata(None) == {}


def test_unicode_names_are_welcome() -> None:
    assert names.item_name("회의록-2026") == "회의록-2026"


def test_bounded_int_rejects_bools_and_out_of_range() -> None:
    with pytest.raises(InvalidArgument, match="from 1 to 20"):
        names.bounded_int(True, "max_depth", 1, 20)
    with pytest.raises(InvalidArgument):
        names.bounded_int(21, "max_depth", 1, 20)
