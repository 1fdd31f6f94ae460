#!/bin/sh
# Create the secret files deploy/compose.yaml mounts (run once, from anywhere):
#
#   deploy/init-secrets.sh                    # random DB password, empty API key
#   OPENAI_API_KEY=sk-... deploy/init-secrets.sh
#
# deploy/secrets/ is private to its owner (0700); the files in it are 0644 because
# compose mounts file secrets as they are, and the containers read them as their own
# unprivileged users (lanes: 10001, postgres: 999). Existing files are kept: delete
# one to regenerate it (changing the DB password of an existing lanes-db volume also
# needs `ALTER ROLE lanes PASSWORD ...` inside it).
set -eu

dir=$(cd "$(dirname "$0")" && pwd)/secrets
mkdir -p "$dir"
chmod 0700 "$dir"
umask 022

write() {  # write NAME VALUE: only if the file does not exist yet
    if [ -e "$dir/$1" ]; then
        echo "kept    $dir/$1"
    else
        printf '%s' "$2" > "$dir/$1"
        chmod 0644 "$dir/$1"
        echo "created $dir/$1"
    fi
}

if [ -e "$dir/lanes_db_password" ]; then
    password=$(cat "$dir/lanes_db_password")
else
    password=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
fi
write lanes_db_password "$password"
write lanes_database_url "postgresql://lanes:${password}@lanes-db:5432/lanes"
# empty = unset: sessions that are not replays then have no model to call
write openai_api_key "${OPENAI_API_KEY:-}"
