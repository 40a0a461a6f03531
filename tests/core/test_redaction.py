"""Credentials become [secret], PII becomes [kind], seed-001 filters skip what is never stored (D5)."""

from __future__ import annotations

from collections import namedtuple

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from appliance.core.redaction import (
    SECRET,
    SKIP_RULES,
    compose,
    pii_spans,
    redact_pii,
    redact_secrets,
    redact_value,
    revka_normalized,
    secret_spans,
    skip_reason,
)
from tests.write_filters import KEPT_CONTENT, KEPT_KEYS, SKIPPED_BLANK, SKIPPED_CONTENT, SKIPPED_KEYS

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEA7bq98xjN1Y2\nZm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==\n"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----"

# (text, expected output, kinds)
SECRETS = [
    ("key AKIAIOSFODNN7EXAMPLE here", "key [secret] here", ["aws_access_key"]),
    ("ASIAY34FZKBOKMUTVV7A,", "[secret],", ["aws_access_key"]),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = [secret]",
        ["aws_secret_key"],
    ),
    (
        'AWS_SECRET_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
        'AWS_SECRET_KEY: "[secret]"',
        ["aws_secret_key", "password_assignment"],
    ),
    ("curl -H 'X: Bearer abc123def456ghi789'", "curl -H 'X: Bearer [secret]'", ["bearer_token"]),
    ("bearer AbCdEfGhIjKlMnOpQrStUvWxYz", "bearer [secret]", ["bearer_token"]),
    (f"Authorization: Bearer {JWT}", "Authorization: Bearer [secret]", ["authorization_header", "bearer_token", "jwt"]),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [secret]", ["authorization_header"]),
    ("OPENAI=sk-abcdefghijklmnopqrstuvwxyz0123", "OPENAI=[secret]", ["api_key"]),
    ("use sk-proj-AbCdEf1234567890GhIjKlMnOp_qr-st now", "use [secret] now", ["api_key"]),
    ("sk-ant-api03-abcdefghij1234567890ABCDEFG-xyz_AA", "[secret]", ["api_key"]),
    ("stripe pk_live_51HqLyjWDarjtT1zdp7dcXYZ", "stripe [secret]", ["api_key"]),
    (f"jwt {JWT}.", "jwt [secret].", ["jwt"]),
    ("maps AIzaSyA1234567890abcdefghijklmnopqrstuv ok", "maps [secret] ok", ["google_api_key"]),
    # a JWT whose payload is not JSON (opaque or encrypted): the header vouches for it
    ("jwt eyJhbGciOiJIUzI1NiJ9.O8JmR8y4EMfAdggcG9qpVTzqA05MFs.Hl7UeioEJP2N", "jwt [secret]", ["jwt"]),
    ("gitlab glpat-AbCdEf1234567890GhIj_kl and hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
     "gitlab [secret] and [secret]", ["prefixed_token"]),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "[secret]", ["slack_token"]),
    ("xoxp-1234-5678-abcdefgh!", "[secret]!", ["slack_token"]),
    (f"key:\n{PEM}\nafter", "key:\n[secret]\nafter", ["private_key"]),
    (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "[secret]\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        ["private_key"],
    ),
    (
        "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,AB12\n\nMHcCAQEE\n"
        "-----END EC PRIVATE KEY-----",
        "[secret]",
        ["private_key"],
    ),
    (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQ\\n-----END PRIVATE KEY-----\\n"}',
        '{"private_key": "[secret]"}',
        ["password_assignment", "private_key"],
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: 1\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
        SECRET,
        ["private_key"],
    ),
    ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh [secret]", ["github_token"]),
    ("gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "[secret]", ["github_token"]),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[secret]", ["github_token"]),
    ("postgres://user:s3cret@db:5432/app", "postgres://user:[secret]@db:5432/app", ["url_password"]),
    ("postgresql://u:p@ss:w0rd@db/x", "postgresql://u:[secret]@db/x", ["url_password"]),
    (
        "MONGODB+SRV://admin:hunter2@cluster0.mongodb.net",
        "MONGODB+SRV://admin:[secret]@cluster0.mongodb.net",
        ["url_password"],
    ),
    ("redis://:hunter22@localhost:6379/0", "redis://:[secret]@localhost:6379/0", ["url_password"]),
    ("amqps://guest:guest@rabbit/", "amqps://guest:[secret]@rabbit/", ["url_password"]),
    ("mysql://root:x@127.0.0.1", "mysql://root:[secret]@127.0.0.1", ["url_password"]),
    ("see https://bob:pa55@example.com/x", "see https://bob:[secret]@example.com/x", ["url_password"]),
    ("password = hunter2hunter2", "password = [secret]", ["password_assignment"]),
    ('password="correct horse battery"', 'password="[secret]"', ["password_assignment"]),
    ('{"password": "hunter2!!", "user": "bob"}', '{"password": "[secret]", "user": "bob"}', ["password_assignment"]),
    ("'api_key': 'abcdef1234'", "'api_key': '[secret]'", ["password_assignment"]),
    (
        "DB_PASSWORD=s3cr3tpass\nexport MY_APP_AUTH_TOKEN=0123456789",
        "DB_PASSWORD=[secret]\nexport MY_APP_AUTH_TOKEN=[secret]",
        ["password_assignment"],
    ),
    ("client_secret: abcdefgh12", "client_secret: [secret]", ["password_assignment"]),
    ("?access_token=abcdefgh123&user=bob", "?access_token=[secret]&user=bob", ["password_assignment"]),
    (
        "pwd: xyz12345  passwd=qwertyuiop  apikey=zzzzzzzz",
        "pwd: [secret]  passwd=[secret]  apikey=[secret]",
        ["password_assignment"],
    ),
    ("credentials = abc:def:ghi", "credentials = [secret]", ["password_assignment"]),
    ("SECRET_KEY='django-insecure-abc'", "SECRET_KEY='[secret]'", ["password_assignment"]),
    ("api_key=sk-abcdefghijklmnopqrstuvwxyz0123", "api_key=[secret]", ["api_key", "password_assignment"]),
]


