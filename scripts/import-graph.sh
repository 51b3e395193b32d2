#!/usr/bin/env bash
# Prints the import graph of Convene's own packages, generated from the
# code by `go list`: one Markdown list item per package, in path order, with
# the module's packages it imports (tests' imports left out), paths relative
# to the module. ARCHITECTURE.md carries this output between the
# markers <!-- import-graph --> and <!-- /import-graph -->.
#
#   scripts/import-graph.sh           # print the graph
#   scripts/import-graph.sh -check    # fail if ARCHITECTURE.md's copy differs (make vet)
#   scripts/import-graph.sh -write    # replace ARCHITECTURE.md's copy
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)

graph() {
  go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./... |
    awk -v mod="$mod/" '
      function short(p) { return substr(p, length(mod) + 1) }
      {
        line = "- `" short($1) "`"; n = 0
        for (i = 2; i <= NF; i++) {
          if (index($i, mod) != 1) continue
          line = line (n++ ? ", " : " → ") short($i)
        }
        if (n == 0) line = line " → (none)"
        print line
      }'
}

doc=ARCHITECTURE.md
begin='<!-- import-graph -->'
end='<!-- /import-graph -->'
# inDoc prints what ARCHITECTURE.md holds between the markers, without the
# markers and the blank lines next to them.
inDoc() {
  awk -v b="$begin" -v e="$end" '$0 == e {on = 0} on && NF {print} $0 == b {on = 1}' "$doc"
}

case "${1:-}" in
"")
  graph
  ;;
-check)
  if ! grep -qxF "$begin" "$doc" || ! grep -qxF "$end" "$doc"; then
    echo "import-graph: $doc lacks the markers $begin and $end" >&2
    exit 1
  fi
  if ! d=$(diff -u --label "$doc" --label "the code" <(inDoc) <(graph)); then
    echo "import-graph: the import graph in $doc is not the code's; run scripts/import-graph.sh -write:" >&2
    echo "$d" >&2
    exit 1
  fi
  ;;
-write)
  g=$(graph)
  awk -v b="$begin" -v e="$end" -v g="$g" '
    $0 == b {print; print ""; print g; print ""; skip = 1; next}
    $0 == e {skip = 0}
    !skip {print}' "$doc" >"$doc.tmp"
  mv "$doc.tmp" "$doc"
  ;;
*)
  echo "usage: scripts/import-graph.sh [-check | -write]" >&2
  exit 2
  ;;
esac
