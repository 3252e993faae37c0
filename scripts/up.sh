#!/usr/bin/env bash
# `make up`: install what is missing, start Postgres and OpenSearch, migrate, start the API.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t0=$(date +%s)
"$ROOT/scripts/install.sh"
"$ROOT/scripts/services.sh" start all
"$ROOT/scripts/api.sh" start
t1=$(date +%s)
cat <<EOM

  Cognis Memory is ready in $((t1 - t0)) s:  http://127.0.0.1:$COGNIS_API_PORT
    OpenAPI:   http://127.0.0.1:$COGNIS_API_PORT/schema
    Readiness: http://127.0.0.1:$COGNIS_API_PORT/ready
    API key:   send X-API-Key (development key 'cognis-dev-key' unless COGNIS_API_KEY_HASHES is set)
    Logs:      $LOCAL_DIR/logs/   Stop: make down

EOM
