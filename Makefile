# The commands the README names. `make up` serves the API; `make test` runs the suite.
.PHONY: up up-cluster down status install install-test install-test-venv test test-fast lint typecheck relay reindex backup restore bench-supersedes bench-facts bench-foundation bench-locomo bench-scale bench-ingest bench-mixed bench-retry bench-hnsw bench-relay bench-filters bench-import bench-migrations check-deploy dist bench-embedding bench-tenants bench-faults bench-categories bench-llm-gate bench-corrections bench-local-llm bench-llm-updates llm bench-mcp bench-mcp-listing bench-small-users bench-chat-users bench-hnsw-history bench-scale-out bench-node-loss bench-japanese bench-tracing bench-webhooks bench-webhook-isolation bench-erase bench-backup bench-analyst bench-task-fillfactor bench-context bench-search-latency bench-newer-first bench-chat

PY := .venv/bin/python
TEST_WORKERS ?= 2  # pytest-xdist workers; each has its own database, index and in-process API

up:  ## install what is missing, start Postgres + OpenSearch, migrate, start the API
	bash scripts/up.sh

up-cluster:  ## `make up` on the scale-out engines: a Postgres streaming replica for reads, 3 OpenSearch nodes
	COGNIS_CLUSTER=1 bash scripts/up.sh

down:  ## stop the API, the model service, the local LLM, OpenSearch and Postgres (by pid), cluster too
	bash scripts/api.sh stop
	bash scripts/embedder.sh stop
	bash scripts/llm.sh stop
	bash scripts/opensearch-cluster.sh stop
	bash scripts/pg-replica.sh stop
	bash scripts/services.sh stop all

status:
	-bash scripts/api.sh status
	-bash scripts/embedder.sh status
	-bash scripts/llm.sh status
	-bash scripts/services.sh status
	-bash scripts/pg-replica.sh status
	-bash scripts/opensearch-cluster.sh status

install:  ## what the service needs: Postgres + pgvector, OpenSearch, the models, .venv (runtime)
	bash scripts/install.sh

install-test: install  ## that and the test kit: pytest and linters, chromium, node, pgbouncer, helm, a test LLM
	bash scripts/install-test-tools.sh

install-test-venv:  ## only .venv's test and lint tools (what `make test-fast` needs)
	bash scripts/install-test-tools.sh venv

test: install-test  ## the whole suite against real Postgres, OpenSearch and HTTP
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-fast: install-test-venv  ## the edit loop: the tests that need no service (no Postgres, OpenSearch or model server) and load no model
	COGNIS_TEST_NO_SERVICES=1 $(PY) -m pytest -n $(TEST_WORKERS) -q -p no:cacheprovider -m "not models and not slow" $(PYTEST_ARGS)

lint:
	.venv/bin/ruff check app migrations tests bench clients/python
	.venv/bin/ruff format --check app migrations tests bench clients/python

typecheck:
	.venv/bin/mypy app

relay:  ## a standalone outbox relay (scale-out); uses .local/cognis.env (the service's roles only)
	scripts/role-env.sh service $(PY) -m app relay

reindex:  ## rebuild the OpenSearch index from Postgres
	scripts/role-env.sh service $(PY) -m app reindex

backup:  ## dump Postgres whole, row counts checked (docs/operations.md); BACKUP=file to choose
	scripts/role-env.sh backup $(PY) -m app backup $(or $(BACKUP),.local/backups/cognis-$(shell date -u +%Y%m%dT%H%MZ).dump)

restore:  ## restore BACKUP=file into a new database INTO=name, checked against its counts
	@test -n "$(BACKUP)" -a -n "$(INTO)" || { echo "usage: make restore BACKUP=file INTO=new_database" >&2; exit 2; }
	scripts/role-env.sh restore $(PY) -m app restore $(BACKUP) --into $(INTO)

.PHONY: pitr-drill
pitr-drill:  ## rehearse a restore to a point in time (WAL archive, pg_basebackup) on scratch clusters of its own
	bash scripts/pitr-drill.sh

.PHONY: retention
retention:  ## delete what retention allows, once (docs/operations.md); DRY_RUN=1 only counts it
	scripts/role-env.sh service $(PY) -m app retention $(if $(DRY_RUN),--dry-run)

bench-foundation:  ## outbox lag and search latency against the running service (make up)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.foundation

