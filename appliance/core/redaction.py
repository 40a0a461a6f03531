"""Credential and PII redaction, and the seed's write-time filters (D5, seed 001). Pure: stdlib only, no I/O.

* ``redact_secrets(text)`` replaces every credential by ``[secret]`` and names the kinds it found; nothing is
  rejected for containing one (D5). ``redact_value`` does the same inside dicts, lists and tuples.
* ``redact_pii(text)`` replaces e-mail addresses, phone numbers, SSNs, card numbers, IPv4/IPv6 addresses and IBANs
  by ``[email]``, ``[phone]``… (for transcripts written at consolidation). Every redactor has the shape
  ``text -> (text, kinds)``, so ``compose(redact_pii, ner_step)`` chains a later NER pass after it.
  ``secret_spans(text)`` and ``pii_spans(text)`` give what they replace as (start, end, kind), offsets into ``text``.
* ``redact_arguments(arguments)`` is the one pass every tool call goes through before the tool sees it (the
  write boundary): every string anywhere in the arguments is redacted, except names and references
  (``IDENTIFIER_ARGUMENTS``), which are refused when they hold a credential.
* ``skip_reason(text, key)`` says why a text is never stored (cron output, heartbeats, distilled content,
  empty text, ``assistant_resp*`` auto-save keys), or None.

Every pattern runs in linear time: a repeated run either is bounded (``{0,15}``), can only start at the
beginning of a run of its own characters (a look-behind), or ends in a match that the scan then skips past;
nothing nests unbounded repetitions. ``redact_secrets`` is idempotent: no value takes in a ``[secret]``, and a
token that was glued to a replaced one stays unmatched on a second pass (the ``(?<!\\[secret\\])`` guards).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from appliance.errors import InvalidArgument

SECRET = "[secret]"

Redactor = Callable[[str], tuple[str, list[str]]]


@dataclass(frozen=True, slots=True)
class Pattern:
    """One kind of sensitive text: the regex, which group of a match is replaced, an optional extra test.

    A match failing ``check``, or right after text that ``not_after`` finds at the end of the 40 characters
    before it (a label that says what else it is), is skipped whole (the scan goes on after it), so ``check``
    must also fail for any match that could start inside a failing one; otherwise a second pass could find it.
    """

    kind: str
    regex: re.Pattern[str]
    group: int = 0
    check: Callable[[str], bool] | None = None
    not_after: re.Pattern[str] | None = None


def _start(chars: str) -> str:
    """A token starts outside a run of ``chars`` (not mid-word; also keeps the scan linear) and not glued
    to a ``[secret]`` left by an earlier pass (so a second pass finds nothing the first one did not)."""
    return rf"(?<![{chars}])(?<!\[secret\])"


def _chars(cls: str) -> str:
    """One character of the class ``[cls]`` that does not begin a ``[secret]``: a value never takes one in."""
    return rf"(?:(?!\[secret\])[{cls}])"


# Names that label a credential in ``key = value`` / ``"key": "value"`` text, optionally behind up to four
# prefix words (DB_PASSWORD, openai_api_key, client-secret). "tokens", "password_policy" or "token_count" are
# no credential labels: the name must be followed by the separator.
_KEY_NAMES = (
    r"api[_-]?key|secret(?:[_-]?key)?|client[_-]?secret|access[_-]?token|auth[_-]?token|token"
    r"|password|passwd|passphrase|pwd|credentials?|private[_-]?key"
)
_KEY = rf"(?i:(?:[A-Za-z0-9]{{1,24}}[_-]){{0,4}}(?:{_KEY_NAMES}))"
# A dict key that names a credential field: its whole string value is one.
_CREDENTIAL_FIELD = re.compile(rf"{_KEY}|(?i:authorization)")

# The value of `key = value`: quoted, 8+ characters up to the closing quote (spaces allowed: passphrases), or bare,
# 8+ characters up to whitespace, a quote or "&", leaving a trailing punctuation mark to the sentence.
_QUOTED_VALUE = '(?<=")' + _chars('^"\n') + "{8,}(?=\")|(?<=')" + _chars("^'\n") + "{8,}(?=')"
_BARE_VALUE = "(?<![\"'])" + _chars("^\\s\"'&") + "{7,}" + _chars("^\\s\"'&,.;:!?)\\]}")

# base64/base64url/hex token characters, as found after "Bearer" or "Basic" (RFC 6750 b64token)
_TOKEN = r"[A-Za-z0-9_.~+/-]"


def _has_alnum_run(token: str) -> bool:
    """sk-/pk-… keys carry a long random part; "sk-learn-is-a-library-for-ml" does not (nor any part of it)."""
    return re.search(r"[A-Za-z0-9]{20}", token) is not None


SECRET_PATTERNS: tuple[Pattern, ...] = (
    # A PEM private key: the whole BEGIN…END block (base64 lines, "Proc-Type:"/"DEK-Info:"/"Comment:" header
    # lines, "\n" escapes of a JSON string), or the header alone when the block is cut off. The body is
    # possessive and cannot contain "--", so a scan stops at the next "-----" marker.
    Pattern(
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:(?:(?<=\n)[A-Za-z][\w-]{0,40}:(?:[^\n-]|-(?!-))*|[A-Za-z0-9+/=\s\\])*+"
            r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
        ),
    ),
    # scheme://user:password@host — DB and broker URLs, HTTP basic auth: only the password goes. It runs to the
    # last "@" before the path, as people do write unescaped "@" in passwords.
    Pattern(
        "url_password",
        re.compile(r"(?i:[a-z][a-z0-9+.-]{0,15})://[^\s:/?#\[\]]{0,256}:(" + _chars(r"^\s/?#") + "+)@"),
        1,
    ),
    Pattern("aws_access_key", re.compile(_start("A-Za-z0-9") + r"(?:AKIA|ABIA|ACCA|ASIA)[A-Z0-9]{16}")),
    # An AWS secret key is 40 base64 characters with no marker of its own: only its label identifies it.
    Pattern(
        "aws_secret_key",
        re.compile(r"(?i:aws[_-]?secret(?:[_-]?access)?[_-]?key)[\"']?[ \t]*[:=][ \t]*[\"']?([A-Za-z0-9/+=]{16,})"),
        1,
    ),
    # A token, not a word ("Bearer authentication"): 12+ characters with a digit, or 24+.
    Pattern(
        "bearer_token",
        re.compile(rf"(?i:bearer)[ \t]+((?={_TOKEN}*\d){_TOKEN}{{12,}}=*|{_TOKEN}{{24,}}=*)"),
        1,
    ),
    # "Authorization: Basic dXNlcjpwYXNz" (curl -H …): the header name vouches for the value.
    Pattern(
        "authorization_header",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic|bearer|token)[ \t]+" + rf"({_TOKEN}{{6,}}=*)"
        ),
        1,
    ),
    # OpenAI/Anthropic/Stripe style: sk-…, sk-proj-…, sk-ant-api03-…, pk_live_…, rk-…, ak-…
    Pattern("api_key", re.compile(_start("A-Za-z0-9") + r"(?:sk|pk|rk|ak)[-_][A-Za-z0-9_-]{20,}"), 0, _has_alnum_run),
    # A JWT's header is base64url JSON ("eyJ" = '{"'); its payload usually is too, but may be any base64url
    # (opaque or encrypted payloads), so only the header vouches for it.
    Pattern(
        "jwt",
        re.compile(_start("A-Za-z0-9_-") + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ),
    Pattern("google_api_key", re.compile(_start("A-Za-z0-9_-") + r"AIza[A-Za-z0-9_-]{35}")),
    Pattern("slack_token", re.compile(_start("A-Za-z0-9") + r"xox[baprs]-[A-Za-z0-9-]{10,}")),
    # Other prefixed tokens: GitLab (glpat-), Hugging Face (hf_), npm (npm_), Stripe webhook secrets (whsec_).
    Pattern(
        "prefixed_token",
        re.compile(_start("A-Za-z0-9_") + r"(?:glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36,}"
                   r"|whsec_[A-Za-z0-9+/=]{24,})"),
    ),
    Pattern(
        "github_token",
        re.compile(_start("A-Za-z0-9_") + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    # key = value, key: value, "key": "value", KEY='value': the label stays, a value of 8+ characters goes
    # (quotes kept). A quoted value may hold spaces (passphrases); a bare one ends at whitespace, a quote or "&",
    # and leaves a trailing punctuation mark to the sentence.
    Pattern(
        "password_assignment",
        re.compile(
            _start("A-Za-z0-9") + _KEY + r"[\"']?[ \t]*[:=][ \t]*[\"']?"
            rf"({_QUOTED_VALUE}|{_BARE_VALUE})"
        ),
        1,
    ),
)


def _spans(text: str, patterns: Iterable[Pattern]) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every match of every pattern, each pattern scanning the original text."""
    spans = []
    for pattern in patterns:
        for match in pattern.regex.finditer(text):
            if pattern.not_after is not None and pattern.not_after.search(text, max(0, match.start() - 40),
                                                                          match.start()):
                continue
            start, end = match.span(pattern.group)
            found = text[start:end]
            if start < end and (pattern.check is None or pattern.check(found)):
                spans.append((start, end, pattern.kind))
    return spans


