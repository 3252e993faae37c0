-- Cognis Memory: comments on the tables analysts read, so that psql's \d+ explains them
-- (installed by migration 0016_reader_roles).

COMMENT ON TABLE memories IS
    'One row per version of a memory. [created_at, superseded_at) is the interval the version was current (transaction time), event_time is when the fact began in the world. Row-level security: one tenant per reader.';
COMMENT ON COLUMN memories.id IS 'The version''s id.';
COMMENT ON COLUMN memories.user_id IS 'The user the memory is about, unique within its tenant only.';
COMMENT ON COLUMN memories.chain_id IS 'The memory''s chain: the id of its version 1, shared by all its versions.';
COMMENT ON COLUMN memories.version IS 'Version number within the chain, from 1.';
COMMENT ON COLUMN memories.content IS 'The fact, as one sentence.';
COMMENT ON COLUMN memories.category IS 'Its category (categories.name).';
COMMENT ON COLUMN memories.scope IS 'USER (the user''s own) or CONTEXT (bound to session_id).';
COMMENT ON COLUMN memories.session_id IS 'The session of a CONTEXT memory (else the session it came from, if any).';
COMMENT ON COLUMN memories.is_current IS 'True exactly while superseded_at IS NULL: the chain''s current version.';
COMMENT ON COLUMN memories.replaces_id IS 'The version this one replaced, NULL for version 1.';
COMMENT ON COLUMN memories.speaker IS 'Who said it, as the message named them.';
COMMENT ON COLUMN memories.event_time IS 'Event time: when the fact began in the world, NULL: counts from created_at.';
COMMENT ON COLUMN memories.event_end IS 'Event time: when the fact stopped holding in the world (PATCH or DELETE with event_end). NULL: not known to have ended. Not superseded_at, which is when the system stopped holding this version.';
COMMENT ON COLUMN memories.created_at IS 'Transaction time: when this version was recorded.';
COMMENT ON COLUMN memories.superseded_at IS 'Transaction time: when an update or a delete ended this version, NULL while current.';
COMMENT ON COLUMN memories.embedding_768d IS 'The content''s 768-dimension embedding (search).';
COMMENT ON COLUMN memories.embedding_256d IS 'The content''s 256-dimension embedding (search, HNSW-indexed).';
COMMENT ON COLUMN memories.metadata IS 'Caller-supplied JSON kept with the memory.';
COMMENT ON COLUMN memories.source_message_id IS 'The message it was extracted from (messages.id), if any.';
COMMENT ON COLUMN memories.external_id IS 'The importer''s id of an imported memory (version 1), unique per tenant and user.';
COMMENT ON COLUMN memories.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN memories.context IS 'Caller-supplied context of the fact (what it refers to).';
COMMENT ON COLUMN memories.context_embedding_768d IS 'The context''s embedding.';
COMMENT ON COLUMN memories.follows_chain_id IS 'The chain this memory follows on from (a later fact of the same thread), if any.';
COMMENT ON COLUMN memories.mentioned_at IS 'A time the content mentions, resolved against event_time or created_at.';

COMMENT ON TABLE messages IS
    'One row per message a user sent (the input memories are extracted from).';
COMMENT ON COLUMN messages.id IS 'The message''s id.';
COMMENT ON COLUMN messages.user_id IS 'The sender''s user id, unique within its tenant only.';
COMMENT ON COLUMN messages.session_id IS 'The conversation it belongs to.';
COMMENT ON COLUMN messages.speaker IS 'Who spoke, as the caller named them.';
COMMENT ON COLUMN messages.role IS 'user or assistant.';
COMMENT ON COLUMN messages.content IS 'The text.';
COMMENT ON COLUMN messages.sent_at IS 'When the caller says it was sent.';
COMMENT ON COLUMN messages.created_at IS 'When the service stored it.';
COMMENT ON COLUMN messages.embedding_256d IS '256-dimension embedding of the text.';
COMMENT ON COLUMN messages.metadata IS 'Caller-supplied JSON.';
COMMENT ON COLUMN messages.idempotency_key IS 'The caller''s key for this message, unique per tenant and user.';
COMMENT ON COLUMN messages.embedding_768d IS '768-dimension embedding of the text.';
COMMENT ON COLUMN messages.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN messages.utc_offset_minutes IS 'The sender''s UTC offset when sent, in minutes, if given.';

