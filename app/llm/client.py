"""OpenAI-compatible chat completions over httpx (OpenAI, vLLM, Ollama, LiteLLM gateways).

Transport failures (timeouts, connection errors, 429, 5xx) are retried with jittered
exponential backoff. The answer's *content* is returned as text: judging it is the caller's job.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from app.config import LlmSettings
from app.tracing.setup import trace_http_client

log = structlog.get_logger(__name__)

# Tried in this order under "auto"; a server that rejects one is asked with the next.
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class LLMError(Exception):
    """The LLM could not be reached or gave no usable completion."""


@dataclass(frozen=True, slots=True)
class Completion:
    content: str
    model: str
    latency_ms: float
    # "length" when the answer hit max_tokens: cut off, whatever the grammar promised.
    finish_reason: str | None = None


class ChatClient:
    def __init__(self, llm: LlmSettings, transport: httpx.AsyncBaseTransport | None = None):
        if not llm.llm_base_url or not llm.llm_model:
            raise ValueError("COGNIS_LLM_BASE_URL and COGNIS_LLM_MODEL must both be set")
        headers = {}
        if llm.llm_api_key is not None:
            headers["Authorization"] = f"Bearer {llm.llm_api_key.get_secret_value()}"
        self.model = llm.llm_model
        self._llm = llm
        self._http = httpx.AsyncClient(
            base_url=llm.llm_base_url.rstrip("/") + "/",
            headers=headers,
            timeout=llm.llm_timeout_s,
            transport=transport,
        )
        trace_http_client(self._http)  # while tracing: a span per call, traceparent sent
        formats: list[str] = list(RESPONSE_FORMATS)
        if llm.llm_response_format != "auto":
            formats = [llm.llm_response_format]
        self._formats = formats

    async def close(self) -> None:
        await self._http.aclose()

    def _body(
        self, messages: list[dict[str, str]], schema: dict[str, Any], fmt: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self._llm.llm_max_tokens,
        }
        if fmt == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "memory_operations", "schema": schema, "strict": True},
            }
        elif fmt == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    async def complete_json(
        self, messages: list[dict[str, str]], schema: dict[str, Any]
    ) -> Completion:
        """One completion, constrained to `schema` where the server supports it."""
        attempt = 0
        while True:
            fmt = self._formats[0]
            started = time.perf_counter()
            try:
                response = await self._http.post(
                    "chat/completions", json=self._body(messages, schema, fmt)
                )
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                latency_ms = (time.perf_counter() - started) * 1000
                if (
                    response.status_code == 400
                    and len(self._formats) > 1
                    and _format_rejected(response)
                ):
                    # Remembered for the life of the client: no second round trip next time.
                    log.info("llm.response_format_unsupported", format=fmt)
                    self._formats.pop(0)
                    continue
                if response.status_code < 400:
                    return _completion(response, self.model, latency_ms)
                error = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRYABLE_STATUS:
                    raise LLMError(error)
            if attempt >= self._llm.llm_max_retries:
                raise LLMError(error)
            delay = self._llm.llm_backoff_base_s * (2**attempt) * random.uniform(0.5, 1.0)
            log.warning("llm.retrying", attempt=attempt + 1, error=error, delay_s=round(delay, 3))
            attempt += 1
            await asyncio.sleep(delay)


def _format_rejected(response: httpx.Response) -> bool:
    text = response.text.lower()
    return "response_format" in text or "json_schema" in text or "json_object" in text


def _completion(response: httpx.Response, default_model: str, latency_ms: float) -> Completion:
    try:
        body = response.json()
        content = body["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"not a chat completion: {response.text[:300]}") from exc
    if not isinstance(content, str):
        raise LLMError("the completion has no text content")
    finish_reason = body["choices"][0].get("finish_reason")
    return Completion(
        content=content,
        model=str(body.get("model") or default_model),
        latency_ms=latency_ms,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )
