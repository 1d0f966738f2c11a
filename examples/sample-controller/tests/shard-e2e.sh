#!/usr/bin/env bash
# The sample controller as several replicas (separate processes) on one
# testenv, each with --reconcile-log; tests/shard-check reads the logs.
#
#   shard-e2e.sh PATH/TO/sample-controller PATH/TO/shard-check MODE
#
# MODE unsharded: the negative control. 3 replicas without sharding or
#   leader election reconcile every Foo each: the checker MUST find
#   overlapping intervals (else it could not fail), and every Foo converges.
# MODE filter | server | server-fallback | label: 3 replicas with --shard-mode
#   (server: against an apiserver with ShardedListAndWatch on, checked with
#   a ConfigMap list; server-fallback: off. Either way a replica must fall
#   back to filtering, and log it, exactly when the apiserver does not
#   filter a Foo list by its shardSelector: v1.37.2 with the gate on
#   filters it, without writing metadata.shardInfo into it, as it does for
#   custom resources). Then kill -9 of one, a fourth added, every replica
#   rolled (SIGTERM, restart with the same identity, one by one); new Foos
#   after each step; every Foo converges and the checker finds no overlap
#   and no Foo never reconciled. r0-r2 run with --shard-restart-grace: while
#   one of them restarts, the others' kcr_shard_owned_objects must not grow;
#   r3 without, so its Foos move to the others and back (the release
#   hand-over). label: at the end every Foo carries the
#   shard label of a running replica and no drain label, and a replica's
#   cache held only its own Foos.
# KCR_SHARD_E2E_WRAPPER runs each replica under a command (valgrind).
# A Foo has converged when its Deployment exists with the Foo's replicas and
# its status.availableReplicas is set (whatever its value: Pods are not
# needed, so a testenv without controllers serves, where it stays 0). KCR_SHARD_E2E_FOOS Foos (default 1000)
# first, a tenth more after each step. Every wait is bounded
# (KCR_TESTENV_TEST_TIMEOUT seconds, default 90, times 4 for the
# convergence of all Foos); every controller started is stopped, the
# namespace deleted, on exit.
# shellcheck source=../../../testenv/tests/lib.sh
source "$(dirname "$0")/../../../testenv/tests/lib.sh"
manifests=$(cd "$(dirname "$0")/../manifests" && pwd)

bin=${1:-}
checker=${2:-}
mode=${3:-}
[[ -x $bin && -x $checker && $mode =~ ^(unsharded|filter|server|server-fallback|label)$ ]] ||
	fail "usage: $0 PATH/TO/sample-controller PATH/TO/shard-check unsharded|filter|server|server-fallback|label"
test_name=sample-controller-shard-e2e-$mode
kc_load d "$KCR_TESTENV_KUBECONFIG"
ns=kcr-shard-e2e-$$
ring=sample-shard-e2e-$$ # a ring of this run only: Leases of earlier runs stay out
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
n_foos=${KCR_SHARD_E2E_FOOS:-1000}
# KCR_SHARD_E2E_WRAPPER: a command the replicas run under, e.g. "valgrind
# --error-exitcode=99 ...": an error then fails the replica's SIGTERM exit.
read -r -a wrapper <<<"${KCR_SHARD_E2E_WRAPPER:-}"
step=$(((n_foos + 9) / 10))
restart_grace=60s # longer than a restart takes, under valgrind too
converge_timeout=$((timeout * 4))

