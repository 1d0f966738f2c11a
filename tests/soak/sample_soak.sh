#!/usr/bin/env bash
# Sample-controller soak: examples/sample-controller as its own process on
# testenv cluster mode, talking to the apiserver only through the fault
# proxy, while a seeded driver creates, scales and deletes Foos (directly,
# bypassing the proxy) and a seeded schedule fires every fault class once:
# connection cuts (FIN and RST), a stall, 429 and 500 bursts on its
# requests, a graceful and a SIGKILL apiserver restart, and an etcd
# compaction behind a disconnect (its watches come back to a compacted
# resourceVersion: 410, relist). Then, within a bound:
#   - every Foo converges: its Deployment exists, is controlled by it (uid),
#     has spec.replicas, and Foo.status.availableReplicas == spec.replicas;
#   - no Deployment was created for a Foo after that Foo was deleted (the
#     controller acting on a stale cache); Deployments of deleted Foos are
#     the garbage collector's to remove, and kube-controller-manager's GC
#     was seen to keep some for minutes after an apiserver restart, so they
#     are counted, not waited for (each Foo incarnation has names of its
#     own, so a new Foo never waits on the GC of an old one's Deployment);
#   - no hot loop: while the apiserver is down the controller's requests
#     stay under MAX_DOWN_RPS, and once converged a quiet window sees no
#     write (but Events) through the proxy and at most a few reconciles;
#   - its RSS at the end is within 15 % (+1 MiB) of the first converged
#     point, and it is alive throughout and exits 0 on SIGTERM.
#
#   sample_soak.sh PATH/TO/sample-controller
#   KCR_SOAK_SEED=N replays a schedule (printed first); KCR_SOAK_FAULTS
#   picks fault classes (e.g. "cut stall 500"); KCR_SOAK_SECONDS
#   (default 24) is the length of the churn around the faults.
# Needs the cluster testenv (ctest fixture testenv_cluster, or
# KCR_TESTENV_DIR of `testenv/start --cluster`) with its fault proxy; SERIAL
# in ctest (it restarts the apiserver everyone shares).
# shellcheck source=../../testenv/tests/lib.sh
source "$(dirname "$0")/../../testenv/tests/lib.sh"
test_name=sample-soak
manifests=$(cd "$(dirname "$0")/../../examples/sample-controller/manifests" && pwd)

bin=${1:-}
[[ -x $bin ]] || fail "usage: $0 PATH/TO/sample-controller (build it: ninja -C build sample-controller)"
[[ ${KCR_TESTENV_CLUSTER:-} == 1 ]] ||
	fail "needs testenv cluster mode in $KCR_TESTENV_DIR: testenv/stop; testenv/start --cluster (or run through ctest)"
[[ -n ${KCR_TESTENV_PROXY_KUBECONFIG:-} && -n ${KCR_TESTENV_ETCD:-} ]] ||
	fail "the testenv in $KCR_TESTENV_DIR has no fault proxy or etcd address: restart it with testenv/start --cluster"
kc_load d "$KCR_TESTENV_KUBECONFIG"