@pytest.mark.parametrize(("text", "expected", "kinds"), SECRETS)
def test_credentials_are_replaced(text: str, expected: str, kinds: list[str]) -> None:
    assert redact_secrets(text) == (expected, kinds)
    assert redact_secrets(expected) == (expected, [])  # idempotent: [secret] is never matched again


BENIGN = [
    "my password policy is strict",
    "Password: strong.",
    "the token bucket algorithm refills tokens",
    "we use sk-learn and sk-learn-is-a-great-library-for-ml",
    "task-1234567890abcdefghijklmn",  # "ak-" inside a word
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    "fixed in 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (4b825dc)",
    "see kref://CognitiveMemory/a/b.conversation?r=2 and kref://Revka/AgentPool/transport?r=4&a=file",
    "https://example.com:8080/path?q=1#frag and ssh://git@github.com:22/x",
    "Bearer authentication is defined in RFC 6750; bearer bonds; Bearer tokens",
    "max_tokens: 123456789, password_policy: enforced, tokens: 12345678, token_count=99999999",
    "keywords: abcdefghijkl",
    "the secret: it's",
    "AKIA is a prefix; AIza too; eyJ alone; xoxb- alone; ghp_short",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----",
    "password = [secret] and token: [secret] and postgres://u:[secret]@h",
    "mytoken=abcdefghijkl",
    "",
]


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


def test_a_pem_block_goes_whole_and_text_around_it_stays() -> None:
    text = f"a\n{PEM}\nb\n{PEM}\nc"
    assert redact_secrets(text) == ("a\n[secret]\nb\n[secret]\nc", ["private_key"])
    # an unterminated block loses its header; a later complete block still goes whole
    text = f"-----BEGIN PRIVATE KEY-----\nMIIE\n\n{PEM}"
    assert redact_secrets(text)[0] == "[secret]\nMIIE\n\n[secret]"


def test_several_kinds_in_one_text_are_sorted_and_distinct() -> None:
    text = "AKIAIOSFODNN7EXAMPLE and AKIAI44QH8DHBEXAMPLE, password=hunter2hunter2, " + JWT
    redacted, kinds = redact_secrets(text)
    assert redacted == "[secret] and [secret], password=[secret], [secret]"
    assert kinds == ["aws_access_key", "jwt", "password_assignment"]