declare -A pids ports
cleanup() {
	local rc=$? name log
	if ((rc != 0)); then
		for log in "$tmp"/*.log; do
			[[ -f $log ]] || continue
			echo "--- last lines of controller $(basename "$log" .log)'s log:" >&2
			tail -n 15 "$log" >&2
		done
	fi
	for name in "${!pids[@]}"; do
		kill -KILL "${pids[$name]}" 2>/dev/null || true
		wait "${pids[$name]}" 2>/dev/null || true
	done
	# no namespace controller in plain testenv: the objects go one collection at a time
	kcurl d "$foos" -X DELETE >/dev/null 2>&1 || true
	kcurl d "$deploys" -X DELETE >/dev/null 2>&1 || true
	kcurl d "/apis/coordination.k8s.io/v1/namespaces/sample-controller/leases?labelSelector=$(jq -rn --arg r "$ring" '"kcr.dev/shard-ring=" + $r | @uri')" \
		-X DELETE >/dev/null 2>&1 || true
	kcurl d "/apis/coordination.k8s.io/v1/namespaces/sample-controller/leases/$ring.coordinator" \
		-X DELETE >/dev/null 2>&1 || true
	delete_test_objects
}
trap cleanup EXIT

# start_ctl NAME: runs replica NAME (identity NAME, log $tmp/NAME.log,
# reconcile log $tmp/NAME.reconciles, metrics and probes on one port).
start_ctl() {
	local name=$1 args=()
	case $mode in
	unsharded) ;;
	server-fallback) args=(--shard-mode=server --shard-identity="$name" --shard-ring="$ring") ;;
	*) args=(--shard-mode="$mode" --shard-identity="$name" --shard-ring="$ring") ;;
	esac
	[[ $mode == unsharded || $name == r3 ]] || args+=(--shard-restart-grace="$restart_grace")
	ports[$name]=$(free_port)
	POD_NAME=$name "${wrapper[@]}" "$bin" --kubeconfig "$kubeconfig" --namespace "$ns" \
		--metrics-bind-address "127.0.0.1:${ports[$name]}" \
		--health-probe-bind-address "127.0.0.1:${ports[$name]}" \
		--reconcile-log "$tmp/$name.reconciles" "${args[@]}" >>"$tmp/$name.log" 2>&1 &
	pids[$name]=$!
}
ready() {
	kill -0 "${pids[$1]}" 2>/dev/null || { echo "exited: $(tail -n 20 "$tmp/$1.log")"; return 1; }
	curl -sf "http://127.0.0.1:${ports[$1]}/readyz?verbose"
}
wait_ready() { wait_until "$timeout" "replica $1 ready (/readyz; log: $tmp/$1.log)" ready "$1"; }
# stop_ctl NAME SIGNAL: signals the replica and waits for it; status in $rc.
stop_ctl() {
	rc=0
	kill "-$2" "${pids[$1]}"
	wait "${pids[$1]}" 2>/dev/null || rc=$?
	unset "pids[$1]"
}

# create_foos FROM TO: Foos foo-FROM..foo-TO (Deployment of the same name, 1
# replica) over one connection, each recorded in $tmp/keys.
create_foos() {
	local i cfg=$tmp/create.curl codes
	: >"$cfg"
	for ((i = $1; i <= $2; i++)); do
		((i == $1)) || echo next >>"$cfg" # options after "next" are the next request's
		printf '%s\n' "url = \"$(cat "$tmp/d.server")$foos\"" "request = POST" \
			"cacert = \"$tmp/d.ca\"" "cert = \"$tmp/d.crt\"" "key = \"$tmp/d.key\"" \
			"header = \"Content-Type: application/json\"" \
			"data = \"{\\\"apiVersion\\\":\\\"samplecontroller.k8s.io/v1alpha1\\\",\\\"kind\\\":\\\"Foo\\\",\\\"metadata\\\":{\\\"name\\\":\\\"foo-$i\\\"},\\\"spec\\\":{\\\"deploymentName\\\":\\\"foo-$i\\\",\\\"replicas\\\":1}}\"" \
			"silent" "show-error" "output = /dev/null" "write-out = \"%{http_code}\\n\"" >>"$cfg"
		echo "$ns/foo-$i" >>"$tmp/keys"
	done
	codes=$(curl -K "$cfg" | sort | uniq -c)
	[[ $(awk '$2 == 201 { print $1 }' <<<"$codes") == $(($2 - $1 + 1)) ]] ||
		fail "create Foos foo-$1..foo-$2: HTTP status counts: $codes"
}
# converged: every Foo of $tmp/keys has its Deployment with the Foo's
# replicas and status.availableReplicas set (prints what is missing).
converged() {
	local f d
	f=$(kcurl d "$foos") && [[ $(code) == 200 ]] || { echo "list Foos: HTTP $(code)"; return 1; }
	d=$(kcurl d "$deploys") && [[ $(code) == 200 ]] || { echo "list Deployments: HTTP $(code)"; return 1; }
	jq -en --argjson want "$(wc -l <"$tmp/keys")" --slurpfile f <(echo "$f") --slurpfile d <(echo "$d") '
		($d[0].items | map({key: .metadata.name, value: .spec.replicas}) | from_entries) as $dep
		| [$f[0].items[] | select(.status.availableReplicas == null or $dep[.spec.deploymentName] != .spec.replicas)
		   | .metadata.name] as $behind
		| if ($f[0].items | length) == $want and ($behind | length) == 0 then true
		  else error("\($f[0].items | length) of \($want) Foos, \($behind | length) not converged: \($behind[:10])") end'
}
wait_converged() { wait_until "$converge_timeout" "every Foo converged ($1)" converged; }

# ---- the CRD, RBAC (the replicas run as the ServiceAccount), the Foos --------
install_crd_namespace_rbac
apply "$manifests/statefulset.yaml" "&dryRun=All"
kubeconfig=$tmp/sa.kubeconfig
sa_kubeconfig "$kubeconfig"
: >"$tmp/keys"
create_foos 1 "$n_foos"
ok "$n_foos Foos in $ns; replicas run as the ServiceAccount of rbac.yaml (statefulset.yaml passes a server dry run)"

# check_logs WANT: shard-check on every replica's reconcile log exits WANT.
check_logs() {
	local rc=0
	"$checker" --keys "$tmp/keys" "$tmp"/*.reconciles >"$tmp/check.out" 2>&1 || rc=$?
	[[ $rc == "$1" ]] || fail "shard-check exited $rc, want $1: $(tail -n 30 "$tmp/check.out")"
	summary=$(grep '^summary:' "$tmp/check.out")
}

if [[ $mode == unsharded ]]; then
	# ---- the negative control: 3 unsharded replicas reconcile every Foo ------
	for r in r0 r1 r2; do start_ctl "$r"; done
	for r in r0 r1 r2; do wait_ready "$r"; done
	wait_converged "3 unsharded replicas"
	for r in r0 r1 r2; do stop_ctl "$r" TERM; ((rc == 0)) || fail "replica $r exited $rc after SIGTERM"; done
	check_logs 1
	overlaps=$(sed -n 's/.* overlaps=\([0-9]*\) .*/\1/p' <<<"$summary")
	((overlaps > 0)) || fail "3 unsharded replicas, yet no overlap found: $summary"
	grep -q "unreconciled=0$" <<<"$summary" || fail "unsharded, a Foo was never reconciled: $summary"
	for r in r0 r1 r2; do
		grep -q "^REPLICA $r " "$tmp/check.out" || fail "replica $r logged no reconcile"
	done
	ok "negative control: shard-check finds $overlaps overlapping reconciles ($summary)"
	exit 0
fi

# ---- 3 sharded replicas ----------------------------------------------------------
for r in r0 r1 r2; do start_ctl "$r"; done
for r in r0 r1 r2; do wait_ready "$r"; done
wait_converged "3 replicas"
ok "3 replicas ($mode): every Foo converged"

# ---- kill -9 of one: its Foos move after its Lease expires -----------------------
stop_ctl r1 KILL
create_foos $((n_foos + 1)) $((n_foos + step))
wait_converged "r1 killed"
ok "r1 killed (SIGKILL): its Foos and $step new ones converged"

# ---- a fourth replica joins ------------------------------------------------------
start_ctl r3
wait_ready r3
create_foos $((n_foos + step + 1)) $((n_foos + 2 * step))
wait_converged "r3 joined"
ok "r3 joined: $step more Foos converged"

# ---- roll every replica: SIGTERM, restart with the same identity ----------------
# r0 and r2 keep their place for --shard-restart-grace: while one is away the
# others own exactly what they owned before (kcr_shard_owned_objects); r3
# releases its place, and its Foos move to the others and back.
owned() {
	curl -sf "http://127.0.0.1:${ports[$1]}/metrics" |
		sed -n 's/^kcr_shard_owned_objects{[^}]*} \([0-9.e+]*\)$/\1/p' | head -n 1
}
owned_by() { # REPLICA...: the sum of their kcr_shard_owned_objects
	local r v sum=0
	for r in "$@"; do
		v=$(owned "$r")
		[[ -n $v ]] || fail "replica $r reports no kcr_shard_owned_objects"
		sum=$((sum + ${v%.*}))
	done
	echo "$sum"
}
all_owned() { # every Foo owned by a running replica (the ring settled)
	local sum
	sum=$(owned_by r0 r2 r3)
	((sum == n_foos + 2 * step)) || { echo "the replicas own $sum of $((n_foos + 2 * step)) Foos"; return 1; }
}
for r in r0 r2 r3; do
	wait_until "$timeout" "every Foo owned before $r restarts" all_owned
	others=()
	for o in r0 r2 r3; do [[ $o == "$r" ]] || others+=("$o"); done
	before=$(owned_by "${others[@]}")
	stop_ctl "$r" TERM
	((rc == 0)) || fail "replica $r exited $rc after SIGTERM"
	if [[ $r != r3 ]]; then
		sleep 6 # three retry periods: a released place is taken within one
		away=$(owned_by "${others[@]}")
		((away == before)) ||
			fail "while $r restarted within its grace the others' share went from $before to $away Foos"
	fi
	start_ctl "$r"
	wait_ready "$r"
done
create_foos $((n_foos + 2 * step + 1)) $((n_foos + 3 * step))
wait_converged "rolled"
ok "r0, r2, r3 rolled one by one: $step more Foos converged; while r0 and r2 were away (restart grace $restart_grace) the others took none of their Foos"

# ---- the modes' own evidence, then the logs -------------------------------------
# server mode follows the apiserver: it filters on the server when a list
# with a shardSelector answers with metadata.shardInfo or holds nothing
# outside the selector, and falls back (and says so) when not. Which it is,
# is asked of the apiserver here: ConfigMaps (built in: shardInfo is the
# gate's own witness) and Foos (a custom resource: v1.37.2 filters their
# lists but writes no shardInfo into them, so what comes back decides).
fallback="foos: the apiserver ignored shardSelector"
shard_info() { # PATH: does a list of PATH with a shardSelector carry shardInfo?
	local sel
	sel=$(jq -rn '"shardRange(object.metadata.uid, '"'"'0x0000000000000000'"'"', '"'"'0x10000000000000000'"'"')" | @uri')
	kcurl d "$1?limit=1&shardSelector=$sel" | jq -e '.metadata.shardInfo != null' >/dev/null
}
filters() { # PATH (holding objects): does a selector of one hash value empty its list?
	local sel
	sel=$(jq -rn '"shardRange(object.metadata.uid, '"'"'0x0000000000000000'"'"', '"'"'0x0000000000000001'"'"')" | @uri')
	kcurl d "$1?limit=1&shardSelector=$sel" | jq -e '.items | length == 0' >/dev/null
}
if [[ $mode == server* ]]; then
	gate=off foos_served=no
	shard_info /api/v1/configmaps && gate=on
	filters "$foos" && foos_served=yes
	[[ $mode == server && $gate == on ]] || [[ $mode == server-fallback && $gate == off ]] ||
		fail "mode $mode, yet the apiserver's ShardedListAndWatch is $gate (a ConfigMap list with a shardSelector)"
	if [[ $foos_served == yes ]]; then
		! grep -q "$fallback" "$tmp"/r*.log || fail "the apiserver applies shardSelector to Foos, yet a replica fell back: $(grep -h "$fallback" "$tmp"/r*.log | head -n 1)"
	else
		grep -q "$fallback" "$tmp/r0.log" || fail "the apiserver ignores shardSelector for Foos, yet r0 did not log \"$fallback\""
	fi
	ok "server mode: ShardedListAndWatch $gate; the apiserver applies shardSelector to Foos: $foos_served; the replicas followed"
fi
if [[ $mode == label ]]; then
	# every Foo labelled with a running replica, none left draining, and each
	# replica's Foo cache holding its own Foos only (kcr_cache_objects)
	labelled() {
		kcurl d "$foos" | jq -e --arg k "shard.kcr.dev/$ring" --arg dk "drain.kcr.dev/$ring" '
			[.items[] | select((((.metadata.labels // {})[$k] // "") | IN("r0", "r2", "r3") | not)
			                   or ((.metadata.labels // {})[$dk] != null)) | .metadata.name] as $bad
			| if ($bad | length) == 0 then true
			  else error("\($bad | length) Foos without a running replica'"'"'s shard label or still draining: \($bad[:10])") end'
	}
	wait_until "$timeout" "every Foo labelled with a running replica" labelled
	all=$((n_foos + 3 * step))
	caches_split() {
		local r cached total=0
		for r in r0 r2 r3; do
			cached=$(curl -sf "http://127.0.0.1:${ports[$r]}/metrics" |
				sed -n 's/^kcr_cache_objects{resource="foos",group="samplecontroller.k8s.io",namespace="[^"]*"} \([0-9.e+]*\)$/\1/p' | head -n 1)
			[[ -n $cached ]] || { echo "replica $r: no kcr_cache_objects for foos"; return 1; }
			cached=${cached%.*}
			((cached < all)) || { echo "replica $r caches $cached Foos: not only its own"; return 1; }
			total=$((total + cached))
		done
		((total == all)) || { echo "the replicas' Foo caches hold $total Foos, not $all"; return 1; }
	}
	wait_until "$timeout" "the Foo caches split among the replicas" caches_split
	ok "label mode: every Foo carries a running replica's shard label, none drains, each replica caches only its own"
fi
for r in r0 r2 r3; do stop_ctl "$r" TERM; ((rc == 0)) || fail "replica $r exited $rc after SIGTERM"; done
check_logs 0
for r in r0 r1 r2 r3; do
	grep -q "^REPLICA $r " "$tmp/check.out" || fail "replica $r reconciled nothing: $(cat "$tmp/check.out")"
done
ok "no key reconciled twice at once, every Foo reconciled ($summary)"
