#!/bin/sh
# One-shot schema setup for the Temporal server's PostgreSQL (compose service
# `temporal-schema`, image temporalio/admin-tools). Safe to run on every `up`:
# database creation tolerates an existing database and update-schema only applies
# versions that are missing. Also the step to run (with the new admin-tools image)
# before upgrading the Temporal server to a release with newer schema versions.
set -eu

: "${POSTGRES_SEEDS:?host of the Temporal PostgreSQL}"
: "${POSTGRES_USER:?}"
: "${SQL_PASSWORD:?password of POSTGRES_USER}"
: "${DB_PORT:=5432}"
: "${DBNAME:=temporal}"
: "${VISIBILITY_DBNAME:=temporal_visibility}"
SCHEMA_ROOT=/etc/temporal/schema/postgresql/v12
export SQL_PASSWORD

echo "temporal-schema: waiting for ${POSTGRES_SEEDS}:${DB_PORT}"
tries=0
until nc -z "$POSTGRES_SEEDS" "$DB_PORT"; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { echo "temporal-schema: PostgreSQL did not come up" >&2; exit 1; }
    sleep 1
done

sql() {
    temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"
}

for pair in "${DBNAME}:temporal" "${VISIBILITY_DBNAME}:visibility"; do
    db=${pair%%:*}
    schema=${pair#*:}
    sql --db "$db" create || echo "temporal-schema: database $db exists (or create failed: the next step will tell)"
    sql --db "$db" setup-schema -v 0.0
    sql --db "$db" update-schema -d "$SCHEMA_ROOT/$schema/versioned"
done
echo "temporal-schema: done"
