"""PII redaction quality and throughput: prints one JSON object.

    python benchmarks/pii_bench.py --data ../shared/bench/pii-dev.jsonl [--repeat 3] [--no-ner]

Quality, per label (PERSON, EMAIL, PHONE, CREDIT_CARD, IP_ADDRESS, SSN, IBAN, API_KEY):
* ``strict``: a predicted span is right when it has the gold offsets and label exactly;
* ``covered``: recall = gold spans whose characters a same-label prediction covers completely (the PII is gone),
  precision = predictions that overlap a gold span of their label (the rest redacted something else).
``negatives`` counts the PII-free sentences (no gold span) where anything was redacted, and what.
``extra`` scores the same way a small set of sentences written for this script (other names and sentence
shapes than the dev file; negatives full of capitalised product and place names): a check against tuning to
the dev file's templates, not a substitute for the held-out corpus.

The project's harder corpus, ``benchmarks/data/pii-hard-{dev,heldout}.jsonl`` (same format, 184 hand-written
sentences: names in lower case and from many cultures, with particles, hyphens and apostrophes; national phone
numbers of 15 countries; 68 look-alike negatives — versions, dates, money, order and ISBNs, place and product
names, lower-case words that are also names). Each kind was shuffled (seed 10) and cut in two: the rules were
developed on ``pii-hard-dev``; ``pii-hard-heldout`` is for reporting (``make bench-pii-hard`` runs both).

Throughput: messages per second over the whole file (after one warm-up pass), for the full redactor
(patterns + NER), the patterns alone and the bare spaCy pipeline (tok2vec, tagger, ner), each the best of
``--repeat`` runs. The machine may be shared: ``load_average`` is reported with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.inference.pii import LABELS, PiiRedactor

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "pii-dev.jsonl"

# {LABEL:text} marks a gold span.
EXTRA = [
    "Forwarding this to {PERSON:Hannah Schmidt} so she can review the contract.",
    "{PERSON:Ravi Patel} will take the on-call shift this weekend.",
    "Thanks {PERSON:Olga Ivanova}, the migration finished overnight.",
    "Can you ask {PERSON:Diego Fernández} whether the invoice went out?",
    "The design doc was written by {PERSON:Chloe Dubois} and reviewed by {PERSON:Tomasz Nowak}.",
    "Meeting notes: {PERSON:Aisha Bello} presented the roadmap, {PERSON:Jonas Lindqvist} took notes.",
    "Please cc {PERSON:Fatima Zahra} on the incident report.",
    "I talked to {PERSON:Sean O'Brien} yesterday about the billing bug.",
    "{PERSON:Yuki Nakamura}'s laptop needs a new SSD.",
    "Reminder from {PERSON:Emily Carter}: submit the expense report.",
    "Hi, I'm {PERSON:Lucas Moreau} and I handle the vendor contracts.",
    "Send the draft to {PERSON:Grace Kim} ({EMAIL:grace.kim@acme-mail.com}) before noon.",
    "{PERSON:Mohammed Al-Rashid} approved the budget increase.",
    "Her manager, {PERSON:Beatriz Costa}, signed off on the change.",
    "Schedule a call with {PERSON:Liam Walsh} at {PHONE:+353 87 123 4567}.",
    "Text {PERSON:Nina Petrova} on {PHONE:(415) 555-0134} when you land.",
    "Contact {PERSON:Wei Zhang} via {EMAIL:wzhang@example.org} for access.",
    "{PERSON:Isabella Romano} asked to move the retro to Thursday.",
    "Onboarding buddy for the new hire is {PERSON:Kwame Mensah}.",
    "According to {PERSON:Sarah Goldberg}, the outage started at 2am.",
    "Customer SSN on the form: {SSN:512-44-9081}.",
    "Charge {CREDIT_CARD:4111 1111 1111 1111} for the renewal.",
    "Firewall blocked {IP_ADDRESS:203.0.113.45} and {IP_ADDRESS:2001:db8::8a2e:370:7334} last night.",
    "Payroll account {IBAN:DE89 3704 0044 0532 0130 00} belongs to the Berlin office.",
    "export GITHUB_TOKEN={API_KEY:ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5}",
    "The AWS key {API_KEY:AKIAIOSFODNN7EXAMPLE} leaked in the logs, rotate it.",
    "Her number is {PHONE:+49 30 12345678} and her office is in Munich.",
    "Our UK desk answers on {PHONE:+44 20 7946 0958}; the Seoul desk on {PHONE:+82 2-312-3456}.",
    "Bearer {API_KEY:eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ} expired.",
    "We moved the cluster from Google Cloud to Amazon Web Services last quarter.",
    "The New York office runs Visual Studio Code on every laptop.",
    "Upgrade Kubernetes to 1.29 and restart the Load Balancer.",
    "Dream State runs nightly and writes a report revision.",
    "Pull Request 4521 fixes the Redis connection leak.",
    "The Q3 Business Review is on Monday at 10:30 in Room 4.",
    "Use Python 3.11 and PostgreSQL 16 for the new service.",
    "Deploy version 2.4.1 to staging before the Product Launch.",
    "Microsoft Teams and Slack are both allowed for customer calls.",
    "The Apache Kafka topic has 12 partitions and 3 replicas.",
    "Customer Success wants the Annual Report by Friday.",
    "San Francisco and London share the same on-call rota.",
    "Build 2026.11.3 failed on the Ubuntu 22.04 runner.",
    "Order 55012 shipped on 2024-05-06 with tracking 1Z999AA10123456784.",
    "Set max_tokens to 4096 and the temperature to 0.2.",
    "The Security Team rotated the TLS certificates on Tuesday.",
    "Request 550e8400-e29b-41d4-a716-446655440000 timed out after 30s.",
    "Commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 reverted the change.",
    "Error Budget Policy: pause releases when the SLO drops below 99.9%.",
    "The Data Platform team owns Airflow, dbt and Snowflake.",
    "Call the helpdesk if the VPN drops again.",
    "Email the finance team the Q2 numbers.",
    "At 10:30:45 the scheduler logged std::vector errors.",
    "Black Friday traffic peaked at 12,000 requests per second.",
    "The Golden Gate Bridge photo is the new login background.",
]


def parse_marked(line: str) -> dict:
    text, spans, done = "", [], 0
    for match in re.finditer(r"\{([A-Z_]+):([^}]*)\}", line):
        text += line[done:match.start()]
        spans.append({"start": len(text), "end": len(text) + len(match.group(2)), "label": match.group(1)})
        text += match.group(2)
        done = match.end()
    return {"text": text + line[done:], "spans": spans}


def score(rows: list[dict], predicted: list[list[dict]]) -> dict:
    counts = {label: Counter() for label in LABELS}
    negatives = {"sentences": 0, "with_redaction": 0, "spans": Counter(), "examples": []}
    for row, spans in zip(rows, predicted, strict=True):
        gold = {(s["start"], s["end"], s["label"]) for s in row["spans"]}
        pred = {(s["start"], s["end"], s["label"]) for s in spans}
        for start, end, label in gold:
            c = counts[label]
            c["gold"] += 1
            c["strict_tp"] += (start, end, label) in pred
            covered = set()
            for p_start, p_end, p_label in pred:
                if p_label == label:
                    covered.update(range(max(start, p_start), min(end, p_end)))
            c["covered_tp"] += len(covered) == end - start
        for start, end, label in pred:
            c = counts[label]
            c["pred"] += 1
            c["overlap_tp"] += any(g_label == label and start < g_end and g_start < end
                                   for g_start, g_end, g_label in gold)
        if not gold:
            negatives["sentences"] += 1
            if pred:
                negatives["with_redaction"] += 1
                negatives["spans"].update(label for *_, label in pred)
                if len(negatives["examples"]) < 5:
                    negatives["examples"].append([row["text"][s:e] for s, e, _ in sorted(pred)])
    labels = {}
    for label, c in counts.items():
        if not c["gold"] and not c["pred"]:
            continue
        labels[label] = {
            "gold": c["gold"], "predicted": c["pred"],
            "strict": {"precision": _ratio(c["strict_tp"], c["pred"]), "recall": _ratio(c["strict_tp"], c["gold"])},
            "covered": {"precision": _ratio(c["overlap_tp"], c["pred"]), "recall": _ratio(c["covered_tp"], c["gold"])},
        }
    negatives["spans"] = dict(negatives["spans"])
    return {"labels": labels, "negatives": negatives}


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def throughput(run, texts: list[str], repeat: int) -> float:
    run(texts)  # warm-up
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run(texts)
        best = min(best, time.perf_counter() - started)
    return round(len(texts) / best, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ner", action="store_true", help="patterns only")
    parser.add_argument("--model", default=None, help="spaCy package name or pipeline directory")
    args = parser.parse_args()

    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    texts = [row["text"] for row in rows]
    extra = [parse_marked(line) for line in EXTRA]
    redactor = PiiRedactor(**({"model": args.model} if args.model else {}), ner=not args.no_ner)
    started = time.perf_counter()
    if redactor.ner:
        redactor.load()
    load_seconds = round(time.perf_counter() - started, 2)

    result = {
        "data": str(args.data), "messages": len(rows), "ner": redactor.ner, "model": str(redactor.model),
        "model_load_seconds": load_seconds,
        "dev": score(rows, [spans for _, spans in redactor.redact_many(texts)]),
        "extra": score(extra, [spans for _, spans in redactor.redact_many([r["text"] for r in extra])]),
        "throughput_messages_per_second": {
            "full": throughput(redactor.redact_many, texts, args.repeat),
            "patterns_only": throughput(PiiRedactor(ner=False).redact_many, texts, args.repeat),
        },
    }
    if redactor.ner:
        nlp = redactor.load()
        result["throughput_messages_per_second"]["spacy_pipe_only"] = throughput(
            lambda batch: list(nlp.pipe(batch, batch_size=redactor.batch_size)), texts, args.repeat)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    result["cpus"] = os.cpu_count()
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