seed=${KCR_SOAK_SEED:-$((10#$(date +%N) % 100000))}
seconds=${KCR_SOAK_SECONDS:-24}
rng=$seed
# rnd: R = the next number (0..32767) of a seeded generator (an LCG in this
# shell, not $RANDOM, whose sequence subshells can disturb): the same seed,
# the same schedule and writes.
rnd() {
	rng=$(((rng * 1103515245 + 12345) % 2147483648))
	R=$((rng >> 16))
}
timeout=${KCR_TESTENV_TEST_TIMEOUT:-90}
SLOTS=12          # Foo names foo-00 .. foo-11, Deployment dep-NN each
MAX_DOWN_RPS=20   # all its requests per second while the apiserver is down
QUIET_S=5         # the window after convergence that must be quiet
MAX_QUIET_RECONCILES=$SLOTS
ns=kcr-sample-soak-$$
json=(-H 'Content-Type: application/json')
merge=(-H 'Content-Type: application/merge-patch+json')
foos=/apis/samplecontroller.k8s.io/v1alpha1/namespaces/$ns/foos
deploys=/apis/apps/v1/namespaces/$ns/deployments

pid= log=$tmp/controller.log
cleanup() {
	local rc=$?
	fault clear || true
	if [[ -n $pid ]]; then
		cp "$log" "$KCR_TESTENV_DIR/sample-soak-controller.log"
		if ((rc != 0)); then
			echo "--- last lines of the controller's log (all of it: $KCR_TESTENV_DIR/sample-soak-controller.log):" >&2
			tail -n 20 "$log" >&2
		fi
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	kcurl d "/api/v1/namespaces/$ns" -X DELETE >/dev/null 2>&1 || true
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT

# The schedule: every fault class of KCR_SOAK_FAULTS (default all) once, in
# a seeded order, except that the ones restarting the apiserver come first:
# they hit the whole cluster (kube-controller-manager, the scheduler and
# kwok back off like the controller's reflectors, 30 s cap with jitter), and
# a restart near the end measured 60-85 s of convergence.
read -ra classes <<<"${KCR_SOAK_FAULTS:-restart kill compaction cut reset stall 429 500}"
for f in "${classes[@]}"; do
	[[ " restart kill compaction cut reset stall 429 500 " == *" $f "* ]] ||
		fail "KCR_SOAK_FAULTS: unknown fault class '$f' (restart kill compaction cut reset stall 429 500)"
done
for ((i = ${#classes[@]} - 1; i > 0; i--)); do
	rnd
	j=$((R % (i + 1)))
	f=${classes[i]} classes[i]=${classes[j]} classes[j]=$f
done
faults=()
for f in "${classes[@]}"; do [[ $f == restart || $f == kill || $f == compaction ]] && faults+=("$f"); done
for f in "${classes[@]}"; do [[ $f == restart || $f == kill || $f == compaction ]] || faults+=("$f"); done
echo "sample-soak: seed=$seed seconds=$seconds faults: ${faults[*]} (KCR_SOAK_SEED=$seed reproduces it)"

free_port() { comm -23 <(seq 20000 29999) <(ss -Htan | awk '{print $4}' | sed 's/.*://' | sort -u) | shuf -n1 --random-source=/dev/urandom; }
alive() { kill -0 "$pid" 2>/dev/null || fail "the controller exited: $(tail -n 5 "$log")"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
reconciles() {
	curl -sf "http://127.0.0.1:$mport/metrics" |
		awk '/^controller_runtime_reconcile_total\{/ { n += $2 } END { printf "%d\n", n }'
}
# writes: its creates, updates, patches and deletes so far, but Events (the
# recorder sends those after the reconcile that made them, and patches the
# count of a repeated one)
writes() {
	counts '[.requests | to_entries[] | select((.key | test("^(create|update|patch|delete) ")) and
		(.key | contains("/events") | not)) | .value] | add // 0'
}

# --- the CRD, the namespace, the controller through the proxy
kcurl d "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io?fieldManager=kcr-sample-soak" \
	-X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$manifests/crd.yaml" >/dev/null
[[ $(code) == 20[01] ]] || fail "applying the Foo CRD: HTTP $(cat "$tmp/code")"
served() { kcurl d "/apis/samplecontroller.k8s.io/v1alpha1/foos?limit=1" >/dev/null && [[ $(code) == 200 ]]; }
wait_until "$timeout" "the Foo API served" served
kcurl d /api/v1/namespaces -X POST "${json[@]}" -d "{\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
expect_code 201 "creating namespace $ns"
fault clear
fault reset-counts
t_start=$SECONDS
mport=$(free_port) pport=$(free_port)
"$bin" --kubeconfig "$KCR_TESTENV_PROXY_KUBECONFIG" --namespace "$ns" --workers 2 \
	--metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$pport" >"$log" 2>&1 &
pid=$!
ready() { alive && curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null; }
wait_until "$timeout" "the controller ready (/readyz)" ready

# --- the driver: slot i holds at most one Foo at a time, foo-II-G with
# Deployment dep-II-G (G counts the slot's incarnations). live[NAME]=replicas
# and uid[NAME] while it exists; deleted_at[UID]=epoch seconds of its delete.
declare -A live=() uid=() slot_foo=() slot_gen=() deleted_at=()
# write WHAT CURL-ARGS...: a direct write, retried (bounded) while the
# apiserver restarts; 404 and 409 count as done (an earlier attempt
# landed). The body of the last answer in $tmp/body.
write() {
	local what=$1 deadline=$((SECONDS + timeout))
	shift
	until kcurl d "$@" >"$tmp/body" 2>&1 && [[ $(code) == 20? || $(code) == 404 || $(code) == 409 ]]; do
		((SECONDS < deadline)) || fail "$what: HTTP $(cat "$tmp/code")"
		sleep 0.2
	done
}
step() {
	local slot name r
	rnd
	slot=$(printf %02d $((R % SLOTS)))
	rnd
	r=$((1 + R % 3))
	name=${slot_foo[$slot]:-}
	if [[ -z $name ]]; then
		slot_gen[$slot]=$((${slot_gen[$slot]:-0} + 1))
		name=foo-$slot-${slot_gen[$slot]}
		write "create $name" "$foos" -X POST "${json[@]}" -d "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",
			\"metadata\":{\"name\":\"$name\"},\"spec\":{\"deploymentName\":\"dep-${name#foo-}\",\"replicas\":$r}}"
		[[ $(code) == 201 ]] || write "get $name" "$foos/$name"
		uid[$name]=$(jq -er .metadata.uid "$tmp/body") || fail "no uid for $name: $(head -c 300 "$tmp/body")"
		live[$name]=$r slot_foo[$slot]=$name
		return
	fi
	rnd
	if ((R % 3)); then
		write "scale $name to $r" "$foos/$name" -X PATCH "${merge[@]}" -d "{\"spec\":{\"replicas\":$r}}"
		live[$name]=$r
	else
		write "delete $name" "$foos/$name" -X DELETE
		deleted_at[${uid[$name]}]=$EPOCHSECONDS
		unset "live[$name]" "uid[$name]" "slot_foo[$slot]"
	fi
}
churn() { # churn SECONDS: paced writes
	local end=$((SECONDS + $1))
	while ((SECONDS < end)); do
		step
		alive
		sleep 0.3
	done
}

# converged: every live Foo has its Deployment (controlled by it, replicas
# as asked) and its status, and no other Foo exists. The difference on stdout.
converged() {
	local want f d
	want=$(for n in "${!live[@]}"; do echo "$n ${live[$n]}"; done | jq -Rn '[inputs | split(" ") | {(.[0]): (.[1] | tonumber)}] | add // {}')
	f=$(kcurl d "$foos") && [[ $(code) == 200 ]] || return 1
	d=$(kcurl d "$deploys") && [[ $(code) == 200 ]] || return 1
	jq -ne --argjson want "$want" --argjson f "$f" --argjson d "$d" '
		($f.items | map({key: .metadata.name, value: .}) | from_entries) as $foo |
		($d.items | map({key: .metadata.name, value: .}) | from_entries) as $dep |
		($foo | keys) == ($want | keys) and
		all($want | to_entries[]; .key as $n | .value as $r | $foo[$n] as $x |
			$x.spec.replicas == $r and ($x.status.availableReplicas // 0) == $r and
			($dep[$x.spec.deploymentName] as $y | $y != null and $y.spec.replicas == $r and
				any($y.metadata.ownerReferences[]?; .controller and .uid == $x.metadata.uid)))' >/dev/null || {
		echo "want $(jq -c . <<<"$want"); foos: $(jq -c '[.items[] | {n: .metadata.name, r: .spec.replicas, a: .status.availableReplicas}]' <<<"$f");" \
			"deployments: $(jq -c '[.items[] | {n: .metadata.name, r: .spec.replicas, a: .status.availableReplicas, owner: ([.metadata.ownerReferences[]? | select(.controller) | .uid[:8]] | first)}]' <<<"$d")"
		return 1
	}
}

# no_late_deployments: every Deployment is controlled by a live Foo, or by a
# deleted one and created no later than that Foo's delete (1 s of timestamp
# granularity); prints how many await the garbage collector.
no_late_deployments() {
	local d live_uids deleted
	d=$(kcurl d "$deploys") && [[ $(code) == 200 ]] || fail "listing Deployments: HTTP $(cat "$tmp/code")"
	live_uids=$(printf '%s\n' "${uid[@]}" | jq -R 'select(length > 0)' | jq -sc .)
	deleted=$(for u in "${!deleted_at[@]}"; do echo "$u ${deleted_at[$u]}"; done | jq -Rn '[inputs | split(" ") | {(.[0]): (.[1] | tonumber)}] | add // {}')
	jq -nr --argjson d "$d" --argjson live "$live_uids" --argjson deleted "$deleted" '
		[$d.items[] | {n: .metadata.name, t: (.metadata.creationTimestamp | fromdateiso8601),
			o: ([.metadata.ownerReferences[]? | select(.controller) | .uid] | first)}] as $all |
		[$all[] | select(.o as $o | $live | index($o) | not)] as $orphans |
		[$orphans[] | select(.o == null or $deleted[.o] == null or .t > $deleted[.o] + 1)] as $late |
		if ($late | length) > 0 then "LATE \($late)" else "\($orphans | length)" end'
}

# converge SECONDS WHAT: until converged (bounded); the whole difference on failure.
converge() {
	local start=$SECONDS deadline=$((SECONDS + $1)) diff report=$((SECONDS + 15))
	shift
	until diff=$(converged); do
		((SECONDS < deadline)) || fail "$1: not within $((SECONDS - start))s: $diff"
		if ((SECONDS >= report)); then
			echo "sample-soak:   converging for $((SECONDS - start))s: $diff"
			report=$((SECONDS + 15))
		fi
		alive
		sleep 0.5
	done
	echo "sample-soak: $((SECONDS - t_start))s converged in $((SECONDS - start))s"
}

# --- the faults
restart() { # restart ARGS...: the apiserver down and up, the controller's request rate bounded meanwhile
	local before after t0=$EPOCHREALTIME rate
	before=$(counts .total)
	"$testenv_src/restart-apiserver" "$@" >/dev/null || fail "testenv/restart-apiserver $* failed"
	after=$(counts .total)
	rate=$(awk -v n=$((after - before)) -v t0="$t0" -v t1="$EPOCHREALTIME" 'BEGIN { printf "%.1f", n / (t1 - t0) }')
	awk -v r="$rate" -v m=$MAX_DOWN_RPS 'BEGIN { exit !(r <= m) }' ||
		fail "hot loop: $((after - before)) requests through the proxy ($rate/s, bound $MAX_DOWN_RPS/s) during testenv/restart-apiserver $*"
	echo "sample-soak:   restart $*: $((after - before)) requests through the proxy ($rate/s)"
}
etcd_revision() {
	curl -sf -X POST "$KCR_TESTENV_ETCD/v3/kv/range" -d '{"key":"AA=="}' | jq -er '.header.revision'
}
compaction() { # cut off, miss writes, compact etcd past them, restart (empties the watch cache): 410
	local lists rev
	lists=$(counts '.verbs.list // 0')
	fault refuse 240
	fault cut
	churn 2
	rev=$(etcd_revision) || fail "cannot read etcd's revision at $KCR_TESTENV_ETCD"
	curl -sf -X POST "$KCR_TESTENV_ETCD/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null ||
		fail "etcd compaction at revision $rev failed"
	restart
	fault clear
	wait_until "$timeout" "a relist after the compaction" \
		bash -c "(( \$('$testenv_src/fault' counts | jq -r '.verbs.list // 0') > $lists ))"
}
inject() {
	alive
	echo "sample-soak: $((SECONDS - t_start))s fault $1 (rss $(rss_kib) KiB, ${#live[@]} Foos)"
	case $1 in
	cut) fault cut ;;
	reset) fault cut reset ;;
	stall)
		rnd
		fault stall $((2 + R % 3))
		;;
	429 | 500)
		local n before got last deadline
		rnd
		n=$((2 + R % 4))
		before=$(counts ".injected[\"$1\"] // 0")
		if [[ $1 == 429 ]]; then fault 429 "$n" 1 "namespaces/$ns/"; else fault 500 "$n" "namespaces/$ns/"; fi
		fault cut # its watches come back through the burst
		# Each answer of the burst must follow the one before within the
		# bound: after the faults before it, a reflector's backoff has
		# reached its cap (30 s, up to doubled by jitter: client-go's
		# backoff manager, reset only after 2 quiet minutes), so the
		# whole burst can take minutes, but a pause longer than the
		# longest backoff means the retries stopped.
		last=$before deadline=$((SECONDS + timeout))
		# churn meanwhile: its reconciles' writes take their share of the burst
		while got=$(counts ".injected[\"$1\"] // 0") && ((got < before + n)); do
			((got > last)) && last=$got deadline=$((SECONDS + timeout))
			((SECONDS < deadline)) ||
				fail "the $1 burst: $((last - before)) of $n answered, then no retry within ${timeout}s: retries stopped"
			churn 1
		done
		;;
	restart)
		rnd
		restart --down $((1 + R % 2))
		;;
	kill) restart --kill --down 1 ;;
	compaction) compaction ;;
	esac
}