def secret_spans(text: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """(start, end, kinds) of every credential in ``text``: sorted and disjoint. Overlapping or touching
    matches (a JWT after "Bearer", an sk- key inside ``api_key=…``) merge into one span naming every kind."""
    merged: list[tuple[int, int, tuple[str, ...]]] = []
    for start, end, kind in sorted(_spans(text, SECRET_PATTERNS)):
        if merged and start <= merged[-1][1]:
            last_start, last_end, kinds = merged[-1]
            merged[-1] = (last_start, max(last_end, end), kinds if kind in kinds else (*kinds, kind))
        else:
            merged.append((start, end, (kind,)))
    return merged


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with every credential replaced by ``[secret]``, and the sorted kinds found.

    Overlapping matches (a JWT after "Bearer", an sk- key inside ``api_key=…``) merge into one ``[secret]``.
    """
    spans = secret_spans(text)
    kinds = sorted({kind for *_, found in spans for kind in found})
    return _replace(text, [(start, end, SECRET) for start, end, _ in spans]), kinds


def _replace(text: str, spans: Iterable[tuple[int, int, str]]) -> str:
    """``text`` with each (start, end) span, sorted and disjoint, replaced by its placeholder."""
    parts: list[str] = []
    done = 0
    for start, end, placeholder in spans:
        parts += (text[done:start], placeholder)
        done = end
    parts.append(text[done:])
    return "".join(parts)


def redact_value(value: Any) -> tuple[Any, list[str]]:
    """``value`` with ``redact_secrets`` applied to every string inside dicts, lists and tuples.

    Dict keys are redacted only when they are credentials themselves. A string under a key that names a
    credential field (``password``, ``api_key``, ``DB_PASSWORD``, ``authorization``…) is replaced whole,
    whatever its length: the key says what it is. Other types come back unchanged.
    """
    kinds: set[str] = set()
    return _redact(value, kinds), sorted(kinds)


def _redact(value: Any, kinds: set[str]) -> Any:
    if isinstance(value, str):
        text, found = redact_secrets(value)
        kinds.update(found)
        return text
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            field = isinstance(key, str) and _CREDENTIAL_FIELD.fullmatch(key)
            if field and isinstance(item, str) and item.strip() and item != SECRET:
                kinds.add("password_assignment")
                item = SECRET
            result[_redact(key, kinds)] = _redact(item, kinds)
        return result
    if isinstance(value, list):
        return [_redact(item, kinds) for item in value]
    if isinstance(value, tuple):
        items = [_redact(item, kinds) for item in value]
        return type(value)._make(items) if hasattr(value, "_make") else tuple(items)
    return value


# ------------------------------------------------------------------------------------- the write boundary

# Arguments that name or address something: projects, spaces, sessions, krefs, kinds, edge types, tags. They
# are stored and shown as given (in krefs, paths, session lists), and a changed one would silently name
# something else or merge two names, so one holding a credential is refused instead of redacted.
IDENTIFIER_ARGUMENTS = frozenset({
    "project", "space_path", "space_paths", "space_hint", "session_id", "context", "context_filter",
    "name_filter", "kind_filter", "kind", "kinds", "space", "kref", "item_kref", "revision_kref", "source_krefs",
    "source_revision_krefs", "policy_kref", "memory_item_kind", "memory_types", "edge_type", "artifact_name",
    "tag", "bundle_names", "idempotency_prefix", "code_project", "provider", "model", "base_url"})
CAPTURE_IDENTIFIERS = frozenset({"type", "revises", "space_hint"})  # the same, inside reflect's captures


def refuse_credential(value: Any, field: str) -> None:
    """``InvalidArgument`` naming ``field`` (never the value) when a string in ``value`` holds a credential."""
    strings = [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] \
        if isinstance(value, list | tuple) else []
    kinds = sorted({kind for text in strings for *_, found in secret_spans(text) for kind in found})
    if kinds:
        raise InvalidArgument(f"{field}: holds what looks like a credential ({', '.join(kinds)}); names and "
                              "references are kept as given, so they cannot be redacted: leave the credential out",
                              field=field)


def redact_arguments(arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A tool call's arguments with every credential replaced by ``[secret]`` (``redact_value``: strings at any
    depth, dict keys, values under credential-named keys), and the kinds found; an identifier argument
    holding one is refused (``refuse_credential``). Nothing is stored before this has run."""
    for name in IDENTIFIER_ARGUMENTS & arguments.keys():
        refuse_credential(arguments[name], name)
    captures = arguments.get("captures")
    for index, capture in enumerate(captures if isinstance(captures, list) else []):
        for name in CAPTURE_IDENTIFIERS & (capture.keys() if isinstance(capture, dict) else set()):
            refuse_credential(capture[name], f"captures[{index}].{name}")
    cleaned, kinds = redact_value(dict(arguments))
    return cleaned, kinds


# --------------------------------------------------------------------------------------------------- PII


def _luhn(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _iban_checksum(iban: str) -> bool:
    """ISO 13616: the country code and check digits moved to the end, letters as 10…35, mod 97 == 1."""
    compact = iban.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    return int("".join(str(int(c, 36)) for c in compact[4:] + compact[:4])) % 97 == 1


# Countries and territories that issue IBANs (the ISO 13616 registry).
_IBAN_COUNTRY_CODES = (
    "AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE GI GL GR GT HR HU IE IL "
    "IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT MU NI NL NO OM PK PL PS PT QA RO RS RU SA SC SD SE "
    "SI SK SM SO ST SV TL TN TR UA VA VG XK YE"
)
_IBAN_COUNTRIES = frozenset(_IBAN_COUNTRY_CODES.split())


def _iban_like(iban: str) -> bool:
    """An IBAN by its checksum, or by its shape: an IBAN country, check digits 02–98 (00, 01 and 99 are never
    issued) and a mostly numeric account part. Mistyped and made-up IBANs (test data, examples) fail the mod-97
    checksum but are still account numbers to keep out of transcripts."""
    compact = iban.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    if _iban_checksum(compact):
        return True
    return compact[:2] in _IBAN_COUNTRIES and "02" <= compact[2:4] <= "98" and sum(c.isdigit() for c in compact) >= 12


def _phone_digits(number: str) -> bool:
    return 8 <= sum(c.isdigit() for c in number) <= 15


def _national_phone_digits(number: str) -> bool:
    return 9 <= sum(c.isdigit() for c in number) <= 12


def _ipv6(candidate: str) -> bool:
    """A valid IPv6 address with a digit in it (so that "dead::beef"-like words and C++'s "a::b" stay)."""
    try:
        ipaddress.IPv6Address(candidate)
    except ValueError:
        return False
    return any(c.isdigit() for c in candidate) and len([g for g in re.split(r"[:.]", candidate) if g]) >= 2


_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"

# Words that make a number something else than a phone number, with what may follow them up to the number:
# "order 020 7946 0958", "part number is 0451-203-019", "ISBN 0-306-40615-2", "ticket #0612 3456".
_NUMBER_LABEL = re.compile(
    r"(?i:\b(?:order|ticket|invoice|part|serial|sku|isbn|issn|ref|reference|version|build|release|case|tracking"
    r"|batch|lot|item|model|po|id)\b(?:[ \t]+(?:no\.?|nr\.?|number|num|id|code))?[ \t]*(?:is[ \t]+|[:#=][ \t]*)?)$"
)
# A word that makes four dotted numbers a version, right before them: "release 10.0.12.4", "firmware 4.2.0.1".
_VERSION_WORD = re.compile(r"(?i:\b(?:version|release|firmware|build|ver|rev|tag|patch)[ -])$")

# In priority order: a later kind never replaces part of an earlier one (an IBAN's digits are no card number).
# None starts right after a "]", so a placeholder glued to a number does not expose it on a second pass.
PII_PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "email",
        re.compile(r"(?<![\w.%+\]-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}(?![\w-])"),
    ),
    Pattern(
        "iban",
        re.compile(r"(?<![A-Za-z0-9\]])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"),
        0,
        _iban_like,
    ),
    # 13–19 digits, contiguous or in groups of 4 (Amex/Diners 4-6-5/4-6-4), starting like a card number
    # (2–6: no 1… millisecond timestamps), passing the Luhn check.
    Pattern(
        "credit_card",
        re.compile(
            r"(?<![\w+\]-])(?=[2-6])"
            r"(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5})(?![\w-])"
        ),
        0,
        _luhn,
    ),
    Pattern("ssn", re.compile(r"(?<![\w\]-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")),
    # NANP: optional +1, area code 2–9 (in parentheses or not), optional separators.
    Pattern(
        "phone",
        re.compile(r"(?<![\w+\]])(?:\+?1[ .-]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[ .-]?\d{3}[ .-]?\d{4}(?!\w)"),
    ),
    # International: +country then groups split by one separator or an (area) code; 8–15 digits in all.
    Pattern(
        "phone",
        re.compile(r"(?<![\w+\]])\+[1-9]\d{0,14}(?:(?:[ .-]|[ .-]?\(\d{1,4}\)[ .-]?)\d{1,14}){0,6}(?!\d)"),
        0,
        _phone_digits,
    ),
    # National numbers (a trunk 0, no country code: 020 7946 0958, 06-12345678) only right after a word that
    # says it is a phone number: bare, they are indistinguishable from other numbers.
    Pattern(
        "phone",
        re.compile(
            r"(?i:\b(?:phone|telephone|tel|mobile|cell|call|ring|text|sms|whatsapp|fax|dial|reach)\b)[^\n\d+\[\]]{0,25}?"
            r"(?<![\w+\]])(0\d{1,4}(?:[ .-]?\d{2,4}){2,4})(?![\w-])"
        ),
        1,
        _national_phone_digits,
    ),
    # National numbers on their own, in the shapes that numbering plans print and other numbers do not take: an
    # area code in parentheses ("(020) 7946 0958", "(11) 91234-5678") or a trunk 0 then groups split by spaces or
    # hyphens ("07700 900123", "030 12345678", "01 23 45 67 89", "03-1234-5678", "020-123 4567"); 9–12 digits,
    # the whole run of digit groups (not a piece of a longer one), not a date ("01-02-2024" has 8 digits) and
    # not after a word that labels another kind of number ("order 020 7946 0958", "part number 0451-203-019").
    Pattern(
        "phone",
        re.compile(
            r"(?<![\w+\]./,:-])(?<!\d[ -])(?=[(0])"
            r"(\((?:0[1-9]\d{0,3}|[1-9]\d{1,2})\)[ -]?\d{2,5}(?:[ -]\d{2,5}){1,3}|0[1-9]\d{0,3}(?:[ -]\d{2,8}){1,4})"
            r"(?![\w-]|[.,:/]\d|[ -]?\d)"
        ),
        1,
        _national_phone_digits,
        not_after=_NUMBER_LABEL,
    ),
    # IPv6 (full, "::"-compressed, or with an IPv4 tail), before IPv4 so that the tail is not taken apart.
    Pattern(
        "ip_address",
        re.compile(
            r"(?<![\w:.\]])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}"
            rf"(?:(?<=:)(?:{_OCTET}\.){{3}}{_OCTET})?(?![\w:]|\.\d)"
        ),
        0,
        _ipv6,
    ),
    # Not right after a word that makes four dotted numbers a version: "release 10.0.12.4", "firmware 4.2.0.1".
    Pattern(
        "ip_address",
        re.compile(rf"(?<![\w.\]])(?:{_OCTET}\.){{3}}{_OCTET}(?!\w|\.\d)"),
        not_after=_VERSION_WORD,
    ),
)