@pytest.mark.parametrize(
    "text",
    [
        "AKIAIOSFODNN7EXAMPLEsk-proj-abcdefghijklmnopqrstuvwx",  # a key glued to a key
        "AIzapostgres://-----BEGIN PRIVATE KEY-----ghp_AIzau:1Q@ghp_eyJ:",
        "postgres://-----BEGIN PRIVATE KEY-----:aws_secret_key=AIza@x",
        "Authorization: Basic 1aws_secret_key=[secret]github_pat_u:aws_secret_key=,1Authorization: Basic ",
        "_secret_key: #eyJBearer github_pat_Bearer AAAAAAAAAAAAAAAA-abcdefghijeyJ'",
    ],
)
def test_a_second_pass_finds_nothing_new_in_odd_concatenations(text: str) -> None:
    redacted, _ = redact_secrets(text)
    assert redact_secrets(redacted) == (redacted, [])


# ----------------------------------------------------------------------------------------- redact_value


def test_values_are_redacted_recursively_keys_only_when_they_are_credentials() -> None:
    Pair = namedtuple("Pair", "a b")
    value = {
        "note": "token AKIAIOSFODNN7EXAMPLE",
        "items": ["x", ("Bearer abcdef1234567890", 3), Pair("y", "password=hunter2hunter2")],
        "AKIAIOSFODNN7EXAMPLE": 1,
        "count": 3,
        "flag": None,
        "nested": {"deep": [{"s": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}]},
    }
    redacted, kinds = redact_value(value)
    assert redacted == {
        "note": "token [secret]",
        "items": ["x", ("Bearer [secret]", 3), Pair("y", "password=[secret]")],
        "[secret]": 1,
        "count": 3,
        "flag": None,
        "nested": {"deep": [{"s": "[secret]"}]},
    }
    assert isinstance(redacted["items"][2], Pair)
    assert kinds == ["aws_access_key", "bearer_token", "github_token", "password_assignment"]
    assert value["note"] == "token AKIAIOSFODNN7EXAMPLE"  # the input is not modified
    assert redact_value(redacted) == (redacted, [])


def test_a_credential_field_loses_its_whole_value_whatever_its_length() -> None:
    value = {"password": "hunter2", "api_key": "sk-local", "DB_PASSWORD": "x", "authorization": "Basic YTpi"}
    redacted, kinds = redact_value(value)
    assert redacted == dict.fromkeys(value, SECRET)
    assert kinds == ["password_assignment"]
    # empty defaults and non-strings stay; look-alike field names are no credential fields
    same = {"auth_token": "", "password": 12345678, "max_tokens": "4096", "keywords": "a b", "token_count": "7"}
    assert redact_value(same) == (same, [])


@pytest.mark.parametrize("value", [None, 3, 2.5, True, b"AKIAIOSFODNN7EXAMPLE", {1: "x"}, [], ()])
def test_other_types_come_back_unchanged(value: object) -> None:
    assert redact_value(value) == (value, [])


# ----------------------------------------------------------------------------------- hypothesis properties

