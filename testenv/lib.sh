# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing script
# Shared settings for the testenv scripts (sourced, not executed).

testenv_src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
PATH=/usr/local/go/bin:$PATH

# Where start writes kubeconfigs, certs, logs and pid files.
KCR_TESTENV_DIR=${KCR_TESTENV_DIR:-/tmp/kcr-testenv}
export KCR_TESTENV_DIR

# Root of the binary cache; one sub-folder per <k8s-version>-<etcd-version>.
cache_root=${KCR_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcr/testenv}

log() { printf 'testenv: %s\n' "$*" >&2; }
die() { printf 'testenv: error: %s\n' "$*" >&2; exit 1; }

pki=$KCR_TESTENV_DIR/pki
logs=$KCR_TESTENV_DIR/logs
ready_timeout=${KCR_TESTENV_TIMEOUT:-90} # seconds to wait for each component

# pid_of NAME: the pid recorded in NAME.pid if that process is alive and is
# still NAME (not a recycled pid); fails otherwise.
pid_of() {
	local pid
	pid=$(cat "$KCR_TESTENV_DIR/$1.pid" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ && $(ps -p "$pid" -o comm= 2>/dev/null) == "${1:0:15}" ]] && alive "$pid" || return 1
	echo "$pid"
}

# launch NAME ARGS...: run NAME from the cache in its own session, detached
# from our stdout (so ctest does not wait on it), logging to logs/NAME.log.
# Returns once the process runs NAME: until setsid has exec'd it, pid_of
# (which checks the command name, cut to 15 characters by the kernel) would
# take it for dead.
launch() {
	local name=$1 bin=${bin_dir:?run testenv/build first} pid i
	shift
	setsid "$bin/$name" "$@" >>"$logs/$name.log" 2>&1 </dev/null 8>&- 9>&- &
	pid=$!
	echo "$pid" >"$KCR_TESTENV_DIR/$name.pid"
	for ((i = 0; i < 100; i++)); do
		[[ $(ps -p "$pid" -o comm= 2>/dev/null) == "${name:0:15}" ]] && return 0
		alive "$pid" || return 0 # exited at once: wait_for reports it with its log
		sleep 0.1
	done
	log "$name (pid $pid) still not running after 10 s"
}

# wait_for NAME CMD...: retry CMD every 0.2 s until it succeeds; fail with the
# tail of NAME's log if NAME exits or the wait exceeds $ready_timeout. The
# message names what was awaited if $what is set (what="..." wait_for ...).
wait_for() {
	local name=$1 deadline=$((SECONDS + ready_timeout))
	shift
	until "$@" >/dev/null 2>&1; do
		local why=
		pid_of "$name" >/dev/null || why="exited before it was ready"
		((SECONDS <= deadline)) || why="did not become ready within ${ready_timeout}s"
		if [[ -n $why ]]; then
			log "$name $why${what:+ ($what)}; last lines of $logs/$name.log:"
			tail -n 30 "$logs/$name.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done
}

# Admin access to the apiserver, straight (not through the proxy).
admin_curl() {
	curl -sSf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@"
}
apiserver_ready() { admin_curl "https://127.0.0.1:$1/readyz"; }

# alive PID: the process exists and is not a zombie (PID 1 may not reap).
alive() {
	local stat
	stat=$(ps -p "$1" -o stat= 2>/dev/null) && [[ $stat != Z* ]]
}

# stop_pid NAME [SIGNAL]: send SIGNAL (default TERM) to the NAME process,
# wait up to 20 s for it to exit, then SIGKILL it.
stop_pid() {
	local pid i
	pid=$(pid_of "$1") || { rm -f "$KCR_TESTENV_DIR/$1.pid"; return 0; }
	kill "-${2:-TERM}" "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.2
	done
	if alive "$pid"; then
		log "$1 (pid $pid) ignored SIGTERM, killing it"
		kill -KILL "$pid" 2>/dev/null || true
		while alive "$pid"; do sleep 0.1; done
	fi
	rm -f "$KCR_TESTENV_DIR/$1.pid"
}

# listening PORT: succeeds if something listens on 127.0.0.1:PORT.
listening() { [[ -n $(ss -Htln "sport = :$1") ]]; }

# write_kubeconfig FILE SERVER CA-DATA USER-NAME USER-LINES: a one-cluster,
# one-user kubeconfig with everything embedded.
write_kubeconfig() {
	cat >"$1" <<-YAML
	apiVersion: v1
	kind: Config
	clusters:
	- name: kcr-testenv
	  cluster:
	    server: $2
	    certificate-authority-data: $3
	users:
	- name: $4
	  user:
	$5
	contexts:
	- name: kcr-testenv
	  context:
	    cluster: kcr-testenv
	    user: $4
	current-context: kcr-testenv
	YAML
	chmod 600 "$1"
}
