# Z29C — the two commands a new machine needs:
#   make run    install what is missing, build, start the console on a private PostgreSQL cluster
#   make test   formatting, lints, every Rust test against real PostgreSQL, the browser tests,
#               the scenario harness and the tutorial
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

export CARGO_TARGET_DIR ?= $(CURDIR)/target
export LEPTOS_SITE_ROOT ?= $(CURDIR)/target/site
PROFILE ?= debug
Z29C := $(CARGO_TARGET_DIR)/$(PROFILE)/z29c
# Each island's wasm is split out of the main module and loaded when a page holds it (--split,
# docs/DESIGN.md §18). Release builds also write brotli and gzip copies of the static files,
# served as they are.
LEPTOS_FLAGS := --split $(if $(filter release,$(PROFILE)),--release --precompress,)
TOOLS := $(if $(filter release,$(PROFILE)),release,build)

.PHONY: help run build test lint unit e2e openapi scenarios tutorial bench-engine bench-pgbench bench-console bench-retention sqlx-prepare migrate-both docs screenshots clean

help:
	@echo "make run     build and serve the console at http://\$${Z29C_ADDR:-127.0.0.1:3000} (PROFILE=release for an optimised build)"
	@echo "make test    every check and test: fmt, clippy, .sqlx, Rust tests, browser tests, scenarios, the tutorial"
	@echo "make docs    render the book in docs/ to target/book (mdBook, offline)"
	@echo "make screenshots   take the console's pictures in docs/images/ again from the demo (after make build)"
	@echo "make bench-engine, make bench-pgbench, make bench-console, make bench-retention   the benchmarks (release build; figures in docs/performance.md)"

## Build the server and the hydrating wasm together (they must come from one build).
build:
	scripts/ensure-tools.sh $(TOOLS)
	cargo leptos build $(LEPTOS_FLAGS)

run: build
	$(Z29C) serve --demo

test:
	scripts/ensure-tools.sh test
	$(MAKE) --no-print-directory lint build
	$(Z29C) db exec -- $(MAKE) --no-print-directory unit e2e
	$(MAKE) --no-print-directory tutorial
	$(MAKE) --no-print-directory scenarios

## The scenario harness needs failpoints, which only this build has: every fault point × every
## protocol kind, the timing sweep and the named scenarios, and a representative subset against
## the payments API and the webhook receiver (`--all-points` runs all of them there too); then
## proof that it fails when a recovery rule is broken (kind:scenario:rule). It shares the target
## directory, so only the crates the feature changes are built again (not every dependency),
## and it replaces $(Z29C) until the next build: `make test` runs it last, and `make build`
## (which `make run` calls) links the binary without failpoints again.
SCENARIO_Z29C := $(CARGO_TARGET_DIR)/debug/z29c
BROKEN_RULES := opaque:after_acceptance_before_response:resend_opaque \
	webhook:after_acceptance_before_response:resend_opaque \
	idempotent:recovered_by_v2:regenerate_with_newest \
	queryable:restore_from_backup:resume_blind
scenarios:
	cargo build -p server --features ssr,failpoints,lab --bin z29c
	$(SCENARIO_Z29C) scenario matrix
	@for case in $(BROKEN_RULES); do \
	   IFS=: read -r kind point rule <<< "$$case"; \
	   if $(SCENARIO_Z29C) scenario matrix --kinds "$$kind" --points "$$point" \
	        --break-rule "$$rule" >/dev/null 2>&1; then \
	     echo "the scenario harness passed with the recovery rule '$$rule' broken: it cannot catch what it is for"; exit 1; \
	   else echo "scenario harness: the broken rule '$$rule' is caught ($$kind, $$point)"; fi; \
	 done

## docs/integrate-your-own-api.md, run as a reader would: every ```sh block in order, in one
## shell, with the built z29c on PATH (after `make build`); the runner's own test first.
tutorial:
	scripts/run-tutorial-test.py
	PATH="$(CARGO_TARGET_DIR)/$(PROFILE):$$PATH" scripts/run-tutorial.py

## Benchmarks run a release build with the lab (`--features lab`: `z29c bench`), which the
## binary a deployment builds does not have; the console's front-end weight is that of the last
## `make build` (PROFILE=release for the figure docs/performance.md reports).
bench-engine:
	cargo build --release -p server --features ssr,lab --bin z29c
	$(CARGO_TARGET_DIR)/release/z29c bench engine
	$(CARGO_TARGET_DIR)/release/z29c bench engine --http

## The engine's transactions alone, in pgbench, before and after the pipeline (on a private cluster).
bench-pgbench:
	cargo build --release -p server --features ssr,lab --bin z29c
	$(CARGO_TARGET_DIR)/release/z29c db exec -- scripts/pgbench/run.sh

bench-console:
	cargo build --release -p server --features ssr,lab --bin z29c
	$(CARGO_TARGET_DIR)/release/z29c bench console

## 100 simulated days at 100k workflows a day take hours and about 60 GB here: pass smaller ones
## with RETENTION_ARGS (docs/performance.md says what was run).
bench-retention:
	cargo build --release -p server --features ssr,lab --bin z29c
	$(CARGO_TARGET_DIR)/release/z29c bench retention $(RETENTION_ARGS)

lint:
	cargo fmt --all -- --check
	scripts/check-layout.py
	scripts/check-layout-test.py
	scripts/check-design-names.py
	scripts/check-design-names-test.py
	scripts/check-docs.py && scripts/check-docs-test.py
	cargo clippy --workspace --all-targets --features server/lab -- -D warnings
	cargo clippy -p server --bin z29c -- -D warnings
	cargo clippy -p app --no-default-features --features hydrate --target wasm32-unknown-unknown -- -D warnings

## Needs DATABASE_URL (make test provides a private cluster through `z29c db exec`).
unit: migrate-both
	cargo sqlx prepare --workspace --check
	cargo nextest run --workspace --features server/lab --no-fail-fast

## The browser tests, then the console's tests again on a fresh server with JavaScript off (the
## refusal and step-button tests already run each case both ways).
e2e: openapi
	Z29C_BIN=$(Z29C) end2end/run.sh
	Z29C_BIN=$(Z29C) E2E_JAVASCRIPT=off end2end/run.sh --project console --no-deps

## The console's pictures in README.md and the book (docs/images/), taken again from the demo by
## the browser tests (end2end/tests/screenshots.spec.ts), after `make build`.
screenshots:
	Z29C_SCREENSHOTS=$(CURDIR)/docs/images Z29C_BIN=$(Z29C) end2end/run.sh --project console --no-deps screenshots.spec.ts

## The API's OpenAPI document, as the server serves it, checked by a standard validator.
openapi:
	$(Z29C) openapi > $(CARGO_TARGET_DIR)/openapi.json
	python3 -m openapi_spec_validator $(CARGO_TARGET_DIR)/openapi.json

## Refreshes .sqlx/ after a query changes: `z29c db exec -- make sqlx-prepare`.
sqlx-prepare: migrate-both
	cargo sqlx prepare --workspace

## The query checks need both schemas in one database: Z29C's and the destinations' (which, at
## run time, always live in a database of their own).
migrate-both:
	cargo sqlx migrate run --source migrations --ignore-missing
	cargo sqlx migrate run --source destinations/migrations --ignore-missing

## The book (docs/SUMMARY.md) rendered to target/book; `make lint` checks its links without it.
docs:
	scripts/ensure-tools.sh docs
	mdbook build docs

clean:
	cargo clean
	rm -rf target/site end2end/node_modules end2end/test-results
