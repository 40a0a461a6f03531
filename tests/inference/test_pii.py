"""PII redaction with the real spaCy pipeline (en_core_web_sm 3.8.0): labels, offsets, overlaps, batches,
idempotence, lazy and thread-safe loading, and ``kumiho-ce redact --jsonl`` as a user runs it."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from appliance.core.redaction import compose, redact_secrets
from appliance.errors import ConfigError
from appliance.inference import pii
from appliance.inference.pii import PLACEHOLDERS, PiiRedactor, apply, pattern_spans, run_jsonl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def redactor() -> PiiRedactor:
    redactor = PiiRedactor()
    redactor.load()
    return redactor


def found(redactor: PiiRedactor, text: str) -> list[tuple[str, str]]:
    return [(text[s["start"]:s["end"]], s["label"]) for s in redactor.spans(text)]


# One sentence per label, the span's exact text and its label.
EXAMPLES = [
    ("My name is Priya Okafor and I run the night shift.", "Priya Okafor", "PERSON"),
    ("Call Marcus Okafor before Friday about the budget tracker.", "Marcus Okafor", "PERSON"),
    ("The design doc was written by Chloe Dubois.", "Chloe Dubois", "PERSON"),
    ("Write to mei_becker@corp.example.net today.", "mei_becker@corp.example.net", "EMAIL"),
    ("Call the desk on +1 (854) 318-5214 tomorrow.", "+1 (854) 318-5214", "PHONE"),
    ("The Seoul office is on +82 10-9490-8211.", "+82 10-9490-8211", "PHONE"),
    ("London: +44 20 7946 0958.", "+44 20 7946 0958", "PHONE"),
    ("The card on file is 4140 2145 8928 161, expiring next March.", "4140 2145 8928 161", "CREDIT_CARD"),
    ("Charge 4111-1111-1111-1111 for the renewal.", "4111-1111-1111-1111", "CREDIT_CARD"),
    ("Our staging box is at 148.113.80.227 behind the balancer.", "148.113.80.227", "IP_ADDRESS"),
    ("The v6 address is 2d3:6d5b:4421:a07d:957c:eccc:3bd8:5337.", "2d3:6d5b:4421:a07d:957c:eccc:3bd8:5337",
     "IP_ADDRESS"),
    ("Blocked 2001:db8::8a2e:370:7334 at noon.", "2001:db8::8a2e:370:7334", "IP_ADDRESS"),
    ("Her SSN is 179-54-0496, please store it safely.", "179-54-0496", "SSN"),
    ("Wire the refund to IBAN FR182208 5367 5570 2338 by end of month.", "FR182208 5367 5570 2338", "IBAN"),
    ("Payroll account DE89 3704 0044 0532 0130 00 is closed.", "DE89 3704 0044 0532 0130 00", "IBAN"),
    ("Use this key: sk-proj-1JPFgwyWrGyY91S5YUjRtD9I5L1HH026d1W0NIMJ64dMEiya",
     "sk-proj-1JPFgwyWrGyY91S5YUjRtD9I5L1HH026d1W0NIMJ64dMEiya", "API_KEY"),
    ("The AWS key AKIA0D5GJXGPFC8NVWEI leaked.", "AKIA0D5GJXGPFC8NVWEI", "API_KEY"),
    ("token ghp_5OGgBwJd8eF2Ejsu1QGGv7mPnS1CZtQ6iRpZ in the log", "ghp_5OGgBwJd8eF2Ejsu1QGGv7mPnS1CZtQ6iRpZ",
     "API_KEY"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.8d7YQW71iY1ePr9DbtE03nOawCBdnb.PMNMIIeFJCHftioJjKEqxELRrmMBqxVn8MGVyZOH",
     "eyJhbGciOiJIUzI1NiJ9.8d7YQW71iY1ePr9DbtE03nOawCBdnb.PMNMIIeFJCHftioJjKEqxELRrmMBqxVn8MGVyZOH", "API_KEY"),
]


@pytest.mark.parametrize(("text", "value", "label"), EXAMPLES)
def test_each_label_is_found_with_its_exact_offsets(redactor: PiiRedactor, text: str, value: str, label: str) -> None:
    spans = redactor.spans(text)
    start = text.index(value)
    assert {"start": start, "end": start + len(value), "label": label} in spans
    redacted, same = redactor.redact(text)
    assert same == spans
    assert redacted == text[:start] + PLACEHOLDERS[label] + text[start + len(value):] or len(spans) > 1
    assert value not in redacted


def test_a_sentence_with_several_kinds_keeps_every_offset_into_the_input(redactor: PiiRedactor) -> None:
    text = ("Email omar.okafor@example.com or ping Kenji Sharma; Lukas Nwosu said her SSN is 458-44-5456 and "
            "the box 10.0.0.7 runs with key AKIAI106N6CU4UHA70K3.")
    redacted, spans = redactor.redact(text)
    assert [(text[s["start"]:s["end"]], s["label"]) for s in spans] == [
        ("omar.okafor@example.com", "EMAIL"), ("Kenji Sharma", "PERSON"), ("Lukas Nwosu", "PERSON"),
        ("458-44-5456", "SSN"), ("10.0.0.7", "IP_ADDRESS"), ("AKIAI106N6CU4UHA70K3", "API_KEY"),
    ]
    assert redacted == ("Email [email] or ping [person]; [person] said her SSN is [ssn] and the box [ip_address] "
                        "runs with key [secret].")
    assert apply(text, spans) == redacted
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(spans))


def test_patterns_win_over_ner(redactor: PiiRedactor) -> None:
    # NER calls IPs DATE and phone numbers CARDINAL; names inside e-mail addresses or keys stay theirs
    assert found(redactor, "Our staging box is at 102.18.87.14 and prod sits behind the load balancer.") == [
        ("102.18.87.14", "IP_ADDRESS")]
    assert found(redactor, "Mail Marcus.Becker@example.com now.") == [("Marcus.Becker@example.com", "EMAIL")]
    assert found(redactor, "postgres://admin:MarcusBecker2024@db.example.com/app") == [("MarcusBecker2024", "API_KEY")]
    # a credential that also looks like PII is one [secret]
    assert found(redactor, "api_key=4111111111111111") == [("4111111111111111", "API_KEY")]


def test_names_leave_out_the_verb_that_starts_a_line(redactor: PiiRedactor) -> None:
    assert found(redactor, "Call Lukas Becker on 875-585-9266 before Friday.") == [
        ("Lukas Becker", "PERSON"), ("875-585-9266", "PHONE")]
    assert found(redactor, "Email Amara Sharma the agenda.") == [("Amara Sharma", "PERSON")]
    assert found(redactor, "Mohammed Al-Rashid approved the budget.") == [("Mohammed Al-Rashid", "PERSON")]


# Names NER misses on its own: written in lower case, from outside its training data, with particles or
# hyphenated given names; each found by the words around it (a cue before it, a verb of saying after it).
HARD_NAMES = [
    ("talked to wanjiru kamau about the vendor.", ["wanjiru kamau"]),
    ("ask oksana about the contract", ["oksana"]),
    ("thanks seun, the review helped", ["seun"]),
    ("hey ayesha, can you check the logs?", ["ayesha"]),
    ("remind dumisani to sign the form", ["dumisani"]),
    ("farida said the report is late.", ["farida"]),
    ("cc nguyen thi lan on the thread", ["nguyen thi lan"]),  # "lan" is an English word and a census name
    ("met with jae-hyun lim this morning", ["jae-hyun lim"]),
    ("@tendai moyo can you take this one?", ["tendai moyo"]),
    ("got a reply from kasia nowak about the offer", ["kasia nowak"]),
    ("Bartholomew van den Heuvel joined the team.", ["Bartholomew van den Heuvel"]),
    ("Maria da Graça Ferreira signed the offer.", ["Maria da Graça Ferreira"]),
    ("Seung-hoon Baek approved the change.", ["Seung-hoon Baek"]),
    ("Please ask Tendai Moyo's manager.", ["Tendai Moyo"]),
    ("Sarah J. Goldberg signed the lease.", ["Sarah J. Goldberg"]),
    ("min-ho park said the tests pass.", ["min-ho park"]),  # a surname that is also a word of places
    ("ask soo-ah park about it", ["soo-ah park"]),
    ("Send it to Pádraig Ó Súilleabháin today.", ["Pádraig Ó Súilleabháin"]),
]


@pytest.mark.parametrize(("text", "names"), HARD_NAMES)
def test_names_in_lower_case_and_from_many_cultures_are_found_whole(redactor: PiiRedactor, text: str,
                                                                    names: list[str]) -> None:
    assert found(redactor, text) == [(name, "PERSON") for name in names]


@pytest.mark.parametrize(
    "text",
    [
        # words that are names elsewhere, after the same cues
        "talked to sales about the renewal.",
        "ask will about it tomorrow.",
        "talked to kubernetes support about the crash.",
        "ping me when the build is green.",
        "I will meet the landlord next week.",
        "Please bill the client and mark as done.",
        "ask the on-call engineer; the hand-off is done and go-live is friday.",
        "walked to hyde park; hyde park is closed today.",
        "There is a grace period of 30 days; the rose garden is closed.",
        # particles join places and things too
        "The Van der Waals forces chapter is next.",
        "The Rio de Janeiro office opens Monday.",
        "We opened an office in são paulo and in rio de janeiro.",
    ],
)
def test_words_that_look_like_names_in_context_are_left_alone(redactor: PiiRedactor, text: str) -> None:
    assert redactor.redact(text) == (text, [])


@pytest.mark.parametrize(
    "text",
    [
        "We decided to use gRPC for the operator channel on Mar 27.",
        "The meeting moved to 3pm; bring the Q3 numbers (revenue up 12%).",
        "Ticket 4521 was closed after the regression in build 2026.11.3.",
        "Set the retry limit to 5 and the timeout to 30 seconds.",
        "Use this key for the OpenAI account once it is approved.",
        "We moved the cluster from Google Cloud to Amazon Web Services last quarter.",
        "The New York office runs Visual Studio Code on every laptop.",
        "Request 550e8400-e29b-41d4-a716-446655440000 timed out after 30s.",
        "At 10:30:45 the scheduler logged std::vector errors.",
        "",
    ],
)
def test_text_without_pii_is_left_alone(redactor: PiiRedactor, text: str) -> None:
    assert redactor.redact(text) == (text, [])


def test_redaction_is_idempotent(redactor: PiiRedactor) -> None:
    texts = [text for text, _, _ in EXAMPLES] + ["Call Sofia Becker on +44 20 6862 6358 before Friday."]
    for redacted, spans in redactor.redact_many(texts):
        assert spans
        assert redactor.redact(redacted) == (redacted, [])


def test_a_batch_gives_what_one_at_a_time_gives(redactor: PiiRedactor) -> None:
    texts = [text for text, _, _ in EXAMPLES] * 3
    assert redactor.redact_many(texts) == [redactor.redact(text) for text in texts]
    assert redactor.redact_many([]) == []


def test_long_texts_go_to_ner_in_pieces_with_offsets_kept(redactor: PiiRedactor,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    text = "\n".join(f"Ping Kenji Sharma about ticket {i}, mail k{i}@example.com." for i in range(8))
    whole = redactor.redact(text)
    monkeypatch.setattr(pii, "_PIECE", 70)
    assert len(list(pii._pieces(text))) == 8
    assert redactor.redact(text) == whole
    assert whole[0].count("[person]") == 8 and whole[0].count("[email]") == 8


def test_patterns_only_needs_no_model() -> None:
    patterns = PiiRedactor(ner=False)
    assert patterns.redact("Kenji Sharma: kenji@example.com, 179-54-0496") == (
        "Kenji Sharma: [email], [ssn]",
        [{"start": 14, "end": 31, "label": "EMAIL"}, {"start": 33, "end": 44, "label": "SSN"}],
    )
    assert not patterns.loaded
    assert pattern_spans("key AKIA0D5GJXGPFC8NVWEI") == [(4, 24, "API_KEY")]


def test_it_composes_with_the_regex_steps(redactor: PiiRedactor) -> None:
    transcript = compose(redact_secrets, redactor.as_step())
    assert transcript("Kenji Sharma wrote password=hunter2hunter2 from kenji@example.com") == (
        "[person] wrote password=[secret] from [email]", ["email", "password_assignment", "person"])


def test_the_model_loads_once_under_concurrent_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = pii._load

    def counting(model: str) -> object:
        calls.append(model)
        return real(model)

    monkeypatch.setattr(pii, "_load", counting)
    fresh = PiiRedactor()
    results: list[object] = [None] * 6
    start = threading.Barrier(6)

    def work(i: int) -> None:
        start.wait()
        results[i] = fresh.redact(f"Ping Kenji Sharma about ticket {i}.")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert calls == [pii.DEFAULT_MODEL]
    assert all(r == (f"Ping [person] about ticket {i}.", [{"start": 5, "end": 17, "label": "PERSON"}])
               for i, r in enumerate(results))


def test_a_missing_model_is_a_clear_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load the spaCy pipeline"):
        PiiRedactor(tmp_path / "no-such-pipeline").redact("Kenji Sharma")


def test_importing_the_appliance_does_not_import_spacy() -> None:
    code = (
        "import sys\n"
        "import appliance.app, appliance.cli, appliance.inference.pii as pii\n"
        "r = pii.PiiRedactor()\n"
        "assert r.redact.__name__ and not r.loaded\n"
        "print(pii.PiiRedactor(ner=False).redact('a@b.io')[0])\n"
        "print('spacy' in sys.modules, 'thinc' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[email]", "False False"]


# ------------------------------------------------------------------------------------------------- the CLI


def run_cli(lines: list[bytes], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "appliance", "redact", *args], cwd=ROOT,
                          input=b"".join(lines), capture_output=True, timeout=180)


def test_redact_jsonl_end_to_end() -> None:
    lines = [
        b'{"text": "Call Marcus Okafor on +1 (854) 318-5214, key sk-AASGIOz6t4qECyeTXQggIGUrAPgkJtZqjrDKW3xP"}\n',
        b"not json\n",
        b"[1, 2]\n",
        b'{"text": 5}\n',
        b"\xff\xfe\n",
        b'{"note": "no text"}\n',
        '{"text": "Zoë Müller wrote from 10.0.0.1 — ok", "id": 7}\n'.encode(),
        b'{"text": "nothing here"}',  # no newline at the end
    ]
    out = run_cli(lines, "--jsonl")
    assert out.returncode == 0, out.stderr
    assert b"Traceback" not in out.stderr
    records = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert len(records) == len(lines)
    first = records[0]
    assert first["text"] == "Call [person] on [phone], key [secret]"
    source = json.loads(lines[0])["text"]
    assert [(source[s["start"]:s["end"]], s["label"]) for s in first["spans"]] == [
        ("Marcus Okafor", "PERSON"), ("+1 (854) 318-5214", "PHONE"),
        ("sk-AASGIOz6t4qECyeTXQggIGUrAPgkJtZqjrDKW3xP", "API_KEY")]
    for number in (2, 3, 4, 5, 6):
        record = records[number - 1]
        assert set(record) == {"error", "line"} and record["line"] == number
        assert record["error"].startswith(f"line {number}: ")
    assert records[6] == {"text": "[person] wrote from [ip_address] — ok", "spans": [
        {"start": 0, "end": 10, "label": "PERSON"}, {"start": 22, "end": 30, "label": "IP_ADDRESS"}]}
    assert records[7] == {"text": "nothing here", "spans": []}


def test_redact_answers_each_line_as_it_comes() -> None:
    # a writer that waits for each answer before sending the next line is not kept waiting for a batch
    with subprocess.Popen([sys.executable, "-m", "appliance", "redact", "--jsonl"], cwd=ROOT,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        try:
            answers = []
            for text in ("mail kenji@example.com", "SSN 179-54-0496"):
                process.stdin.write(json.dumps({"text": text}).encode() + b"\n")
                process.stdin.flush()
                answers.append(json.loads(process.stdout.readline()))
            assert [a["text"] for a in answers] == ["mail [email]", "SSN [ssn]"]
            process.stdin.close()
            assert process.wait(timeout=60) == 0
            assert process.stdout.read() == b""
        finally:
            if process.poll() is None:
                process.kill()


def test_redact_plain_text_and_patterns_only() -> None:
    out = run_cli([b"Ping Kenji Sharma at kenji@example.com\n"], "--no-ner")
    assert (out.returncode, out.stdout) == (0, b"Ping Kenji Sharma at [email]\n")


def test_redact_finds_lower_case_names_and_national_numbers_from_the_command_line() -> None:
    out = run_cli([b"spoke to chiamaka eze, her desk is (020) 7946 0111\n"])
    assert (out.returncode, out.stdout) == (0, b"spoke to [person], her desk is [phone]\n"), out.stderr


def test_redact_with_a_missing_model_is_one_error_line(tmp_path: Path) -> None:
    out = run_cli([b'{"text": "x"}\n'], "--jsonl", "--model", str(tmp_path / "missing"))
    assert out.returncode == 2 and out.stdout == b""
    assert out.stderr.decode().startswith("kumiho-ce: error: cannot load the spaCy pipeline")
    assert b"Traceback" not in out.stderr


def test_run_jsonl_in_process(redactor: PiiRedactor, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(json.dumps({"text": f"Ping Kenji Sharma #{i}"}).encode() + b"\n" for i in range(150))
                       + b"oops\n")
    sink = tmp_path / "out.jsonl"
    with source.open("rb") as reader, sink.open("wb") as writer:
        assert run_jsonl(redactor, reader, writer, batch_size=16) == 1
    records = [json.loads(line) for line in sink.read_text().splitlines()]
    assert [r.get("text") for r in records[:150]] == [f"Ping [person] #{i}" for i in range(150)]
    assert records[150] == {"error": "line 151: not JSON (Expecting value at column 1)", "line": 151}
