#!/bin/sh
# Full end-to-end broker benchmark from the repository root; extra options go to the command
# (e.g. --quick, --flush sync). The JSON document is printed and kept in
# bench/results/broker-YYYY-MM-DD.json.
set -eu
cd "$(dirname "$0")/.."
if [ -x .venv/bin/bolide ]; then BOLIDE=.venv/bin/bolide; else BOLIDE=bolide; fi
exec "$BOLIDE" bench broker --output "bench/results/broker-$(date +%F).json" "$@"
