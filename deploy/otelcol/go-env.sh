# Sourced by deploy/otelcol/build.sh and `make otelcol-test` (from the repository root):
# keep everything Go downloads or compiles under .tools/go, next to the binary it builds,
# instead of the user's ~/go and ~/.cache/go-build. Set unconditionally, so a GOPATH or
# GOCACHE in the environment does not make the stamp-cached build depend on state
# outside the repository. -modcacherw leaves the module cache writable, so `make clean`
# (rm -rf .tools) can delete it; -buildvcs=false keeps the checkout's git state out of
# the binary (a Docker build has no .git); GOTOOLCHAIN=local never downloads another Go.
# (Go's own telemetry counters, ~/.config/go/telemetry, are not redirected: `go
# telemetry off` stops them.)
GO_ROOT_DIR="$(pwd)/.tools/go"
export GOPATH="$GO_ROOT_DIR/path"
export GOMODCACHE="$GO_ROOT_DIR/mod"
export GOCACHE="$GO_ROOT_DIR/cache"
export GOFLAGS="-modcacherw -buildvcs=false"
export GOTOOLCHAIN=local
unset GO_ROOT_DIR
