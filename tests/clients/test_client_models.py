"""The Python client's models against the server's schemas, field by field: a field the server
sends that a response model lacks is silently dropped by the client (it was: a memory's
context, the LLM gate's verdict, an erase's receipt), and a field the server accepts that a
request model lacks cannot be sent. Both OpenAPI and these structs come from the same
definitions (app/api/schemas), so comparing the structs compares the published document."""

from __future__ import annotations

import typing

import msgspec
import pytest
from cognis_client import _calls, models

from app.api.schemas import context, imports, memories, messages, search, users
from app.memories.domain import MemoryUpdate

# client model <- the server schema it decodes
RESPONSES = [
    (models.Memory, memories.MemoryOut),
    (models.MemoryPage, memories.MemoryList),
    (models.History, memories.HistoryOut),
    (models.MemoriesDeleted, memories.MemoriesDeletedOut),
    (models.StageScore, search.StageScoreOut),
    (models.SearchHit, search.SearchHitOut),
    (models.IndexLag, search.IndexLagOut),
    (models.SearchResult, search.SearchOut),
    (models.Decision, messages.DecisionOut),
    (models.MessageResult, messages.MessageResultOut),
    (models.SubmittedMessage, messages.SubmittedMessageOut),
    (models.Job, messages.JobOut),
    (models.BatchJob, memories.BatchJobOut),
    (models.UserSummary, users.UserSummaryOut),
    (models.UserPage, users.UserList),
    (models.Erasure, users.EraseOut),
    (models.DryRunMessage, messages.DryRunMessageOut),
    (models.DryRun, messages.DryRunOut),
    (models.ImportLineError, imports.ImportErrorOut),
    (models.ImportSummary, imports.ImportSummaryOut),
    (models.CitedMemory, context.CitedOut),
    (models.Context, context.ContextOut),
    (models.ReplacedVersion, context.ReplacedOut),
    (models.ProfileFact, context.ProfileFactOut),
    (models.ProfileCategory, context.ProfileCategoryOut),
    (models.Profile, context.ProfileOut),
]
# client model -> the server schema it encodes into
REQUESTS = [
    (models.MemoryInput, memories.MemoryCreate),
    (models.MemoryChanges, MemoryUpdate),
    (models.Message, messages.MessageIn),
]


def wire_names(struct: type[msgspec.Struct]) -> set[str]:
    return {field.encode_name for field in msgspec.structs.fields(struct)}


@pytest.mark.parametrize(("client", "server"), RESPONSES, ids=lambda t: t.__name__)
def test_a_response_model_carries_every_field_the_server_sends(
    client: type[msgspec.Struct], server: type[msgspec.Struct]
) -> None:
    assert wire_names(server) - wire_names(client) == set()
    assert wire_names(client) - wire_names(server) == set()


@pytest.mark.parametrize(("client", "server"), REQUESTS, ids=lambda t: t.__name__)
def test_a_request_model_can_send_every_field_the_server_takes(
    client: type[msgspec.Struct], server: type[msgspec.Struct]
) -> None:
    assert wire_names(server) == wire_names(client)


def test_search_takes_every_option_of_the_search_body() -> None:
    options = set(typing.get_type_hints(_calls.SearchOptions))
    assert wire_names(search.SearchBody) - {"query"} == options


def test_context_takes_every_option_of_the_context_body() -> None:
    options = set(typing.get_type_hints(_calls.ContextOptions))
    assert wire_names(context.ContextBody) - {"query"} == options


def test_every_name_the_package_exports_can_be_imported() -> None:
    """`from cognis_client import X` for each X of `__all__` (TooMuchWorkError was listed and
    documented, but not imported: ImportError)."""
    import cognis_client

    assert [name for name in cognis_client.__all__ if not hasattr(cognis_client, name)] == []


def test_a_memorys_fields_may_be_given_as_keywords_over_its_text_or_struct() -> None:
    """mem0's habit, `add(text, metadata=...)`: the keywords are the memory's own fields."""
    from cognis_client import MemoryInput
    from cognis_client._calls import as_memory_input

    made = as_memory_input("I live in Porto", metadata={"source": "chat"}, category="travel")
    assert made == MemoryInput(
        content="I live in Porto", metadata={"source": "chat"}, category="travel"
    )
    over = as_memory_input(MemoryInput(content="x", category="hobbies"), category="travel")
    assert over == MemoryInput(content="x", category="travel")
    assert as_memory_input({"content": "y", "speaker": "Ann"}) == MemoryInput(
        content="y", speaker="Ann"
    )
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        as_memory_input("z", colour="blue")
