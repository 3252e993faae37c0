#!/usr/bin/env bash
# scripts/role-env.sh PROCESS COMMAND...: run COMMAND with the settings of $LOCAL_DIR/cognis.env
# and only the database credentials PROCESS needs (issue 53): a compromised API process must
# not hold the tables' owner, the BYPASSRLS backup role or the test kit's login.
#   service  the API and the standalone workers (relay, reindex, retention): the request role
#            (COGNIS_DATABASE_URL) and the worker role (COGNIS_WORKER_DATABASE_URL), which the
#            API's in-process relay and ingestion workers connect as;
#   migrate  `alembic upgrade head`: the tables' owner (COGNIS_MIGRATION_DATABASE_URL), also as
#            COGNIS_DATABASE_URL, which the settings require;
#   backup   `python -m app backup`: the backup role (COGNIS_BACKUP_DATABASE_URL), likewise;
#   restore  `python -m app restore`: the owner, who creates the new database.
# Any other variable that holds a Postgres URL (from the file or from the caller's environment),
# and libpq's PGPASSWORD / PGPASSFILE, is removed. A COGNIS_* variable the caller exported wins
# over the file, as before, when PROCESS may hold it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ENV_FILE="$LOCAL_DIR/cognis.env"

# The URL variables each process keeps; every other variable naming a database role goes.
allowed_urls() {
    case "$1" in
        service)
            echo COGNIS_DATABASE_URL COGNIS_WORKER_DATABASE_URL COGNIS_DIRECT_DATABASE_URL \
                COGNIS_READ_DATABASE_URL
            ;;
        migrate | restore) echo COGNIS_MIGRATION_DATABASE_URL ;;
        backup) echo COGNIS_BACKUP_DATABASE_URL ;;
        *) die "usage: $0 {service|migrate|backup|restore} COMMAND..." ;;
    esac
}

is_database_url() {
    [[ "$1" =~ ^postgres(ql)?(\+[a-z0-9]+)?:// ]]
}

main() {
    (($# >= 2)) || die "usage: $0 {service|migrate|backup|restore} COMMAND..."
    local process="$1"
    shift
    local keep
    keep=" $(allowed_urls "$process") "
    [[ -f "$ENV_FILE" ]] || die "$ENV_FILE is missing: run scripts/services.sh start all first"
    local line key value
    while IFS= read -r line; do
        [[ "$line" =~ ^[A-Z_][A-Z0-9_]*= ]] || continue
        key="${line%%=*}"
        # Values already exported by the caller take precedence over the generated file.
        [[ -n "${!key:-}" ]] || export "$line"
    done <"$ENV_FILE"
    for key in $(compgen -e); do
        value="${!key}"
        if [[ "$key" == PGPASSWORD || "$key" == PGPASSFILE ]] \
            || { is_database_url "$value" && [[ "$keep" != *" $key "* ]]; }; then
            unset "$key"
        fi
    done
    case "$process" in
        migrate | restore)
            export COGNIS_DATABASE_URL="${COGNIS_MIGRATION_DATABASE_URL:?no owner URL in $ENV_FILE}"
            ;;
        backup)
            export COGNIS_DATABASE_URL="${COGNIS_BACKUP_DATABASE_URL:?no backup URL in $ENV_FILE}"
            ;;
    esac
    exec "$@"
}

main "$@"