def redact_pii(text: str) -> tuple[str, list[str]]:
    """``text`` with e-mails, phones, SSNs, card numbers, IP addresses and IBANs replaced by ``[email]``,
    ``[phone]``, ``[ssn]``, ``[credit_card]``, ``[ip_address]``, ``[iban]``; and the sorted kinds found.

    Regex only; names come from spaCy NER in ``appliance.inference.pii`` (``PiiRedactor.as_step()`` composes
    after this: ``compose(redact_pii, redactor.as_step())``), which also reports the spans with their offsets.
    """
    accepted = pii_spans(text)
    replacements = [(start, end, f"[{kind}]") for start, end, kind in accepted]
    return _replace(text, replacements), sorted({kind for *_, kind in accepted})


def pii_spans(text: str, taken: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the PII that ``redact_pii`` replaces: sorted and disjoint; where matches overlap,
    the earlier pattern of ``PII_PATTERNS`` wins. Nothing overlapping a ``taken`` (start, end) is returned."""
    used = bytearray(len(text))
    for start, end in taken:
        used[start:end] = b"\x01" * (end - start)
    accepted = []
    for start, end, kind in _spans(text, PII_PATTERNS):  # pattern order = priority
        if 1 not in used[start:end]:
            used[start:end] = b"\x01" * (end - start)
            accepted.append((start, end, kind))
    return sorted(accepted)


def compose(*steps: Redactor) -> Redactor:
    """One redactor running ``steps`` in order, reporting the union of their kinds."""

    def run(text: str) -> tuple[str, list[str]]:
        kinds: set[str] = set()
        for step in steps:
            text, found = step(text)
            kinds.update(found)
        return text, sorted(kinds)

    return run


# ------------------------------------------------------------------------------------ write-time filters


# Revka's own write filters (src/memory/mod.rs: should_skip_autosave_content, is_assistant_autosave_key), applied
# exactly as Revka applies them, so that the appliance and Revka agree on what is noise: the text or key is first
# trimmed of Unicode white space (Rust's ``str::trim``, which, unlike ``str.strip``, keeps the ASCII separators
# U+001C–U+001F), then lower-cased in ASCII only (``to_ascii_lowercase``: the Kelvin sign stays, so
# "[heartbeat tasK" with U+212A is kept, as Revka keeps it).
RUST_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) \
    + "\u2028\u2029\u202f\u205f\u3000"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def revka_normalized(text: str) -> str:
    """``text`` as Revka's filters compare it: ``text.trim().to_ascii_lowercase()``."""
    return text.strip(RUST_WHITESPACE).translate(_ASCII_LOWER)


@dataclass(frozen=True, slots=True)
class SkipRule:
    """Text that is never stored (seed 001): where to look, what to look for, and why. Every test compares the
    trimmed, ASCII-lower-cased text or key (``revka_normalized``) with a lower-case needle."""

    name: str
    field: str  # "text" or "key" (the auto-save key)
    test: str  # "blank", "prefix", "contains" or "key" (equal to the needle, or starting with needle + "_")
    needle: str
    reason: str

    @property
    def condition(self) -> str:
        if self.test == "blank":
            return f"the {self.field} is empty or white space"
        if self.test == "key":
            return f"the {self.field} is `{self.needle}` or starts with `{self.needle}_`"
        verb = "starts with" if self.test == "prefix" else "contains"
        return f"the {self.field} {verb} `{self.needle}`"

    def matches(self, text: str, key: str | None) -> bool:
        subject = text if self.field == "text" else key
        if subject is None:
            return False
        normalized = revka_normalized(subject)
        if self.test == "blank":
            return not normalized
        if self.test == "prefix":
            return normalized.startswith(self.needle)
        if self.test == "key":
            return normalized == self.needle or normalized.startswith(self.needle + "_")
        return self.needle in normalized


SKIP_RULES: tuple[SkipRule, ...] = (
    SkipRule("empty", "text", "blank", "", "empty text is never stored"),
    SkipRule("cron", "text", "prefix", "[cron:", "cron output is never stored"),
    SkipRule("heartbeat", "text", "prefix", "[heartbeat task", "heartbeat task output is never stored"),
    SkipRule("distilled", "text", "prefix", "[distilled_", "distilled content is never stored again"),
    SkipRule(
        "distilled_index", "text", "contains", "distilled_index_sig:", "distilled index signatures are never stored"
    ),
    SkipRule("assistant_response", "key", "key", "assistant_resp", "assistant responses are not auto-saved"),
)


def skip_reason(text: str | None, key: str | None = None) -> str | None:
    """Why ``text`` (auto-saved under ``key``) must not be stored, or None when it may be. Case and surrounding
    white space do not matter (``[CRON:x]``, ``  [Distilled_1]``, ``Assistant_Resp_7``), as in Revka."""
    for rule in SKIP_RULES:
        if rule.matches(text or "", key):
            return rule.reason
    return None
