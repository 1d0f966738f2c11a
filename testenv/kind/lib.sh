# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing script
# Shared settings for the testenv/kind scripts (sourced, not executed).

kind_src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOTOOLCHAIN=local
PATH=/usr/local/go/bin:$PATH

# Root of the image cache: one sub-folder per thing built, named by its
# versions, so a version bump builds afresh and old builds stay usable.
kind_cache=${KCR_KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcr/kind}

# The Debian release every image starts from (debootstrap, no registry).
debian_suite=bookworm

log() { printf 'kind: %s\n' "$*" >&2; }
die() { printf 'kind: error: %s\n' "$*" >&2; exit 1; }

need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || die "$c not found (cmake/install-deps installs what testenv/kind needs)"
	done
}

# debian_mirror: the Debian mirror this machine's apt uses (its first
# deb.sources URIs or sources.list line), so debootstrap fetches from where
# apt-get does.
debian_mirror() {
	local m
	m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v -- '-security' | head -n1)
	[[ -n $m ]] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
		awk '{print $2}' | grep -v -- '-security' | head -n1)
	[[ -n $m ]] || die "no Debian mirror in /etc/apt/sources.list{,.d}: cannot debootstrap"
	echo "$m"
}

# debian_sources_list: sources.list lines for $debian_suite on this machine's
# mirrors (the release, its updates and, if apt has one, the security mirror).
debian_sources_list() {
	local m sec
	m=$(debian_mirror)
	sec=$(grep -hs '^URIs:.*-security' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | head -n1)
	[[ -n $sec ]] || sec=$(grep -hs '^deb .*-security' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' | head -n1)
	printf 'deb %s %s main\ndeb %s %s-updates main\n' "$m" "$debian_suite" "$m" "$debian_suite"
	[[ -z $sec ]] || printf 'deb %s %s-security main\n' "$sec" "$debian_suite"
}

# image_exists REF: docker has REF locally.
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# lock NAME: take an exclusive lock for the rest of the script (fd 9), so
# concurrent builds of the same thing wait for each other.
lock() {
	mkdir -p "$kind_cache"
	exec 9>"$kind_cache/.$1.lock"
	flock 9
}

# What the node image is made of. kind's own base image pins the same
# components (containerd, crictl, CNI plugins); Kubernetes comes from
# testenv/go.mod (k8s.io/kubernetes, etcd), like testenv's control plane.
kind_version=v0.33.0
containerd_version=v2.3.4
crictl_version=v1.36.0
cni_plugins_version=v1.9.1
coredns_version=v1.14.6
local_path_version=v0.0.30

# gobuild DIR NAME PACKAGE@VERSION [ENV...]: `go install` one command at its
# module's own pins (its go.sum, checked against the checksum database) into
# DIR/NAME, through a temporary name so a half-built file never counts.
gobuild() {
	local dir=$1 name=$2 pkg=$3 start=$SECONDS tmp
	shift 3
	[[ -x $dir/$name ]] && return 0
	log "building $name from $pkg"
	tmp=$(mktemp -d "$dir/.gobin.XXXXXX")
	env GOBIN="$tmp" GOFLAGS= "$@" go install -trimpath -ldflags='-s -w' "$pkg"
	mv -f "$tmp/$(basename "${pkg%@*}")" "$dir/$name"
	rm -rf "$tmp"
	log "built $name in $((SECONDS - start))s"
}

# Linux capability names by number (capability.h), for docker_missing_caps.
cap_names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
	LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
	SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE
	SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP
	MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF
	CHECKPOINT_RESTORE)

# docker_missing_caps: the capabilities this Docker engine cannot give a
# container (names, space separated; empty when `docker run --privileged`
# works). The probe runs a local image (no pull): kcr/kind-userland's (none:
# testenv/kind built nothing here, so the engine is taken as normal). When
# it fails for want of capabilities, the missing ones are those absent from
# the bounding set of the engine's process (or ours: a sandbox drops them for
# everything in it).
docker_missing_caps() {
	local image out bnd pid i missing=()
	image=$(docker images -q 'kcr/kind-userland' | head -n1)
	[[ -n $image ]] || return 0 # nothing built here: a pulled kindest/node, a normal engine
	out=$(docker run --rm --privileged --entrypoint true "$image" 2>&1) && return 0
	[[ $out == *"unable to apply caps"* ]] || die "docker run --privileged failed: $out"
	pid=$(pgrep -xo dockerd || true)
	bnd=$(awk '/^CapBnd:/ {print $2}' "/proc/${pid:-self}/status" 2>/dev/null) ||
		bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
	for i in "${!cap_names[@]}"; do
		(((16#$bnd >> i) & 1)) || missing+=("${cap_names[$i]}")
	done
	((${#missing[@]})) || die "docker run --privileged fails ($out) but no capability is missing here"
	echo "${missing[*]}"
}

# with_docker_shim CMD...: run CMD (kind) with testenv/kind/docker-shim
# first on PATH when this Docker engine cannot run privileged containers.
with_docker_shim() {
	local missing
	missing=$(docker_missing_caps)
	if [[ -z $missing ]]; then
		"$@"
	else
		log "this Docker engine cannot start privileged containers (it lacks CAP_${missing// /, CAP_}): kind runs through testenv/kind/docker-shim"
		KCR_KIND_REAL_DOCKER=$(command -v docker) KCR_KIND_MISSING_CAPS=$missing PATH="$kind_src/docker-shim:$PATH" "$@"
	fi
}

# pause_image BINS: the sandbox image name kubeadm expects (its own list,
# `kubeadm config images list`, from the kubeadm in BINS).
pause_image() {
	"$1/kubeadm" config images list --kubernetes-version "$("$1/kubeadm" version -o short)" 2>/dev/null |
		grep '/pause:' || die "$1/kubeadm names no pause image"
}