bench-locomo:  ## LoCoMo retrieval benchmark + ablation through the API (make up); report in results/
	$(PY) -m bench.locomo $(BENCH_ARGS)

bench-mcp:  ## characters of the MCP tool listing per session (before/after) and per tool result, compact against full (make up)
	$(PY) -m bench.mcp_results $(BENCH_ARGS)

bench-mcp-listing:  ## characters of the MCP tool listing per session, this tree against the tools issue 41 found (no services)
	$(PY) -m bench.mcp_results --listing $(BENCH_ARGS)

bench-newer-first:  ## the newer_first lever's contradiction detector: how often it fires (supersedes pairs, LoCoMo) and its cost; no services
	$(PY) -m bench.newer_first $(BENCH_ARGS)

bench-small-users:  ## users of 5-40 memories from LoCoMo sessions: hit@1/@3 and relevance inversions per size (make up)
	$(PY) -m bench.small_users $(BENCH_ARGS)

bench-chat-users:  ## LongMemEval dev chats as small users: hit@1/3/5 right after writing and settled, train/validation, default vs paper (make up)
	$(PY) -m bench.chat_users $(BENCH_ARGS)

bench-chat:  ## chat-style users whose facts change (bench/data/chat/, dev and held-out): hit@1, replaced above current, context blocks; chat-style updates: recall, precision, unrelated facts ended (make up)
	$(PY) -m bench.chat $(BENCH_ARGS)

bench-japanese:  ## Japanese and mixed users: hit@1/@3 default vs paper, multilingual leg on vs off, latency against English (make up)
	$(PY) -m bench.japanese $(BENCH_ARGS)

bench-hnsw-history:  ## the 256D HNSW graph over every version against current versions only: size, recall
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.hnsw_history $(BENCH_ARGS)

bench-erase:  ## erasing a user of 10k messages among 1M memory versions: time, user's lock held (scratch db)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.erase $(BENCH_ARGS)

bench-backup:  ## `make backup` and `make restore` of 100k memories: time, bytes, rows checked (scratch db)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.backup_restore $(BENCH_ARGS)

bench-analyst:  ## analysts' queries as bound analyst roles, before and after 0037's tenant indexes (scratch db)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.analyst_index $(BENCH_ARGS)

bench-task-fillfactor:  ## ingest_tasks: HOT updates of a replay of the worker's updates per fillfactor (scratch db)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.task_fillfactor $(BENCH_ARGS)

bench-relevance:  ## the relevance floor on LoCoMo: recall cost and "nothing relevant" on category 5 (make up)
	$(PY) -m bench.relevance $(BENCH_ARGS)

bench-scale:  ## search latency with a large synthetic user among many (make up)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.scale $(BENCH_ARGS)

bench-context:  ## context blocks (POST /context) for users of 100 and 10,000 memories: tokens, latency against search (make up)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.scale --context --sizes 100,10000 --profiles default $(BENCH_ARGS)

bench-search-latency:  ## small users' search (10, 100, 1,000 memories): HTTP p50/p95, where the time goes; COMPARE=URL times a second API alongside (make up)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.search_latency $(if $(COMPARE),--compare $(COMPARE)) $(BENCH_ARGS)

check-deploy:  ## static checks of Dockerfile, compose.yaml and terraform/ (no Docker engine, no AWS)
	bash tests/deploy/check.sh

dist:  ## the Python client's wheel, the TypeScript package, the chart and the image (its build context without a Docker engine) into dist/, with SHA256SUMS; nothing uploaded
	bash scripts/dist.sh

bench-scale-out:  ## reads on the Postgres replica vs the writer under a bulk import; replica lag (make up-cluster)
	$(PY) -m bench.scale_out_replica $(BENCH_ARGS)

bench-node-loss:  ## kill -9 one node of a 3-node OpenSearch cluster under load: degraded seconds, 5xx, lost
	$(PY) -m bench.scale_out_opensearch $(BENCH_ARGS)

bench-webhooks:  ## webhooks: latency commit -> receipt, events/s per relay, to a loopback receiver (COGNIS_WEBHOOK_ALLOW_PRIVATE=true make up)
	$(PY) -m bench.webhooks $(BENCH_ARGS)

bench-webhook-isolation:  ## webhooks: another tenant's latency beside a sleeping and a trickling receiver (COGNIS_WEBHOOK_ALLOW_PRIVATE=true make up)
	$(PY) -m bench.webhook_isolation $(BENCH_ARGS)

