#!/usr/bin/env bash
# The tools the deployment checks (tests/ops) use, built once and cached:
#
#   helm         helm.sh/helm/v3      (go install from the Go module proxy)
#   kubeconform  github.com/yannh/kubeconform
#
# Everything lives under ${MODELEVENTS_OPS_CACHE:-~/.cache/modelevents/go} (GOPATH, GOBIN,
# GOMODCACHE and GOCACHE all there), so nothing outside it is touched and a second run is
# instant. Idempotent: a tool already built at the pinned version is kept; a missing or other
# version is (re)built. The first build of helm compiles for several minutes.
#
#   scripts/ops-tools.sh          build what is missing, then print the bin directory (last line)
#
# Needs `go` (1.24 or newer) on PATH.
set -euo pipefail

HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.8.0

cache=${MODELEVENTS_OPS_CACHE:-$HOME/.cache/modelevents/go}
export GOPATH=$cache/gopath GOBIN=$cache/bin GOMODCACHE=$cache/mod GOCACHE=$cache/build
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$GOBIN"

say() { echo "ops-tools: $*" >&2; }

if ! command -v go >/dev/null 2>&1; then
    say "go is not on PATH: install Go 1.24+ (the Go module proxy serves helm and kubeconform)"
    exit 1
fi

# install NAME VERSION PACKAGE: a stamp file next to the binary records the version built.
install() {
    local name=$1 version=$2 package=$3 stamp="$GOBIN/.$1.version"
    if [[ -x $GOBIN/$name && -f $stamp && $(cat "$stamp") == "$version" ]]; then
        say "$name $version already built ($GOBIN/$name)"
        return
    fi
    say "building $name $version: go install $package@$version (the first time takes minutes) ..."
    local started=$SECONDS ldflags=""
    if [[ $name == helm ]]; then
        # What `helm version` reports (a plain go install would say v3.x+unreleased).
        ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
    fi
    go install -ldflags "$ldflags" "$package@$version"
    echo "$version" >"$stamp"
    say "built $name $version in $((SECONDS - started)) s ($GOBIN/$name)"
}

install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
install kubeconform "$KUBECONFORM_VERSION" github.com/yannh/kubeconform/cmd/kubeconform

echo "$GOBIN"
