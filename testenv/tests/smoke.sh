#!/usr/bin/env bash
# Smoke test of the testenv: version, and the three identities (admin client
# certificate, limited client certificate, bearer token), straight and
# through the fault proxy.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"

want_version=${KCR_TESTENV_EXPECT_VERSION:-v1.37}
kc_load admin "$KCR_TESTENV_KUBECONFIG"
kc_load limited "$KCR_TESTENV_LIMITED_KUBECONFIG"
kc_load token "$KCR_TESTENV_TOKEN_KUBECONFIG"

version=$(kcurl admin /version | jq -r .gitVersion)
[[ $version == "$want_version"* ]] || fail "/version is $version, want $want_version.*"
ok "/version is $version"

check_identities() { # SUFFIX: "" for the apiserver, "p" for the proxy
	local s=$1 body
	body=$(kcurl "admin$s" /api/v1/namespaces)
	expect_code 200 "admin lists namespaces"
	jq -e '.kind == "NamespaceList" and any(.items[]; .metadata.name == "default")' <<<"$body" >/dev/null ||
		fail "admin: namespace list lacks default: $body"
	ok "admin lists namespaces ${s:+(proxy)}"

	body=$(kcurl "limited$s" /api/v1/namespaces)
	expect_code 403 "limited user lists namespaces"
	jq -e '.kind == "Status" and .reason == "Forbidden" and
		(.message | test("cannot list resource \"namespaces\""))' <<<"$body" >/dev/null ||
		fail "limited: want a Forbidden Status, got: $body"
	ok "limited user: 403 \"$(jq -r .message <<<"$body")\" ${s:+(proxy)}"

	kcurl "token$s" /api/v1/namespaces/default >/dev/null
	expect_code 200 "token user gets namespace default"
	body=$(kcurl "token$s" /apis/authentication.k8s.io/v1/selfsubjectreviews -X POST \
		-H 'Content-Type: application/json' -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}')
	expect_code 201 "token user self-review"
	ok "token user works as $(jq -r .status.userInfo.username <<<"$body") ${s:+(proxy)}"
}
check_identities ""

if [[ -n ${KCR_TESTENV_PROXY_KUBECONFIG:-} ]]; then
	kc_load adminp "$KCR_TESTENV_PROXY_KUBECONFIG"
	kc_load limitedp "$KCR_TESTENV_PROXY_LIMITED_KUBECONFIG"
	kc_load tokenp "$KCR_TESTENV_PROXY_TOKEN_KUBECONFIG"
	check_identities p
	# The proxy must keep the identity: the admin is still in system:masters.
	body=$(kcurl adminp /apis/authentication.k8s.io/v1/selfsubjectreviews -X POST \
		-H 'Content-Type: application/json' -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}')
	jq -e '.status.userInfo.groups | index("system:masters")' <<<"$body" >/dev/null ||
		fail "admin through the proxy lost system:masters: $body"
	ok "admin through the proxy is $(jq -c .status.userInfo <<<"$body")"
	for proto in 1.1 2; do
		v=$(kcurl adminp /version "--http$proto" -o /dev/null -w '%{http_version}')
		[[ $v == "${proto%.0}" ]] || fail "proxy over HTTP/$proto answered with HTTP/$v"
	done
	ok "proxy speaks HTTP/1.1 and HTTP/2"
fi
echo "smoke: all checks passed"
