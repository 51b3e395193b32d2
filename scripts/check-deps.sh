#!/usr/bin/env bash
# Fails if the server carries the benchmark tooling: no package under
# internal/bench or cmd/convene-bench, and none of the plotting modules the
# benchmark reports use (gonum/plot and what it pulls in: go-latex, fonts,
# PDF, SVG, image). Checks a package's dependencies (default ./cmd/convene,
# what `make vet` runs) or, given a built binary, the modules linked into it
# as `go version -m` lists them.
#
#   scripts/check-deps.sh                 # go list -deps ./cmd/convene
#   scripts/check-deps.sh ./cmd/convene   # the same
#   scripts/check-deps.sh bin/convene     # go version -m bin/convene
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-./cmd/convene}
banned='^(gonum\.org/v1/plot|codeberg\.org/go-(latex|fonts|pdf)/|git\.sr\.ht/~sbinet/gg|github\.com/ajstarks/svgo|github\.com/golang/freetype|golang\.org/x/image)'
tooling='^github\.com/convene/convene/(internal/bench|cmd/convene-bench)(/|$)'

if [ -f "$target" ]; then
  mods=$(go version -m "$target" | awk '$1 == "dep" || $1 == "=>" {print $2}')
  pkgs=""
else
  mods=$(go list -deps -f '{{with .Module}}{{.Path}}{{end}}' "$target" | sort -u)
  pkgs=$(go list -deps "$target")
fi
bad=$( { grep -E "$banned" <<<"$mods" || true; grep -E "$tooling" <<<"$pkgs" || true; } | sort -u)
if [ -n "$bad" ]; then
  echo "check-deps: $target carries benchmark tooling (it belongs in cmd/convene-bench):" >&2
  sed 's/^/  /' <<<"$bad" >&2
  exit 1
fi
echo "check-deps: $target: $(grep -c . <<<"$mods") modules, no benchmark tooling"