_SECRET_KINDS = {
    "aws_access_key": st.from_regex(r"(AKIA|ABIA|ACCA|ASIA)[A-Z0-9]{16}", fullmatch=True).map(lambda s: ("", s)),
    "aws_secret_key": st.from_regex(r"[A-Za-z0-9/+]{40}", fullmatch=True).map(
        lambda s: ("aws_secret_access_key = ", s)
    ),
    "bearer_token": st.from_regex(r"[A-Za-z0-9._~-]{6,20}[0-9][A-Za-z0-9._~-]{6,20}", fullmatch=True).map(
        lambda s: ("Bearer ", s)
    ),
    "api_key": st.from_regex(r"(sk|pk|rk|ak)-(proj-|ant-api03-)?[A-Za-z0-9]{20,40}", fullmatch=True).map(
        lambda s: ("", s)
    ),
    "jwt": st.from_regex(r"eyJ[A-Za-z0-9_-]{10,30}\.eyJ[A-Za-z0-9_-]{10,30}\.[A-Za-z0-9_-]{10,40}", fullmatch=True).map(
        lambda s: ("", s)
    ),
    "google_api_key": st.from_regex(r"AIza[A-Za-z0-9_-]{35}", fullmatch=True).map(lambda s: ("", s)),
    "slack_token": st.from_regex(r"xox[baprs]-[0-9]{10,12}-[A-Za-z0-9]{10,24}", fullmatch=True).map(lambda s: ("", s)),
    "private_key": st.from_regex(r"([A-Za-z0-9+/]{16,64}\n){1,4}", fullmatch=True).map(
        lambda body: ("", f"-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----")
    ),
    "github_token": st.from_regex(r"gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,82}", fullmatch=True).map(
        lambda s: ("", s)
    ),
    "url_password": st.tuples(
        st.sampled_from(["postgres", "postgresql", "mysql", "mongodb", "mongodb+srv", "redis", "amqp", "https"]),
        st.from_regex(r"[A-Za-z0-9!$%*._~-]{4,20}[0-9]", fullmatch=True),
    ).map(lambda t: (f"{t[0]}://admin:", t[1])),
    "password_assignment": st.tuples(
        st.sampled_from(["password", "api_key", "DB_PASSWORD", "client_secret", "token", '"password"', "'pwd'"]),
        st.sampled_from(["=", ": ", " = "]),
        st.from_regex(r"[A-Za-z0-9!#$%*+/=?^_~.-]{7,30}[0-9]", fullmatch=True),
    ).map(lambda t: (t[0] + t[1], t[2])),
}

_WORD_LIST = (
    "the a password token secret policy bucket sk-learn AKIA eyJ Bearer? deploy on at café 日本語 — ; , . "
    "kref://CognitiveMemory/a/b.fact?r=2 2024-05-06 10:30 user@example.com 192.168.1.1"
)
_WORDS = st.sampled_from(_WORD_LIST.split())
_PROSE = st.lists(_WORDS, max_size=12).map(" ".join)
_SEPARATORS = st.sampled_from([" ", "\n", ", ", " (", "\t", '"'])


@given(
    st.sampled_from(sorted(_SECRET_KINDS)).flatmap(lambda k: st.tuples(st.just(k), _SECRET_KINDS[k])),
    _PROSE,
    _PROSE,
    _SEPARATORS,
)
def test_generated_credentials_never_survive(kind_secret: tuple, before: str, after: str, sep: str) -> None:
    kind, (label, secret) = kind_secret
    text = f"{before}{sep}{label}{secret}{sep}{after}"
    if kind == "url_password":
        text = f"{before}{sep}{label}{secret}@db.example.com/app{sep}{after}"
    assume(secret not in before + after + label)
    redacted, kinds = redact_secrets(text)
    assert secret not in redacted
    assert kind in kinds
    assert redacted.startswith(before) and redacted.endswith(after)
    assert redact_secrets(redacted) == (redacted, [])


@given(_PROSE)
def test_prose_without_credentials_comes_back_unchanged(text: str) -> None:
    assert redact_secrets(text) == (text, [])


@given(
    st.lists(
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(sorted(_SECRET_KINDS)).flatmap(lambda k: _SECRET_KINDS[k].map("".join)),
        ),
        max_size=6,
    ).map("".join)
)
def test_redaction_is_idempotent_and_reports_what_it_changed(text: str) -> None:
    redacted, kinds = redact_secrets(text)
    assert redact_secrets(redacted) == (redacted, [])
    assert (redacted != text) == bool(kinds)
    assert redacted.count(SECRET) >= text.count(SECRET)


