#!/usr/bin/env bash
# make watch: the real Lambda binaries under `cargo lambda watch` (its Runtime API emulator on
# :9000, rebuilding on change), against local AWS from `paymos-inbox dev --no-handlers`:
# DynamoDB Local, fauxqs, the stack's tables and queues, and the webhook secrets served for
# INIT. The functions get events/env.json's settings with the local endpoints and names.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/watch
info=target/watch/dev-info.json
: > "$info"
cargo run --locked --quiet -p paymos-inbox -- dev --no-handlers --port 0 \
  --prefix "paymos-inbox-local-$$" > "$info" &
dev=$!
trap 'kill "$dev" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 180); do grep -q ingest_url "$info" && break; sleep 1; done
grep -q ingest_url "$info" || { echo "dev did not start"; exit 1; }
python3 - "$info" > target/watch/env <<'PY'
import json, sys
info = json.loads(open(sys.argv[1]).readline())
env = {}
for function in json.load(open("events/env.json")).values():
    env.update(function)
names = {"DELIVERIES_TABLE": info["tables"]["DeliveriesTable"],
         "STATE_TABLE": info["tables"]["StateTable"],
         "WORK_QUEUE_URL": info["queues"]["WorkQueue"]}
env.update(names)
env.update({"AWS_ENDPOINT_URL_DYNAMODB": info["dynamodb_endpoint"],
            "AWS_ENDPOINT_URL_SQS": info["sqs_endpoint"],
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": info["secrets_manager_endpoint"],
            "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"})
for k, v in env.items():
    print(f"{k}={v}")
PY
echo "local AWS is up (target/watch/dev-info.json); functions: paymos-ingest, paymos-fulfil, paymos-sweep"
echo "in another terminal:  make invoke EVENT=events/ingest-invoice-paid.json"
PATH="$PWD/.venv/bin:$PATH" cargo lambda watch --env-file target/watch/env
