#!/usr/bin/env bash
# make sam-local FUNCTION=IngestFunction EVENT=events/ingest-invoice-paid.json
# One function as built (`sam build`), under `sam local invoke` in Docker, against local AWS
# from `paymos-inbox dev --no-handlers` (DynamoDB Local, fauxqs, the stack's tables and queues,
# the secrets for INIT). SAM's --env-vars only overrides variables the template declares, so
# the endpoints go in as the template's Local*Endpoint parameters, and the container reaches
# the emulators on the host: with --docker-network host on Linux (127.0.0.1 is then the host),
# through host.docker.internal with Docker Desktop (macOS, Windows).
# Needs Docker: not run by `make test` (the tests run the same binaries under a Runtime API
# stub instead, crates/lambda/tests/emulators).
set -euo pipefail
cd "$(dirname "$0")/.."
function="${1:?usage: scripts/sam-local.sh FUNCTION EVENT}"
event="${2:?usage: scripts/sam-local.sh FUNCTION EVENT}"
command -v docker >/dev/null || { echo "sam local invoke needs Docker"; exit 1; }
mkdir -p target/sam-local
info=target/sam-local/dev-info.json
: > "$info"
cargo run --locked --quiet -p paymos-inbox -- dev --no-handlers --port 0 \
  --prefix "paymos-inbox-local-$$" > "$info" &
dev=$!
trap 'kill "$dev" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 180); do grep -q ingest_url "$info" && break; sleep 1; done
grep -q ingest_url "$info" || { echo "dev did not start"; exit 1; }
if [ "$(uname -s)" = Linux ]; then host=127.0.0.1; network=(--docker-network host); else host=host.docker.internal; network=(); fi
python3 - "$info" "$host" "$function" > target/sam-local/env.json <<'PY'
import json, sys
info, host, function = json.loads(open(sys.argv[1]).readline()), sys.argv[2], sys.argv[3]
local = lambda url: url.replace("127.0.0.1", host)
env = json.load(open("events/env.json")).get(function, {})
names = {"DELIVERIES_TABLE": info["tables"]["DeliveriesTable"],
         "STATE_TABLE": info["tables"]["StateTable"],
         "WORK_QUEUE_URL": local(info["queues"]["WorkQueue"])}
env.update({k: v for k, v in names.items() if k in env})
json.dump({function: env}, sys.stdout)
PY
endpoints=$(python3 -c 'import json,sys; i=json.loads(open(sys.argv[1]).readline()); h=sys.argv[2]; print(" ".join([
  "LocalDynamoDbEndpoint=" + i["dynamodb_endpoint"].replace("127.0.0.1", h),
  "LocalSqsEndpoint=" + i["sqs_endpoint"].replace("127.0.0.1", h),
  "LocalSecretsManagerEndpoint=" + (i.get("secrets_manager_endpoint") or "").replace("127.0.0.1", h)]))' "$info" "$host")
case "$event" in events/ingest-*) cargo run --locked --quiet -p paymos-inbox -- events refresh >/dev/null;; esac
# shellcheck disable=SC2086
sam local invoke "$function" -e "$event" --env-vars target/sam-local/env.json \
  --parameter-overrides $endpoints "${network[@]}"