COMMENT ON TABLE ingest_decisions IS
    'One row per decision the ingestion took for a message (the audit trail): what it did to which memory, and why.';
COMMENT ON COLUMN ingest_decisions.id IS 'The decision''s id (order of writing).';
COMMENT ON COLUMN ingest_decisions.job_id IS 'The job (ingest_tasks.job_id) it belongs to.';
COMMENT ON COLUMN ingest_decisions.message_id IS 'The message decided on (messages.id).';
COMMENT ON COLUMN ingest_decisions.user_id IS 'The user, unique within its tenant only.';
COMMENT ON COLUMN ingest_decisions.position IS 'Order of the decision within its message.';
COMMENT ON COLUMN ingest_decisions.operation IS 'ADD, UPDATE, DELETE or NONE.';
COMMENT ON COLUMN ingest_decisions.target_memory_id IS 'The version an UPDATE, DELETE or NONE refers to.';
COMMENT ON COLUMN ingest_decisions.memory_id IS 'The version it wrote.';
COMMENT ON COLUMN ingest_decisions.content IS 'The fact it decided on.';
COMMENT ON COLUMN ingest_decisions.category IS 'The fact''s category.';
COMMENT ON COLUMN ingest_decisions.reason IS 'Why, as the extractor said.';
COMMENT ON COLUMN ingest_decisions.extractor IS 'llm or deterministic.';
COMMENT ON COLUMN ingest_decisions.model IS 'The LLM that decided, if any.';
COMMENT ON COLUMN ingest_decisions.raw_answer_sha256 IS 'SHA-256 of the LLM''s raw answer (not stored).';
COMMENT ON COLUMN ingest_decisions.latency_ms IS 'LLM time for the message, in milliseconds.';
COMMENT ON COLUMN ingest_decisions.fallback_used IS 'True when the LLM''s answer failed validation and the deterministic extractor decided.';
COMMENT ON COLUMN ingest_decisions.failure IS 'Each failed attempt''s reason.';
COMMENT ON COLUMN ingest_decisions.created_at IS 'When the decision was recorded.';
COMMENT ON COLUMN ingest_decisions.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN ingest_decisions.event_time IS 'Event time of the version written.';
COMMENT ON COLUMN ingest_decisions.llm_gate IS 'call or skip (decided without an LLM call), NULL without an LLM.';
COMMENT ON COLUMN ingest_decisions.gate_similarity IS 'The similarity the gate decided on.';
COMMENT ON COLUMN ingest_decisions.prompt_version IS 'The version of the extraction prompt.';

COMMENT ON TABLE ingest_tasks IS
    'One row per message to process (the jobs table, a job is the tasks sharing job_id).';
COMMENT ON COLUMN ingest_tasks.message_id IS 'The message (messages.id).';
COMMENT ON COLUMN ingest_tasks.job_id IS 'The job it belongs to.';
COMMENT ON COLUMN ingest_tasks.user_id IS 'The user, unique within its tenant only.';
COMMENT ON COLUMN ingest_tasks.queue IS 'The queue it waits in.';
COMMENT ON COLUMN ingest_tasks.sent_at IS 'When the message was sent.';
COMMENT ON COLUMN ingest_tasks.scope IS 'The scope its memories get (USER or CONTEXT).';
COMMENT ON COLUMN ingest_tasks.state IS 'queued, running, done or failed.';
COMMENT ON COLUMN ingest_tasks.attempts IS 'Attempts so far.';
COMMENT ON COLUMN ingest_tasks.available_at IS 'When it may next be claimed.';
COMMENT ON COLUMN ingest_tasks.lease_token IS 'The token of the worker holding it.';
COMMENT ON COLUMN ingest_tasks.lease_expires_at IS 'When the worker''s claim lapses.';
COMMENT ON COLUMN ingest_tasks.last_error IS 'The last attempt''s error.';
COMMENT ON COLUMN ingest_tasks.created_at IS 'When it was queued.';
COMMENT ON COLUMN ingest_tasks.finished_at IS 'When it finished.';
COMMENT ON COLUMN ingest_tasks.tenant_id IS 'The tenant the row belongs to (tenants.id).';

