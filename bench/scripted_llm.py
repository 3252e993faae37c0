"""A scripted OpenAI-compatible chat-completions server on loopback: a real HTTP server that
answers from a script and records every request, so tests can assert what the LLM was shown.

    llm.script("I moved to Osaka", Reply.json({"operations": [...]}))

A rule answers requests whose new message (the one being decided) contains its text; its
replies are used in order, the last one repeating. Requests no rule matches get
`default(request)`: an empty operation list unless replaced (the benchmark installs an echo).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = '{"operations": []}'
    delay_s: float = 0.0
    status: int = 200
    error_body: dict[str, Any] | None = None
    finish_reason: str = "stop"  # "length": the answer ran into max_tokens

    @classmethod
    def json(cls, answer: Any, delay_s: float = 0.0) -> Reply:
        return cls(content=json.dumps(answer), delay_s=delay_s)

    @classmethod
    def ops(cls, *operations: dict[str, Any], delay_s: float = 0.0) -> Reply:
        """An answer with the given operations; keys left out are sent as null."""
        keys = ("op", "target", "content", "category", "scope", "event_time", "reason")
        full = [{k: o.get(k) for k in keys} | o for o in operations]
        return cls.json({"operations": full}, delay_s=delay_s)


@dataclass
class _Rule:
    match: str
    replies: list[Reply]
    used: int = 0


@dataclass
class RecordedRequest:
    body: dict[str, Any]

    @property
    def text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))

    @property
    def new_message(self) -> str:
        """The conversation message being decided (between <<< and >>> in the prompt)."""
        for m in self.body.get("messages", []):
            content = str(m.get("content", ""))
            if m.get("role") == "user" and "<<<\n" in content:
                return content.split("<<<\n", 1)[1].rsplit("\n>>>", 1)[0]
        return self.text

    @property
    def response_format(self) -> str | None:
        fmt = self.body.get("response_format")
        return fmt.get("type") if isinstance(fmt, dict) else None


@dataclass
class ScriptedLLM:
    model: str = "scripted-model"
    requests: list[RecordedRequest] = field(default_factory=list)
    default: Callable[[RecordedRequest], Reply] = lambda _request: Reply()
    # Formats answered with 400, as a server without structured output would.
    rejected_formats: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, match: str, *replies: Reply) -> None:
        with self._lock:
            self._rules.append(_Rule(match, list(replies)))

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self.requests.clear()
            self.rejected_formats.clear()

    def requests_for(self, text: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if text in r.new_message]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.response_format in self.rejected_formats:
                return Reply(
                    status=400,
                    error_body={"error": {"message": "response_format is not supported"}},
                )
            for rule in self._rules:
                if rule.match in request.new_message:
                    reply = rule.replies[min(rule.used, len(rule.replies) - 1)]
                    rule.used += 1
                    return reply
        return self.default(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = llm._answer(RecordedRequest(body))
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    self._send(reply.status, reply.error_body or {"error": {"message": "error"}})
                    return
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": llm.model,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.content},
                                "finish_reason": reply.finish_reason,
                            }
                        ],
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
