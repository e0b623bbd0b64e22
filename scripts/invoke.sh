#!/usr/bin/env bash
# make invoke EVENT=events/….json: sends one event file to the function it is for, under
# `make watch` (ingest-* to paymos-ingest, re-signed now first; fulfil-* to paymos-fulfil;
# anything else to paymos-sweep), and prints the function's answer.
set -euo pipefail
cd "$(dirname "$0")/.."
event=${1:?usage: make invoke EVENT=events/<file>.json}
name=$(basename "$event")
case "$name" in
  ingest-*) function=paymos-ingest ;;
  fulfil-*) function=paymos-fulfil ;;
  publish-*) function=paymos-publish ;;
  *) function=paymos-sweep ;;
esac
if [ "$function" = paymos-ingest ]; then
  fresh=target/watch/events
  mkdir -p "$fresh"
  cp events/*.json "$fresh"/
  cargo run --locked --quiet -p paymos-inbox -- events refresh --dir "$fresh" > /dev/null
  event="$fresh/$name"
fi
PATH="$PWD/.venv/bin:$PATH" cargo lambda invoke "$function" --data-file "$event"
