#!/usr/bin/env bash
# Installs what the build and the tests need, each tool only when the right version is not
# already on PATH. Everything comes from crates.io, npm or Debian's packages: cargo-leptos would
# otherwise download wasm-bindgen and wasm-opt from elsewhere, which this project never allows.
#
#   scripts/ensure-tools.sh build     wasm32 target, wasm-bindgen CLI, cargo-leptos
#   scripts/ensure-tools.sh release   the above and wasm-opt
#   scripts/ensure-tools.sh test      the above (not wasm-opt), sqlx-cli, Chromium, end2end's npm
#                                     packages, openapi-spec-validator
#   scripts/ensure-tools.sh docs      mdbook, which renders the book in docs/ (make docs)
set -euo pipefail

WASM_BINDGEN_VERSION=0.2.130   # must equal the `wasm-bindgen` pin in Cargo.toml
CARGO_LEPTOS_VERSION=0.3.11
SQLX_CLI_VERSION=0.8.6
WASM_OPT_VERSION=0.116.1       # Debian's binaryen 108 emits wasm Chromium rejects
CHROMIUM=/usr/bin/chromium
OPENAPI_VALIDATOR_VERSION=0.9.0   # PyPI's openapi-spec-validator, for the API document
MDBOOK_VERSION=0.4.52          # renders the book in docs/ (docs/book.toml is written for 0.4)

root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '==> %s\n' "$*"; }
# Tools build in cargo's own temporary directory, not in the project's target directory.
install_crate() { env -u CARGO_TARGET_DIR cargo install "$@"; }

wasm_target() {
  rustup target list --installed | grep -qx wasm32-unknown-unknown && return
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
}

wasm_bindgen() {
  [ "$(wasm-bindgen --version 2>/dev/null)" = "wasm-bindgen $WASM_BINDGEN_VERSION" ] && return
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 6 minutes)"
  # Not --locked: its lock file names a yanked dependency.
  install_crate wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
}

cargo_leptos() {
  [ "$(cargo-leptos --version 2>/dev/null)" = "cargo-leptos $CARGO_LEPTOS_VERSION" ] && return
  say "installing cargo-leptos $CARGO_LEPTOS_VERSION (about 14 minutes)"
  # `cargo install --locked` fails: one locked dependency needs a newer rustc than ours. Install
  # from the unpacked source with that dependency pinned back.
  cargo info "cargo-leptos@$CARGO_LEPTOS_VERSION" >/dev/null
  local src
  src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cargo-leptos-"$CARGO_LEPTOS_VERSION" | head -n 1)
  local build
  build=$(mktemp -d /tmp/cargo-leptos-src.XXXXXX)
  cp -r "$src"/. "$build"
  # Its own release profile links with fat LTO in one codegen unit: a long step on one core that
  # a build tool does not need, so cargo's default release settings apply instead.
  (cd "$build" && cargo update -p cargo-util-schemas --precise 0.14.1 &&
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
      install_crate --path . --locked)
  rm -rf "$build"
}

wasm_opt() {
  wasm-opt --version 2>/dev/null | grep -q 'version 116' && return
  say "installing wasm-opt $WASM_OPT_VERSION (about 12 minutes)"
  install_crate wasm-opt --version "$WASM_OPT_VERSION" --locked
}

sqlx_cli() {
  [ "$(sqlx --version 2>/dev/null)" = "sqlx-cli $SQLX_CLI_VERSION" ] && return
  say "installing sqlx-cli $SQLX_CLI_VERSION (about 2 minutes)"
  install_crate sqlx-cli --version "$SQLX_CLI_VERSION" --locked --no-default-features --features postgres,rustls
}

chromium() {
  [ -x "$CHROMIUM" ] && return
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's chromium for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "The browser tests need Chromium at $CHROMIUM: install Debian's package (sudo apt-get install chromium)." >&2
    exit 1
  fi
}

openapi_validator() {
  [ "$(python3 -c 'import importlib.metadata as m; print(m.version("openapi-spec-validator"))' 2>/dev/null)" = "$OPENAPI_VALIDATOR_VERSION" ] && return
  say "installing openapi-spec-validator $OPENAPI_VALIDATOR_VERSION from PyPI"
  python3 -m pip install --quiet --disable-pip-version-check "openapi-spec-validator==$OPENAPI_VALIDATOR_VERSION"
}

mdbook_cli() {
  [ "$(mdbook --version 2>/dev/null)" = "mdbook v$MDBOOK_VERSION" ] && return
  say "installing mdbook $MDBOOK_VERSION"
  install_crate mdbook --version "$MDBOOK_VERSION" --locked
}

node_modules() {
  local dir="$root/end2end"
  [ -d "$dir/node_modules/@playwright/test" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ] && return
  say "installing the browser tests' npm packages (no browser download)"
  (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
}

case "${1:-build}" in
  build) wasm_target; wasm_bindgen; cargo_leptos ;;
  release) wasm_target; wasm_bindgen; cargo_leptos; wasm_opt ;;
  test) wasm_target; wasm_bindgen; cargo_leptos; sqlx_cli; chromium; openapi_validator; node_modules ;;
  docs) mdbook_cli ;;
  *) echo "usage: $0 build|release|test|docs" >&2; exit 2 ;;
esac
