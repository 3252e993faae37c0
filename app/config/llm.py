"""Settings of the llm group: `LlmSettings`, read as `settings.llm`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from app.config.validators import empty_is_unset

# The name the local LLM server answers to (COGNIS_LLM_GGUF_PATH without COGNIS_LLM_MODEL).
LOCAL_LLM_ALIAS = "local"


class LlmSettings(BaseModel):
    """LLM.

    The OpenAI-compatible model ingestion asks (SPEC section 3), remote or a local GGUF file.
    Without one, the deterministic extractor decides.
    """

    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible API root (e.g. `http://127.0.0.1:11434/v1`, Ollama); "
        "unset: deterministic extractor",
    )
    llm_model: str | None = Field(default=None, description="model name sent to that server")
    llm_api_key: SecretStr | None = Field(
        default=None, description="bearer key, if the server needs one"
    )
    llm_timeout_s: float = Field(default=30.0, description="per request")
    llm_max_retries: int = Field(
        default=2,
        description="transport retries (timeouts, 429, 5xx), exponential and jittered; an "
        "invalid answer is retried once on top",
    )
    llm_backoff_base_s: float = Field(
        default=0.5, description="first retry's backoff, doubled on each further one"
    )
    llm_response_format: Literal["auto", "json_schema", "json_object", "none"] = Field(
        default="auto",
        description="`json_schema`, `json_object`, `none`, or `auto` (try them in that order)",
    )
    llm_max_tokens: int = Field(default=1024, description="answer length limit")
    llm_gguf_path: str | None = Field(
        default=None,
        description="a GGUF file: `make up` serves it locally (xllamacpp, "
        "app/llm/local_server.py) and the service uses it unless `COGNIS_LLM_BASE_URL` is set; "
        "`qwen-1.5b`, `qwen-0.5b` or `smollm2` (the test model) in `make up` name a model "
        "scripts/install-llm.sh provides",
    )
    llm_local_port: int = Field(default=8089, description="the local server's port (on 127.0.0.1)")
    # On a shared CPU, llama.cpp with more threads than free cores slows down many times
    # (docs/benchmarks/local-llm.md).
    llm_local_threads: int = Field(default=1, description="the local server's threads")
    llm_local_context: int = Field(default=4096, description="the local server's context size")

    @field_validator("llm_gguf_path", mode="before")
    @classmethod
    def _empty_gguf_path_is_unset(cls, value: object) -> object:
        return empty_is_unset(value)

    @model_validator(mode="after")
    def _local_llm_is_the_default_endpoint(self) -> LlmSettings:
        if self.llm_gguf_path and not self.llm_base_url:
            self.llm_base_url = f"http://127.0.0.1:{self.llm_local_port}/v1"
            self.llm_model = self.llm_model or LOCAL_LLM_ALIAS
        return self

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)
