"""One finding of ``kumiho-ce doctor``: what was checked, how it stands, what it found and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]  # only a "fail" makes doctor exit non-zero (the unit's ExecStartPre)


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None  # a command to run or a setting to change; None when there is nothing to do

    @staticmethod
    def ok(name: str, detail: str) -> Check:
        return Check(name, "ok", detail)

    @staticmethod
    def warn(name: str, detail: str, fix: str) -> Check:
        return Check(name, "warn", detail, fix)

    @staticmethod
    def fail(name: str, detail: str, fix: str) -> Check:
        return Check(name, "fail", detail, fix)