COMMENT ON TABLE outbox IS
    'Search-index work waiting for the relay (one row per change to mirror into OpenSearch).';
COMMENT ON COLUMN outbox.id IS 'Order of writing.';
COMMENT ON COLUMN outbox.user_id IS 'The user, unique within its tenant only.';
COMMENT ON COLUMN outbox.op IS 'What to do in the index (index, delete, ...).';
COMMENT ON COLUMN outbox.memory_id IS 'The memory version concerned.';
COMMENT ON COLUMN outbox.payload IS 'Extra data for the operation.';
COMMENT ON COLUMN outbox.created_at IS 'When it was written.';
COMMENT ON COLUMN outbox.processed_at IS 'When the relay applied it, NULL while pending.';
COMMENT ON COLUMN outbox.attempts IS 'Failed attempts so far.';
COMMENT ON COLUMN outbox.last_error IS 'The last failure.';
COMMENT ON COLUMN outbox.next_attempt_at IS 'When the relay retries.';
COMMENT ON COLUMN outbox.tenant_id IS 'The tenant the row belongs to (tenants.id).';

COMMENT ON TABLE idempotency_keys IS
    'The response each write sent with an Idempotency-Key got, replayed to a retry, kept until expires_at.';
COMMENT ON COLUMN idempotency_keys.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN idempotency_keys.user_id IS 'The user, unique within its tenant only.';
COMMENT ON COLUMN idempotency_keys.key IS 'The Idempotency-Key header.';
COMMENT ON COLUMN idempotency_keys.route IS 'Method and route template of the write.';
COMMENT ON COLUMN idempotency_keys.request_hash IS 'SHA-256 of the request.';
COMMENT ON COLUMN idempotency_keys.state IS 'running (not answered yet) or done.';
COMMENT ON COLUMN idempotency_keys.job_id IS 'The job of a message submission.';
COMMENT ON COLUMN idempotency_keys.response_status IS 'The HTTP status replayed.';
COMMENT ON COLUMN idempotency_keys.response_body IS 'The JSON bytes replayed.';
COMMENT ON COLUMN idempotency_keys.created_at IS 'When the first request came.';
COMMENT ON COLUMN idempotency_keys.expires_at IS 'When the relay deletes it.';

COMMENT ON TABLE categories IS
    'The categories a memory may have: the paper''s 15 seed rows and any a deployment added. Shared by every tenant.';
COMMENT ON COLUMN categories.name IS 'The category''s name (memories.category).';
COMMENT ON COLUMN categories.description IS 'What belongs in it.';
COMMENT ON COLUMN categories.examples IS 'Example sentences.';
COMMENT ON COLUMN categories.created_at IS 'When it was added.';

COMMENT ON TABLE tenants IS
    'The deployment''s customers. Readable by the owner and cognis_auditor.';
COMMENT ON COLUMN tenants.id IS 'The tenant''s id (tenant_id everywhere).';
COMMENT ON COLUMN tenants.name IS 'Its unique name.';
COMMENT ON COLUMN tenants.created_at IS 'When it was created.';

COMMENT ON TABLE user_erasures IS
    'The tombstone an erase leaves: writes of the user are refused until writes_refused_until.';
COMMENT ON COLUMN user_erasures.tenant_id IS 'The tenant the row belongs to (tenants.id).';
COMMENT ON COLUMN user_erasures.user_id IS 'The erased user.';
COMMENT ON COLUMN user_erasures.erased_at IS 'When the erase ran.';
COMMENT ON COLUMN user_erasures.writes_refused_until IS 'Until when every write of the user is refused.';
