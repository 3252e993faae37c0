"""Settings: nine groups, one module each, read from COGNIS_* environment variables.

The whole, `Settings`, holds one object per group (`settings.retrieval.rrf_k`,
`settings.store.database_url`) and is seen only by the composition roots (app/runtime.py,
app/asgi.py, app/cli/, the model service's and the local LLM's entry points): every other
component is given the group it reads (tests/test_settings_layering.py keeps it so).
A variable keeps the flat name of its field, `COGNIS_<FIELD NAME>` (`COGNIS_RRF_K`, not
`COGNIS_RETRIEVAL__RRF_K`): field names are unique across the groups, so a flat name
says which group it sets. `Settings(rrf_k=10)` and `settings.model_copy(update={"rrf_k": 10})`
take flat names too. The settings table of docs/configuration.md is generated from the groups
(`python -m app.settings_doc`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Self, cast

from pydantic import BaseModel, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from app.config.api import ApiSettings
from app.config.embedding import EmbeddingBackend, EmbeddingSettings
from app.config.ingest import IngestSettings
from app.config.keys import DEV_API_KEY, KeySettings
from app.config.llm import LOCAL_LLM_ALIAS, LlmSettings
from app.config.relay import RelaySettings
from app.config.retention import RetentionSettings
from app.config.retrieval import RetrievalSettings
from app.config.store import StoreSettings

__all__ = [
    "DEV_API_KEY",
    "GROUPS",
    "LOCAL_LLM_ALIAS",
    "SETTINGS_GROUPS",
    "SETTING_FIELDS",
    "ApiSettings",
    "EmbeddingBackend",
    "EmbeddingSettings",
    "IngestSettings",
    "KeySettings",
    "LlmSettings",
    "RelaySettings",
    "RetentionSettings",
    "RetrievalSettings",
    "Settings",
    "StoreSettings",
    "get_settings",
]

ENV_PREFIX = "COGNIS_"

# The groups by the attribute of `Settings` that holds each, in the order docs/configuration.md
# lists them.
GROUPS: dict[str, type[BaseModel]] = {
    "store": StoreSettings,
    "embedding": EmbeddingSettings,
    "api": ApiSettings,
    "keys": KeySettings,
    "retrieval": RetrievalSettings,
    "relay": RelaySettings,
    "retention": RetentionSettings,
    "llm": LlmSettings,
    "ingest": IngestSettings,
}
SETTINGS_GROUPS: tuple[type[BaseModel], ...] = tuple(GROUPS.values())

# Every setting by its flat name (the variable's name without the prefix), and its group.
SETTING_FIELDS: dict[str, FieldInfo] = {
    name: field for group in SETTINGS_GROUPS for name, field in group.model_fields.items()
}
GROUP_OF: dict[str, str] = {
    name: attribute for attribute, group in GROUPS.items() for name in group.model_fields
}


class FlatEnvironment(PydanticBaseSettingsSource):
    """Every group's fields from COGNIS_<FIELD NAME> variables, as one flat mapping."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        # A group is a plain model; the environment source reads only its fields' names and
        # types, so it serves for a group as for a settings class.
        self._sources = [
            EnvSettingsSource(
                cast("type[BaseSettings]", group), case_sensitive=False, env_prefix=ENV_PREFIX
            )
            for group in SETTINGS_GROUPS
        ]

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ reads the groups' sources whole

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for source in self._sources:
            values |= source()
        return values


class Settings(BaseSettings):
    """Every knob of the service, read from COGNIS_* variables, one object per group. Defaults
    are the paper's constants."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    store: StoreSettings
    embedding: EmbeddingSettings
    api: ApiSettings
    keys: KeySettings
    retrieval: RetrievalSettings
    relay: RelaySettings
    retention: RetentionSettings
    llm: LlmSettings
    ingest: IngestSettings

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments first, then the flat variables; no .env file, no secrets folder (as before).
        return (init_settings, FlatEnvironment(settings_cls))

    @model_validator(mode="before")
    @classmethod
    def _flat_names_to_their_groups(cls, values: object) -> object:
        """{"rrf_k": 10, ...} -> {"retrieval": {"rrf_k": 10}, ...}; a group given whole is kept
        as it is (its flat names, if any, are then ignored)."""
        if not isinstance(values, Mapping):
            return values
        grouped: dict[str, Any] = {attribute: {} for attribute in GROUPS}
        for name, value in values.items():
            if name in GROUPS:
                grouped[name] = grouped[name] | dict(value) if isinstance(value, Mapping) else value
            elif name in GROUP_OF and isinstance(grouped[GROUP_OF[name]], dict):
                grouped[GROUP_OF[name]][name] = value
        return grouped

    @model_validator(mode="after")
    def _jobs_outlive_their_keys(self) -> Settings:
        # A retried submission replays its key's response, which names its job: the job must
        # still be there to be polled for as long as the key is.
        for name in ("ingest_task_retention_days", "batch_job_retention_days"):
            days = getattr(self.retention, name)
            if 0 < days * 86_400 < self.api.idempotency_ttl_s:
                raise ValueError(
                    f"COGNIS_{name.upper()} must be 0 (forever) or at least "
                    "COGNIS_IDEMPOTENCY_TTL_S, so a replayed response never names a job "
                    "that is gone"
                )
        return self

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with some settings changed, named flat (`{"rrf_k": 10}`) or by group; like
        pydantic's, it does not validate the changes."""
        changes: dict[str, Any] = {}
        by_group: dict[str, dict[str, Any]] = {}
        for name, value in (update or {}).items():
            if name in GROUP_OF:
                by_group.setdefault(GROUP_OF[name], {})[name] = value
            else:
                changes[name] = value
        for attribute, group_changes in by_group.items():
            group = changes.get(attribute, getattr(self, attribute))
            changes[attribute] = group.model_copy(update=group_changes, deep=deep)
        return super().model_copy(update=changes, deep=deep)


@lru_cache
def get_settings() -> Settings:
    return Settings()  # type: ignore[call-arg]
