#!/usr/bin/env bash
# Build the project's Collector distribution (deploy/otelcol/builder-config.yaml) into
# .tools/bin/otelcol-tracepass with the Collector's builder at the manifest's release.
# Cached: rebuilt only when the manifest, the project's Go component or this script
# changes (a SHA-256 of them is kept in .tools/otelcol-tracepass.stamp). Go's module
# cache, build cache and GOPATH live under .tools/go (go-env.sh, shared with
# `make otelcol-test`), so a fresh clone writes nothing to ~/go or ~/.cache, `make clean`
# removes them with the rest of .tools/, and a rebuild is incremental.
# Prints the binary's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/otelcol/go-env.sh
. deploy/otelcol/go-env.sh
BUILDER_VERSION=v0.148.0
TOOLS=.tools
BIN="$TOOLS/bin/otelcol-tracepass"
STAMP="$TOOLS/otelcol-tracepass.stamp"
BUILDER="$TOOLS/bin/builder-$BUILDER_VERSION"
export CGO_ENABLED=0

hash=$(
  {
    echo "$BUILDER_VERSION"
    cat deploy/otelcol/builder-config.yaml deploy/otelcol/build.sh deploy/otelcol/go-env.sh
    find deploy/otelcol/conversationidprocessor -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) \
      -not -name '*_test.go' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
)
if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$hash" ]; then
  echo "otelcol-tracepass is up to date" >&2
  echo "$(pwd)/$BIN"
  exit 0
fi
mkdir -p "$TOOLS/bin"
if [ ! -x "$BUILDER" ]; then
  echo "installing the Collector builder $BUILDER_VERSION" >&2
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION"
  mv "$tmp/builder" "$BUILDER"
  rmdir "$tmp"
fi
start=$(date +%s)
"$BUILDER" --config deploy/otelcol/builder-config.yaml >"$TOOLS/otelcol-build.log" 2>&1 || {
  tail -n 40 "$TOOLS/otelcol-build.log" >&2
  exit 1
}
cp "$TOOLS/otelcol-build/otelcol-tracepass" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "$hash" >"$STAMP"
echo "built otelcol-tracepass in $(($(date +%s) - start)) s" >&2
echo "$(pwd)/$BIN"