# --- the run
for ((i = 0; i < 6; i++)); do step; done
converge "$timeout" "the first Foos converged"
rss_first=$(rss_kib)
echo "sample-soak: first converged point: ${#live[@]} Foos, rss $rss_first KiB"
per=$(((seconds + ${#faults[@]}) / (${#faults[@]} + 1)))
for f in "${faults[@]}"; do
	churn "$per"
	inject "$f"
done
churn "$per"
fault clear
# Twice the usual bound: a Foo whose reconciles failed all through a
# restart is retried by the per-item rate limiter (5 ms doubling, up to 1000 s:
# client-go's default) tens of seconds later, and the
# reflectors back off up to 30 s with jitter; 85 s were measured.
converge $((2 * timeout)) "every Foo converged after the faults (${#live[@]} Foos, ${#deleted_at[@]} deleted)"
orphans=$(no_late_deployments)
[[ $orphans != LATE* ]] || fail "Deployments created for a Foo after it was deleted, or not controlled by a Foo: ${orphans#LATE }"
converged_s=$((SECONDS - t_start))

# no hot loop once converged: no write, a few reconciles at most
r0=$(reconciles) w0=$(writes)
sleep "$QUIET_S" # a measuring window, not a wait for state
r1=$(reconciles) w1=$(writes)
((w1 == w0)) || fail "hot loop: $((w1 - w0)) writes (not Events) through the proxy in ${QUIET_S}s after convergence"
((r1 - r0 <= MAX_QUIET_RECONCILES)) ||
	fail "hot loop: $((r1 - r0)) reconciles in ${QUIET_S}s after convergence (bound $MAX_QUIET_RECONCILES)"

rss_end=$(rss_kib) hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
((rss_end <= rss_first + rss_first * 15 / 100 + 1024)) ||
	fail "RSS grew from $rss_first KiB to $rss_end KiB (bound 15 % + 1 MiB)"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
cp "$log" "$KCR_TESTENV_DIR/sample-soak-controller.log"
((rc == 0)) || fail "the controller exited $rc on SIGTERM"
ok "seed=$seed ${converged_s}s, faults: ${faults[*]}; ${#live[@]} Foos converged, ${#deleted_at[@]} deleted (their Deployments awaiting the GC: $orphans, none created late); reconciles=$r1 (+$((r1 - r0)) in the quiet ${QUIET_S}s); proxy: $(counts .total) requests; rss $rss_first -> $rss_end KiB (peak $hwm)"
