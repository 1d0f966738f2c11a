#!/usr/bin/env bash
# The team_namespaces_line_ratio test: the code lines (tools/count-code-lines:
# non-blank, non-comment) of the C controller (teams.c, teams.h, main.c; not
# the generated types, not the tests) against its controller-runtime twin
# (go/main.go). Fails when C has more lines than Go x MAX_RATIO (default 1.0).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
count=$here/../../tools/count-code-lines/count-code-lines
max_ratio=${MAX_RATIO:-1.0}
c=$("$count" "$here/teams.c" "$here/teams.h" "$here/main.c" | tail -n 1 | cut -d' ' -f1)
go=$("$count" "$here/go/main.go" | tail -n 1 | cut -d' ' -f1)
ratio=$(awk -v c="$c" -v g="$go" 'BEGIN { printf "%.2f", c / g }')
echo "team-namespaces: C $c lines (teams.c + teams.h + main.c), Go $go lines (go/main.go): ratio $ratio (at most $max_ratio)"
if awk -v c="$c" -v g="$go" -v m="$max_ratio" 'BEGIN { exit !(c > g * m) }'; then
    echo "FAIL: the C controller has more than $max_ratio x the Go twin's lines" >&2
    exit 1
fi
