#!/bin/sh
# Full store benchmark from the repository root; extra options go to the command (e.g. --quick).
# The JSON document is printed and kept in bench/results/store-YYYY-MM-DD.json.
set -eu
cd "$(dirname "$0")/.."
if [ -x .venv/bin/bolide ]; then BOLIDE=.venv/bin/bolide; else BOLIDE=bolide; fi
exec "$BOLIDE" bench store --output "bench/results/store-$(date +%F).json" "$@"
