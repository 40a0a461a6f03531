"""The Containerfile read as a list of stages of instructions (continuation lines joined, comments dropped), for
the fast checks of tests/container/test_containerfile.py."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, …
    text: str  # the rest of the line, continuations joined

    def words(self) -> list[str]:
        """The arguments: a JSON array (exec form) or shell words."""
        if self.text.startswith("["):
            return [str(word) for word in json.loads(self.text)]
        return shlex.split(self.text)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def run_text(self) -> str:
        """Every RUN of the stage, as one text."""
        return "\n".join(i.text for i in self.of("RUN"))


@dataclass
class Containerfile:
    preamble: list[Instruction]  # the ARGs before the first FROM
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def global_arg(self, name: str) -> str | None:
        for instruction in self.preamble:
            key, _, value = instruction.text.partition("=")
            if instruction.keyword == "ARG" and key == name:
                return value.strip('"')
        return None


def instructions(text: str) -> list[Instruction]:
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        joined.append(pending + stripped)
        pending = ""
    assert not pending, "the Containerfile ends inside a continued line"
    result = []
    for line in joined:
        keyword, _, rest = line.partition(" ")
        result.append(Instruction(keyword.upper(), re.sub(r"\s+", " ", rest).strip()))
    return result


def parse(path: Path = CONTAINERFILE) -> Containerfile:
    preamble: list[Instruction] = []
    stages: list[Stage] = []
    for instruction in instructions(path.read_text()):
        if instruction.keyword == "FROM":
            words = instruction.text.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif stages:
            stages[-1].instructions.append(instruction)
        else:
            preamble.append(instruction)
    return Containerfile(preamble, stages)


def copy_sources(instruction: Instruction) -> tuple[list[str], str, dict[str, str]]:
    """A COPY's sources, destination and --options."""
    words = instruction.words()
    options = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        options[key] = value
    return words[:-1], words[-1], options
