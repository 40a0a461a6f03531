"""Prompt templates, one Markdown file each, loaded by name: ``render("json_smoke", text=…)``.

A template is a sequence of chat messages. Each starts with a line ``## system``, ``## user`` or
``## assistant`` (several allow few-shot examples); anything before the first is a note for people and is
not sent. Values go in as ``$name`` or ``${name}`` (``string.Template``: JSON braces in a prompt need no
escaping; ``$$`` is a literal dollar). Rendering fails when a template names a value the caller did not
give, or the caller gives one the template does not use.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from string import Template

from appliance.errors import KumihoError

DIRECTORY = Path(__file__).parent
_HEADER = re.compile(r"^## (system|user|assistant)[ \t]*$", re.MULTILINE)


class PromptError(KumihoError):
    code = "prompt_error"


def names() -> list[str]:
    return sorted(p.stem for p in DIRECTORY.glob("*.md"))


@cache
def template(name: str) -> tuple[tuple[str, Template], ...]:
    """The parsed template ``name`` (``prompts/<name>.md``): (role, text) pairs."""
    path = DIRECTORY / f"{name}.md"
    if not re.fullmatch(r"[a-z0-9_]+", name) or not path.is_file():
        raise PromptError(f"no prompt template named {name!r}; known: {', '.join(names())}")
    text = path.read_text(encoding="utf-8")
    parts = _HEADER.split(text)[1:]  # [role, body, role, body, …]
    if not parts:
        raise PromptError(f"prompt template {path} has no '## system' / '## user' section")
    return tuple((role, Template(body.strip())) for role, body in zip(parts[::2], parts[1::2], strict=True))


def placeholders(name: str) -> set[str]:
    found: set[str] = set()
    for _, body in template(name):
        found.update(body.get_identifiers())
    return found


def render(name: str, **values: object) -> list[dict[str, str]]:
    """The messages of template ``name`` with ``values`` substituted."""
    wanted = placeholders(name)
    if missing := wanted - values.keys():
        raise PromptError(f"prompt {name!r} needs values for: {', '.join(sorted(missing))}")
    if unused := values.keys() - wanted:
        raise PromptError(f"prompt {name!r} has no placeholder for: {', '.join(sorted(unused))}")
    text = {k: str(v) for k, v in values.items()}
    return [{"role": role, "content": body.substitute(text)} for role, body in template(name)]