bench-ingest:  ## write path: raw model texts/s, batch create, messages/s, time-to-searchable, search under load
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.ingestion $(BENCH_ARGS)

bench-tracing:  ## search latency with tracing on (OTLP to a receiver here) against off: p50/p95 and ratios
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.tracing $(BENCH_ARGS)

bench-mixed:  ## mixed traffic: tenant A imports while B and C write, chat and search (ratios to idle)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.mixed_traffic $(BENCH_ARGS)

bench-retry:  ## writes whose answers time out, retried with their keys: REST, Python client, MCP; counts duplicates
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.retry $(BENCH_ARGS)

bench-hnsw:  ## HNSW layouts: insert ms/row and recall@10 (256D only, +768D, +768D halfvec)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.hnsw $(BENCH_ARGS)

bench-relay:  ## outbox relay: documents/s delivered and time until searchable (scratch db + index)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.relay $(BENCH_ARGS)

bench-filters:  ## filtered vector search: recall@10 vs an exact filtered scan, latency (scratch db)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.filters $(BENCH_ARGS)

bench-import:  ## bulk import: memories/s with precomputed vectors, with and without --defer-index
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.imports $(BENCH_ARGS)

bench-migrations:  ## upgrade first revision -> head on 1M memories under load (--long-reader-s: and a report): wall time, longest blocking lock, slowest read/write
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.migrations $(BENCH_ARGS)

bench-tenants:  ## OpenSearch: one index filtered by tenant against an index per tenant (scratch indexes)
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.tenant_index $(BENCH_ARGS)

bench-faults:  ## kill -9 OpenSearch, the API, Postgres (a throwaway stack) under write load; compare the stores
	set -a && { [ ! -f .local/cognis.env ] || . .local/cognis.env; } && set +a && $(PY) -m bench.faults $(BENCH_ARGS)

bench-embedding:  ## embedding backends (torch threads, ONNX, ONNX int8): latency, throughput, quality
	$(PY) -m bench.embedding $(BENCH_ARGS)

.PHONY: bench-ner
bench-ner:  ## NER on 50 English and 40 Japanese chat sentences (bench/data/ner_chat*.tsv): precision, recall, texts/s
	$(PY) -m bench.ner $(BENCH_ARGS)

.PHONY: bench-entities
bench-entities:  ## the NER model's cost on the write path: embedding texts/s alone and beside a busy entity worker
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.entities $(BENCH_ARGS)

.PHONY: bench-language-backfill
bench-language-backfill:  ## python -m app detect-languages (0028's backfill) on 50k versions: rate, time at 1M
	set -a && . .local/cognis.env && set +a && $(PY) -m bench.language_backfill $(BENCH_ARGS)

.PHONY: bench-language
bench-language:  ## language detection on short chat turns (bench/data/language_turns.tsv): accuracy per language
	$(PY) -m bench.language_detection $(BENCH_ARGS)

bench-categories:  ## category classifier: accuracy and confusion matrix on bench/data/category_eval.tsv
	$(PY) -m bench.categories $(BENCH_ARGS)

bench-llm-gate:  ## LLM gate: share of LoCoMo turns decided without a call, update pairs let through
	$(PY) -m bench.llm_gate $(BENCH_ARGS)

bench-corrections:  ## corrections without an LLM: precision and recall of the detector, threshold sweep
	$(PY) -m bench.corrections $(BENCH_ARGS)

bench-supersedes:  ## updates without an LLM: the supersedes model on its held-out split (BENCH_ARGS=train retrains it; add --language ja for the Japanese model)
	$(PY) -m bench.supersedes $(if $(BENCH_ARGS),$(BENCH_ARGS),evaluate)

bench-facts:  ## facts from messages without an LLM: the fact model on its held-out units and LongMemEval answer turns (BENCH_ARGS=train retrains it)
	$(PY) -m bench.facts $(if $(BENCH_ARGS),$(BENCH_ARGS),evaluate)

bench-local-llm:  ## local LLM (xllamacpp + GGUF): start-up, tokens/s, seconds per decision by threads
	$(PY) -m bench.local_llm $(BENCH_ARGS)

bench-llm-updates:  ## a local LLM's update decisions on the held-out supersedes split, alone and vetted
	$(PY) -m bench.llm_updates $(BENCH_ARGS)