@pytest.mark.parametrize(
    "unit",
    [
        "sk-",
        "a_",
        "a-",
        "eyJ-",
        "eyJaaaaaaaa.",
        "password=",
        "token: x ",
        "http://u:",
        "a://b:c:",
        "Bearer a",
        "-----BEGIN PRIVATE KEY-----\nA: ",
        "-----BEGIN",
        "AKIA",
        "xoxb-",
        "ghp_",
        "a@",
        "a@1.",
        "+1 ",
        "1.",
        "1 ",
        "DE89 ",
        "4111 ",
        "123-45-",
        '"password": "',
        "[secret]",
        "1:",
        "a::",
        "call 0",
        "phone 01 ",
        "01 ",
        "(01) 2",
        "order 0",
    ],
)
def test_long_runs_of_near_matches_finish(unit: str) -> None:
    # linear-time patterns: 200 KB of repeated almost-credentials/almost-PII (no timing asserted; a
    # catastrophic backtrack would run into pytest's timeout)
    text = unit * (200_000 // len(unit))
    assert isinstance(redact_secrets(text)[0], str)
    assert isinstance(redact_pii(text)[0], str)


# ------------------------------------------------------------------------------------------------- PII

PII = [
    ("mail bob.smith+x@mail.example.co.uk.", "mail [email].", ["email"]),
    ("call (555) 123-4567 or 555.123.4567", "call [phone] or [phone]", ["phone"]),
    ("+1 555-123-4567, 1-800-555-0199, 2125551234", "[phone], [phone], [phone]", ["phone"]),
    ("ring +44 20 7946 0958 or +49 (30) 123456 or +4915112345678", "ring [phone] or [phone] or [phone]", ["phone"]),
    ("SSN 123-45-6789", "SSN [ssn]", ["ssn"]),
    (
        "card 4111 1111 1111 1111 / 4111-1111-1111-1111 / 5500005555555559",
        "card [credit_card] / [credit_card] / [credit_card]",
        ["credit_card"],
    ),
    ("amex 3782 822463 10005", "amex [credit_card]", ["credit_card"]),
    ("from 10.0.0.1 and 255.255.255.255.", "from [ip_address] and [ip_address].", ["ip_address"]),
    ("IBAN DE89 3704 0044 0532 0130 00 or GB82WEST12345698765432", "IBAN [iban] or [iban]", ["iban"]),
    # a made-up or mistyped IBAN fails mod 97 but has an IBAN country, possible check digits and the shape
    ("Wire it to FR182208 5367 5570 2338 or NL11 5549 3322 2970 24.", "Wire it to [iban] or [iban].", ["iban"]),
    ("bob@x.io, 123-45-6789", "[email], [ssn]", ["email", "ssn"]),
    ("v6 2d3:6d5b:4421:a07d:957c:eccc:3bd8:5337, 2001:db8::8a2e:370:7334 and fe80::1.",
     "v6 [ip_address], [ip_address] and [ip_address].", ["ip_address"]),
    ("mapped ::ffff:192.168.0.1 here", "mapped [ip_address] here", ["ip_address"]),
    ("Seoul +82 10-9490-8211, London +44 20 7780 7029", "Seoul [phone], London [phone]", ["phone"]),
    # national numbers (trunk 0) only after a word that says it is a phone number
    ("call me on 020 7946 0958 or her mobile: 06-12345678", "call me on [phone] or her mobile: [phone]", ["phone"]),
    # national numbers in the shapes numbering plans print: an area code in parentheses, or a trunk 0 and groups
    ("London desk (020) 7946 0321 or 0161 496 0732.", "London desk [phone] or [phone].", ["phone"]),
    ("Tokyo 03-5555-1234, Seoul 02-555-1234, Brazil (21) 98765-4321", "Tokyo [phone], Seoul [phone], Brazil [phone]",
     ["phone"]),
    ("Paris 01 42 68 53 00, Berlin 030 9876543, Zurich 044 987 65 43", "Paris [phone], Berlin [phone], Zurich [phone]",
     ["phone"]),
]


@pytest.mark.parametrize(("text", "expected", "kinds"), PII)
def test_pii_is_replaced_by_its_kind(text: str, expected: str, kinds: list[str]) -> None:
    assert redact_pii(text) == (expected, kinds)
    assert redact_pii(expected) == (expected, [])


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 fails Luhn",
        "1700000000000 ms since the epoch, order 1234567",
        "999.1.1.1 and 1.2.3.256 and 1.2.3.4.5 and v1.2.3.4",
        "ssn-like 000-12-3456, 666-12-3456, 123-00-4567",
        "IBAN DE00 3704 0044 0532 0130 00 has a bad checksum",
        "request 550e8400-e29b-41d4-a716-446655440000, commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "kref://CognitiveMemory/a/b.conversation?r=2 on 2024-05-06 at 10:30",
        "version 2.4.1, +1 vote, 3 + 4 = 7, user at example dot com",
        "[email] [phone] [secret]",
        "at 10:30:45, MAC 00:1A:2B:3C:4D:5E, std::vector, a::b, dead::beef, 12:30",
        "order 020 7946 0958 shipped; ticket number 0612345678",
        "part number 0451-203-019, ISBN 0-306-40615-2, invoice 0123 456 789, ref: 020 7946 0958",
        "dated 01-02-2024 12:30, build 0.10.2 (02) 3.1, 1 234 567 items, 020 seconds",
        "firmware 4.2.0.1, release 10.0.12.4, version 1.2.3.4",
        "IBAN-like XX12 WEST 7890 1234 56 and DE99 3704 0044 0532 0130 00",
    ],
)
def test_text_without_pii_is_left_alone(text: str) -> None:
    assert redact_pii(text) == (text, [])


