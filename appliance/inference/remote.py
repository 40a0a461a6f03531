"""``EndpointModel``: a chat model served by an OpenAI-compatible server, behind the ``ChatModel`` interface.

llama.cpp's llama-server, Ollama, vLLM and OpenAI all answer ``POST {base_url}/chat/completions``; this lets
a machine that already runs one (or a bigger box on the LAN) do the appliance's model work instead of the
in-process GGUF.

* **D6, loopback only by default**: prompts hold the user's memories, so the constructor refuses a
  ``base_url`` whose host is not loopback unless the operator allowed remote endpoints. Only literal
  loopback addresses and ``localhost`` count; other names are never resolved here (a DNS answer can
  change after the check), so they count as remote. Redirects are not followed and proxy variables from
  the environment are ignored, so a request goes to the host that was checked and nowhere else.
* **Structured output**: ``complete_json`` sends the schema as a strict ``json_schema`` response format,
  and validates the answer against it whatever the server claims to enforce.
* **Deadlines and cancellation**: ``timeout`` bounds each phase of the request (connect, send, wait for
  the answer); the server is not streamed, so the wait for the answer is the generation. The cancel event
  is checked before the request is sent and again when the answer arrives (a late answer is dropped).
* **Secrets**: the API key goes in the ``Authorization`` header only; no error message or log names it,
  and URLs are shown without user info or query string.
* **Nothing the server says is passed on**: an error names the HTTP status or what was wrong with the
  answer, never the server's text (its body, a refusal, an invalid answer); only fields the appliance parsed
  and validated leave this module.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from appliance.core.ports import (
    Message,
    ModelCancelled,
    ModelError,
    ModelOutputError,
    ModelStatus,
    ModelTimeout,
    ModelUnavailable,
    Progress,
)
from appliance.errors import InvalidArgument
from appliance.inference.chat import check_schema, parse_json_answer

log = logging.getLogger(__name__)

# A whole answer wrapped in a Markdown code fence (```json … ```), as chatty models like to write it.
_FENCE = re.compile(r"\A\s*```[\w+-]*[ \t]*\n?(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is ``localhost`` or a literal loopback address (127.0.0.0/8, ::1).

    No DNS lookup: any other name is remote. The scheme is not checked here (the constructor does that).
    The URL is parsed by httpx, the parser that picks the host the request goes to.
    """
    try:
        host = httpx.URL(url).host
    except (httpx.InvalidURL, TypeError):
        return False
    return _is_loopback_host(host)


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name (or no host at all): remote, without asking DNS
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback  # ::ffff:127.0.0.1
    return address.is_loopback


def _parse_base_url(base_url: str, allow_remote: bool) -> httpx.URL:
    """The endpoint's URL, or ``InvalidArgument`` (field ``base_url``) when D6 or the scheme forbids it."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise InvalidArgument(f"base_url is not a URL: {exc}", field="base_url") from None
    if url.scheme not in ("http", "https"):
        raise InvalidArgument(f"base_url must be an http:// or https:// URL, not {url.scheme or 'no'} scheme "
                              "(for example http://127.0.0.1:8080/v1)", field="base_url")
    if not url.host:
        raise InvalidArgument("base_url has no host (for example http://127.0.0.1:8080/v1)", field="base_url")
    if not allow_remote and not _is_loopback_host(url.host):
        raise InvalidArgument(f"base_url host {url.host} is not loopback: prompts would leave this machine. "
                              "To allow it, set inference.allow_remote_endpoints = true", field="base_url")
    return url


def _shown(url: httpx.URL) -> str:
    """The URL as messages show it: no user info (a password) and no query string (some put keys there)."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None)).rstrip("/")


def _unfenced(content: str) -> str:
    match = _FENCE.match(content)
    return match.group(1) if match else content


