#!/usr/bin/env bash
# shard-check's own test: it passes clean logs, and fails (exit 1, naming
# the key and both intervals) on overlaps across replicas and within one,
# on a key never reconciled; exit 2 for a malformed line.
#   selftest.sh PATH/TO/shard-check [WRAPPER...]
set -euo pipefail
check=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL shard-check selftest: $*" >&2; exit 1; }
# expect WANT ARGS...: the checker's exit status is WANT; stdout+stderr in $out.
expect() {
	local want=$1 rc=0
	shift
	out=$("${wrapper[@]}" "$check" "$@" 2>&1) || rc=$?
	[[ $rc == "$want" ]] || fail "shard-check $*: exit $rc, want $want; said: $out"
}
wrapper=("$@")

# Two replicas, interleaved but never at once on one key; r0 ends exactly
# when r1 starts (touching is not overlapping).
printf '%s\n' "r0 ns/a 100 200" "r0 ns/b 100 300" "r0 ns/a 500 600" >"$tmp/r0.log"
printf '%s\n' "r1 ns/a 200 400" "r1 ns/b 300 350" "r1 ns/c 10 20" >"$tmp/r1.log"
printf '%s\n' ns/a ns/b ns/c >"$tmp/keys"
expect 0 --keys "$tmp/keys" "$tmp/r0.log" "$tmp/r1.log"
grep -qx "summary: lines=6 keys=3 replicas=2 overlaps=0 unreconciled=0" <<<"$out" || fail "clean: $out"
grep -qx "REPLICA r0 reconciles=3 keys=2" <<<"$out" || fail "replica counts: $out"
grep -qx "REPLICA r1 reconciles=3 keys=3" <<<"$out" || fail "replica counts: $out"

# r2 runs ns/b while r0 still does (300 > 250): one overlap, both named.
printf '%s\n' "r2 ns/b 250 260" >"$tmp/r2.log"
expect 1 "$tmp/r0.log" "$tmp/r1.log" "$tmp/r2.log"
grep -qx "OVERLAP ns/b r0 100 300 r2 250 260" <<<"$out" || fail "overlap not reported: $out"
grep -q "overlaps=1 " <<<"$out" || fail "overlap count: $out"

# An overlap hidden behind a shorter interval of another replica: r3's
# [0,1000] covers everything after it.
printf '%s\n' "r3 ns/c 0 1000" >"$tmp/r3.log"
expect 1 "$tmp/r1.log" "$tmp/r3.log"
grep -qx "OVERLAP ns/c r3 0 1000 r1 10 20" <<<"$out" || fail "covering overlap: $out"

# Two callbacks of one replica at once on one key count too.
printf '%s\n' "r0 ns/d 10 50" "r0 ns/d 40 60" >"$tmp/self.log"
expect 1 "$tmp/self.log"
grep -qx "OVERLAP ns/d r0 10 50 r0 40 60" <<<"$out" || fail "same-replica overlap: $out"

# Several replicas in one file (O_APPEND) read the same as separate files.
cat "$tmp/r0.log" "$tmp/r2.log" >"$tmp/shared.log"
expect 1 "$tmp/shared.log"
grep -qx "OVERLAP ns/b r0 100 300 r2 250 260" <<<"$out" || fail "shared file: $out"

# A key of --keys nobody reconciled.
printf '%s\n' ns/a ns/never >"$tmp/keys2"
expect 1 --keys "$tmp/keys2" "$tmp/r0.log"
grep -qx "UNRECONCILED ns/never" <<<"$out" || fail "unreconciled key not reported: $out"
grep -q "overlaps=0 unreconciled=1" <<<"$out" || fail "unreconciled count: $out"

# --max-report caps the lines, not the count.
for i in 1 2 3; do echo "r0 ns/e $((i * 10)) 100"; done >"$tmp/many.log"
expect 1 --max-report 1 "$tmp/many.log"
[[ $(grep -c '^OVERLAP' <<<"$out") == 1 ]] || fail "--max-report 1 printed more: $out"
grep -q "overlaps=2 " <<<"$out" || fail "capped count: $out"

# Malformed input: exit 2 naming file and line.
printf '%s\n' "r0 ns/a 100 200" "r0 ns/a 300" >"$tmp/bad.log"
expect 2 "$tmp/bad.log"
grep -q "bad.log:2:" <<<"$out" || fail "malformed line not located: $out"
printf '%s\n' "r0 ns/a 300 200" >"$tmp/backwards.log"
expect 2 "$tmp/backwards.log"
printf 'r0 ns/a 100 200' >"$tmp/torn.log" # no newline: a torn write
expect 2 "$tmp/torn.log"
expect 2 "$tmp/missing.log"
expect 2
echo "ok   shard-check selftest"
