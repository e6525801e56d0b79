#!/bin/sh
# Installs the tools tests/exports.rs reads tunelab's exports back with:
# promtool (OpenMetrics), go tool pprof (pprof), xmllint with the JUnit schema
# of Jenkins' xunit plugin (MIT, copied from tests/fixtures/exports), and python jsonschema with speedscope's
# published file-format schema (MIT, shipped in its npm package). The schemas
# go to $TUNELAB_CONSUMERS (default /opt/tunelab-consumers), where the tests
# look. Without root or apt-get the tests print why they skip.
set -eu
dir=${TUNELAB_CONSUMERS:-/opt/tunelab-consumers}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=
  for t in promtool go xmllint npm; do
    command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
  done
  python3 -c 'import jsonschema' 2>/dev/null || missing="$missing jsonschema"
  if [ -n "$missing" ]; then
    echo "installing export consumers (missing:$missing)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      prometheus golang-go libxml2-utils python3-jsonschema npm curl ca-certificates >/dev/null
  fi
fi

mkdir -p "$dir"
# The JUnit schema (MIT, jenkinsci/xunit-plugin) is kept in the tree.
cp "$(dirname "$0")/../tests/fixtures/exports/junit-10.xsd" "$dir/junit-10.xsd"
if [ ! -s "$dir/speedscope-schema.json" ] && command -v npm >/dev/null; then
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent speedscope@1.25.0 >/dev/null && tar xzf speedscope-1.25.0.tgz); then
    cp "$tmp/package/dist/release/file-format-schema.json" "$dir/speedscope-schema.json"
  else
    echo "could not fetch speedscope's schema"
  fi
  rm -rf "$tmp"
fi