class EndpointModel:
    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, request_timeout: float = 120.0,
                 allow_remote: bool = False, transport: httpx.BaseTransport | None = None) -> None:
        url = _parse_base_url(base_url, allow_remote)
        self.model = model
        self.model_id = f"endpoint:{model}@{url.host}"
        self.base_url = _shown(url)
        self.request_timeout = request_timeout
        self._url = url.copy_with(path=url.path.rstrip("/") + "/chat/completions")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._api_key = api_key
        self._calls = 0
        self._lock = threading.Lock()
        # trust_env=False: no proxy from the environment, so the request goes to the host D6 checked
        self._client = httpx.Client(transport=transport, trust_env=False, follow_redirects=False)
        if not _is_loopback_host(url.host):
            log.info("%s: prompts go to the remote endpoint %s (allowed by the configuration)",
                     self.model_id, self.base_url)

    # -- the ChatModel interface -------------------------------------------------------------------------

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        check_schema(schema)
        response_format = {"type": "json_schema",
                           "json_schema": {"name": "answer", "schema": dict(schema), "strict": True}}
        text, finish = self._run(messages, max_tokens, timeout, cancel, temperature, progress,
                                 {"response_format": response_format})
        return parse_json_answer(_unfenced(text), finish, schema, self.model_id, max_tokens)

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        return self._run(messages, max_tokens, timeout, cancel, temperature, progress, {})[0]

    def status(self) -> ModelStatus:
        """Always available: the server is not probed (a failed call says why)."""
        return ModelStatus(True, "loaded", model_id=self.model_id, path=self.base_url, calls=self._calls)

    def close(self) -> None:
        self._client.close()

    # -- one call ----------------------------------------------------------------------------------------

    def _run(self, messages: Sequence[Message], max_tokens: int, timeout: float | None,
             cancel: threading.Event | None, temperature: float, progress: Progress | None,
             extra: dict[str, Any]) -> tuple[str, str | None]:
        if max_tokens < 1:
            raise ModelError("max_tokens must be at least 1")
        if cancel is not None and cancel.is_set():
            raise ModelCancelled(f"the {self.model_id} call was cancelled")
        body = {"model": self.model, "messages": [dict(m) for m in messages], "max_tokens": max_tokens,
                "temperature": temperature, **extra}
        with self._lock:
            self._calls += 1
        answer = self._post(body, timeout if timeout is not None else self.request_timeout)
        if cancel is not None and cancel.is_set():
            raise ModelCancelled(f"the {self.model_id} call was cancelled (its answer was dropped)")
        text, finish, used = self._message(answer)
        if progress is not None and used is not None:
            progress(used, max_tokens)
        return text, finish

    def _post(self, body: dict[str, Any], timeout: float) -> Any:
        """The server's decoded JSON answer, or the ``ModelError`` that says what went wrong."""
        try:
            response = self._client.post(self._url, json=body, headers=self._headers, timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise ModelTimeout(f"the {self.model_id} call passed its deadline ({timeout:g} s); allow a longer "
                               "timeout, fewer tokens or a shorter prompt") from None
        except httpx.ConnectError as exc:
            raise ModelUnavailable(f"cannot reach the model endpoint {self.base_url} ({self._redacted(str(exc))}); "
                                   "is the server running?") from None
        except httpx.TransportError as exc:
            raise ModelError(f"the connection to {self.base_url} failed: {type(exc).__name__} "
                             f"({self._redacted(str(exc))})") from None
        if response.status_code in (401, 403):
            raise ModelUnavailable(f"the endpoint refused the API key (HTTP {response.status_code} from "
                                   f"{self.base_url}); check the key" + ("" if self._api_key else " (none is set)"))
        if not response.is_success:
            raise ModelError(f"{self.base_url} answered HTTP {response.status_code} (the server's log says why)")
        try:
            return response.json()
        except ValueError:
            raise ModelError(f"{self.base_url} answered something that is not JSON "
                             f"({len(response.content)} bytes)") from None

    def _message(self, answer: Any) -> tuple[str, str | None, int | None]:
        """(content, finish_reason, completion tokens) of the first choice."""
        try:
            choice = answer["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"{self.base_url} answered JSON that is not a chat completion (no "
                             "choices[0].message)") from None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            refused = isinstance(message, dict) and bool(message.get("refusal"))
            raise ModelOutputError(f"{self.model_id} answered no text" + (" (it refused)" if refused else ""))
        usage = answer.get("usage") if isinstance(answer, dict) else None
        used = usage.get("completion_tokens") if isinstance(usage, dict) else None
        return content, choice.get("finish_reason"), used if isinstance(used, int) else None

    def _redacted(self, text: str) -> str:
        """``text`` without the API key (a server may echo the key it refused)."""
        return text.replace(self._api_key, "***") if self._api_key else text
