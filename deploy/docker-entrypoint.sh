#!/bin/sh
# Entry point of the Context Lanes image (runs under tini as PID 1).
#
# 1. Secrets from files: for each NAME below, if NAME_FILE is set and NAME is not,
#    export NAME with the file's content (trailing newline stripped). Compose secrets
#    and Kubernetes Secret volumes mount files under /run/secrets/...; the settings
#    themselves only read environment variables (worker/settings.py).
# 2. A first argument that is a program on PATH is exec'ed as is (`temporal workflow
#    list`, `sh`, `python`: one-off operator tasks); anything else is a `lanes`
#    subcommand: `lanes-entrypoint worker` execs `lanes worker`.
set -eu

for name in OPENAI_API_KEY DATABASE_URL LANES_GATEWAY_OPENAI_API_KEY LANES_GATEWAY_ANTHROPIC_API_KEY; do
    file_var="${name}_FILE"
    eval "file=\${$file_var:-}"
    eval "current=\${$name:-}"
    if [ -n "$file" ]; then
        if [ -n "$current" ]; then
            echo "lanes-entrypoint: both $name and $file_var are set; using $name" >&2
        elif [ -r "$file" ]; then
            value=$(cat "$file")
            export "$name=$value"
        else
            echo "lanes-entrypoint: $file_var=$file is not readable" >&2
            exit 1
        fi
    fi
    unset "$file_var"
done

if [ "$#" -eq 0 ]; then
    set -- worker
fi

if command -v -- "$1" >/dev/null 2>&1; then
    exec "$@"
fi
exec lanes "$@"
