#!/usr/bin/env bash
# make sam-local FUNCTION=IngestFunction EVENT=events/ingest-invoice-paid.json
# One function under `sam local invoke` (SAM's own local machinery: its runtime image, AWS's
# Runtime Interface Emulator, a container), with the binary built on this machine for its own
# architecture, against local AWS from `paymos-inbox dev --no-handlers` (DynamoDB Local,
# fauxqs, the stack's tables and queues, the secrets for INIT).
#
# Two behaviours of the SAM CLI shape it (docs/deploy.md, "sam local invoke"):
# - SAM never gives a container host networking (`--docker-network host` only joins no extra
#   network: aws/aws-sam-cli#4236), so the container reaches the emulators through its bridge's
#   gateway; scripts/sam-local-engine.sh finds it (Docker or podman) and, on Linux, DNATs it to
#   127.0.0.1.
# - SAM does not resolve the template's `!If [HasLocalX, !Ref LocalXEndpoint, !Ref
#   AWS::NoValue]`: it passes an empty AWS_ENDPOINT_URL_X whatever --parameter-overrides say.
#   The variables are declared, so `--env-vars` sets them.
set -euo pipefail
cd "$(dirname "$0")/.."
function="${1:?usage: scripts/sam-local.sh FUNCTION EVENT}"
event="${2:?usage: scripts/sam-local.sh FUNCTION EVENT}"
out=target/sam-local
mkdir -p "$out"
bash scripts/sam-local-engine.sh >/dev/null
# shellcheck disable=SC1091
source "$out/engine.env"
cargo build --locked --quiet -p paymos-inbox-lambda --bins -p paymos-inbox --bin paymos-inbox
template=$(python3 scripts/sam-local-template.py target/debug "$SAM_ARCH" "$out/build")
info="$out/dev-info.json"
: > "$info"
target/debug/paymos-inbox dev --no-handlers --port 0 --prefix "paymos-inbox-local-$$" > "$info" &
dev=$!
trap 'kill "$dev" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 180); do grep -q ingest_url "$info" && break; sleep 1; done
grep -q ingest_url "$info" || { echo "dev did not start"; exit 1; }
python3 - "$info" "$HOST_GATEWAY" "$function" > "$out/env.json" <<'PY'
import json, sys
info, gateway, function = json.loads(open(sys.argv[1]).readline()), sys.argv[2], sys.argv[3]
reach = lambda url: (url or "").replace("127.0.0.1", gateway)
env = json.load(open("events/env.json")).get(function, {})
names = {"DELIVERIES_TABLE": info["tables"]["DeliveriesTable"],
         "STATE_TABLE": info["tables"]["StateTable"],
         "WORK_QUEUE_URL": info["queues"]["WorkQueue"],
         "WEBHOOK_QUEUE_URL": info["queues"].get("WebhookDeliveryQueue"),
         "WEBHOOK_DLQ_URL": info["queues"].get("WebhookTargetDeadLetterQueue")}
env.update({k: reach(v) for k, v in names.items() if k in env and v})
env.update({"AWS_ENDPOINT_URL_DYNAMODB": reach(info["dynamodb_endpoint"]),
            "AWS_ENDPOINT_URL_SQS": reach(info["sqs_endpoint"]),
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": reach(info.get("secrets_manager_endpoint"))})
json.dump({function: env}, sys.stdout)
PY
event_file="$event"
case "$event" in
  events/ingest-*)
    # Signed now (the tolerance is 300 s), in a copy: the committed file stays as it is.
    mkdir -p "$out/events" && cp events/*.json "$out/events/"
    target/debug/paymos-inbox events refresh --dir "$out/events" >/dev/null
    event_file="$out/events/$(basename "$event")"
    ;;
esac
skip=()
[ "$SAM_SKIP_PULL" = true ] && skip=(--skip-pull-image)
# No AWS keys: SAM would ask STS for the account id.
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_PROFILE \
  DOCKER_HOST="$DOCKER_HOST" SAM_CLI_TELEMETRY=0 AWS_REGION="${AWS_REGION:-us-east-1}" \
  .venv/bin/sam local invoke "$function" -t "$template" -e "$event_file" \
  --env-vars "$out/env.json" "${skip[@]}"