def test_spans_give_offsets_into_the_input_and_priority_resolves_overlaps() -> None:
    text = "key sk-abcdefghijklmnopqrstuvwxyz0123 then Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig from 10.0.0.1"
    secrets = secret_spans(text)
    assert [(text[s:e], kinds) for s, e, kinds in secrets] == [
        ("sk-abcdefghijklmnopqrstuvwxyz0123", ("api_key",)),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", ("bearer_token", "jwt")),
    ]
    assert pii_spans(text) == [(text.index("10.0.0.1"), len(text), "ip_address")]
    # what is taken already (a credential) is not PII too
    card = "api_key=4111111111111111"
    assert pii_spans(card) == [(8, 24, "credit_card")]
    assert pii_spans(card, [(8, 24)]) == []


def test_a_later_step_composes_after_the_regex_pass() -> None:
    def fake_ner(text: str) -> tuple[str, list[str]]:
        return text.replace("Alice", "[person]"), ["person"] if "Alice" in text else []

    transcript = compose(redact_secrets, redact_pii, fake_ner)
    assert transcript("Alice: mail alice@x.org, password=hunter2hunter2") == (
        "[person]: mail [email], password=[secret]",
        ["email", "password_assignment", "person"],
    )
    assert compose()("unchanged") == ("unchanged", [])


# ------------------------------------------------------------------------------------- write-time filters


@pytest.mark.parametrize(("text", "reason"), SKIPPED_CONTENT)
def test_texts_that_revka_never_stores(text: str, reason: str) -> None:
    assert skip_reason(text) == reason
    assert skip_reason(text, "user_msg_1") == reason


@pytest.mark.parametrize("text", [*SKIPPED_BLANK, None])
def test_empty_text_is_never_stored(text: str | None) -> None:
    assert skip_reason(text) == "empty text is never stored"


@pytest.mark.parametrize("text", KEPT_CONTENT)
def test_texts_that_revka_keeps(text: str) -> None:
    assert skip_reason(text) is None


@pytest.mark.parametrize("key", SKIPPED_KEYS)
def test_assistant_auto_save_keys_are_never_stored(key: str) -> None:
    assert skip_reason("a plain fact", key) == "assistant responses are not auto-saved"


@pytest.mark.parametrize("key", [*KEPT_KEYS, "", None])
def test_other_keys_are_stored(key: str | None) -> None:
    assert skip_reason("a plain fact", key) is None


def test_revka_trims_unicode_white_space_but_not_the_ascii_separators() -> None:
    assert revka_normalized("\u2028 [Cron:X] \u3000") == "[cron:x]"
    assert revka_normalized("\x1fA\x1c") == "\x1fa\x1c"
    assert revka_normalized("\u212a\u00c9") == "\u212a\u00c9"  # ASCII lower-casing only


def test_the_rules_form_one_documented_table() -> None:
    names = [rule.name for rule in SKIP_RULES]
    assert len(set(names)) == len(names) == 6
    assert all(rule.reason and rule.condition for rule in SKIP_RULES)
    assert SKIP_RULES[1].condition == "the text starts with `[cron:`"
    assert SKIP_RULES[0].condition == "the text is empty or white space"
