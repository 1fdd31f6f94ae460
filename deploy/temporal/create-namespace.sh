#!/bin/sh
# One-shot: register the Temporal namespace Context Lanes uses (compose service
# `temporal-namespace`, image temporalio/admin-tools). Idempotent: an existing
# namespace only gets its retention updated.
set -eu

: "${TEMPORAL_ADDRESS:=temporal:7233}"
: "${NAMESPACE:=default}"
: "${RETENTION:=7d}"

# Prefer the IPv4 address of the server's name: the CLI's resolver may otherwise try an
# address the server does not listen on inside the compose network.
host=${TEMPORAL_ADDRESS%:*}
port=${TEMPORAL_ADDRESS##*:}
ipv4=$(getent ahostsv4 "$host" 2>/dev/null | awk 'NR == 1 { print $1 }') || ipv4=
if [ -n "$ipv4" ]; then
    TEMPORAL_ADDRESS="$ipv4:$port"
fi

tries=0
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { echo "temporal-namespace: $TEMPORAL_ADDRESS is not healthy" >&2; exit 1; }
    sleep 2
done

if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" >/dev/null 2>&1; then
    temporal operator namespace update --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" --retention "$RETENTION"
    echo "temporal-namespace: $NAMESPACE exists (retention $RETENTION)"
else
    temporal operator namespace create --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" --retention "$RETENTION"
    echo "temporal-namespace: created $NAMESPACE (retention $RETENTION)"
fi
