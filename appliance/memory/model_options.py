"""What the model-backed work shares below the services: how it uses the model (``ModelOptions``), the
plain "no local model" answer, and PII redaction of texts the model reads. The work itself is
``appliance.services.model_work.ModelWork``; the tools that use it are in ``appliance.services``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from appliance.core import redaction

NO_MODEL = "no local model"
Redact = Callable[[list[str]], list[str]]  # PII redaction of many texts at once (spaCy + patterns)


def patterns_only(texts: list[str]) -> list[str]:
    return [redaction.redact_pii(t)[0] for t in texts]


@dataclass(frozen=True)
class ModelOptions:
    """How the model-backed tools use the model (``[inference]`` and ``[maintenance]``)."""

    tool_wait_seconds: float = 120.0  # consolidate / discover_edges / dream_state wait this long, then go on
    reformulate_seconds: float = 20.0  # graph-augmented recall's query rewriting
    call_timeout: float = 300.0  # one summarisation or assessment call
    keep_raw_transcripts: bool = False  # D5: consolidation transcripts are PII-redacted unless this
    dream_min_age_days: float = 7.0
