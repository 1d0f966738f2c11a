#!/usr/bin/env python3
"""bench/webhook/stages.py: kcr's webhook server's cost per request, by stage,
by library and by function, from two callgrind runs of bench_webhook_server
(see ./instructions): MANY_* with many requests, FEW_* with two per
connection; *_ANN is `callgrind_annotate --auto=no --inclusive=yes
--threshold=100`, *_SELF the same without --inclusive. Each figure is
(many run - few run) / REQUESTS, in instructions.

Usage: stages.py MANY_ANN FEW_ANN MANY_SELF FEW_SELF REQUESTS

Stages are inclusive costs of kcr's functions along a request's path, each
instruction counted once:
  TLS in          SSL_read: record decryption (and its reads)
  HTTP in         the rest of the loop's work until kcr has the request:
                  epoll, bufferevents, evhttp's parsing of the request line
                  and headers, kcr__wh_on_request up to the hand-over
  decode          kcr__wh_admission_decode: the review parsed into objects
  handler         the bench's mutate / validate (with kcr_admission_edit)
  patch           the edited object frozen, the JSON Patch diff, base64
  answer JSON     write_answer: the AdmissionReview answer
  handler frees   the rest of kcr__wh_admission_run: frees, error state
  HTTP out        kcr__wh_reply without SSL_write: evhttp's status line and
                  headers, the buffers
  TLS out         SSL_write: record encryption and the write
  hand-over       the workers' queue and the done list (mutexes, condition
                  variable, event_active), the job's deadline timer, the
                  answer's bookkeeping and metrics; on the loop, run_on_loop's
                  budget check
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from callgrind import load  # noqa: E402 (bench/callgrind.py)


def per_request(many, few, n):
    return {k: (many.get(k, 0) - few.get(k, 0)) / n for k in set(many) | set(few)}


def fn_cost(c, *names):
    """The inclusive cost of the named functions (for each name, its largest
    entry: parts of a function inlined from a header are listed apart)."""
    return sum(max([v for (_, fn), v in c.items() if fn == name] or [0]) for name in names)


def library(lib):
    if lib.startswith("bench_webhook_server"):
        return "kcr (and the bench's handlers)"
    for prefix, name in (("libcrypto", "OpenSSL libcrypto"), ("libssl", "OpenSSL libssl"),
                         ("libevent", "libevent"), ("libyajl", "yajl"), ("libc.", "libc"),
                         ("ld-linux", "ld.so")):
        if lib.startswith(prefix):
            return name
    return "other"


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    n = float(sys.argv[5])
    inc = per_request(load(sys.argv[1])[0], load(sys.argv[2])[0], n)
    (many, libs), (few, few_libs) = load(sys.argv[3]), load(sys.argv[4])
    libs.update({k: v for k, v in few_libs.items() if k not in libs})
    self_ = per_request(many, few, n)
    total = sum(self_.values())

    tls_in = fn_cost(inc, "SSL_read")
    tls_out = fn_cost(inc, "SSL_write")
    decode = fn_cost(inc, "kcr__wh_admission_decode")
    handler = fn_cost(inc, "mutate", "validate")
    patch = fn_cost(inc, "kcr_object_edit_snapshot", "kcr_object_json_patch_diff",
                    "EVP_EncodeBlock")
    answer = fn_cost(inc, "write_answer")
    run = fn_cost(inc, "kcr__wh_admission_run")
    reply = fn_cost(inc, "kcr__wh_reply")
    # workers: the queue (submit, worker_main around the run), the done list
    # and the answer's bookkeeping; on the loop: run_on_loop around the run
    handed = fn_cost(inc, "worker_main", "kcr__wh_pool_submit", "kcr__wh_pool_done_cb") - run - reply
    rows = [
        ("TLS in (SSL_read)", tls_in),
        ("decode (kcr__wh_admission_decode)", decode),
        ("handler (mutate / validate, kcr_admission_edit)", handler),
        ("patch (snapshot, JSON Patch diff, base64)", patch),
        ("answer JSON (write_answer)", answer),
        ("handler frees, error state (rest of kcr__wh_admission_run)",
         run - decode - handler - patch - answer),
        ("HTTP out (kcr__wh_reply but SSL_write: evhttp's head, buffers)", reply - tls_out),
        ("TLS out (SSL_write)", tls_out),
        ("hand-over, job, metrics (queue, done list, answer bookkeeping)", handed),
    ]
    rows.insert(1, ("HTTP in (epoll, bufferevents, evhttp parsing, kcr__wh_on_request)",
                    total - sum(v for _, v in rows)))
    print("| stage | instructions per request |")
    print("| --- | ---: |")
    for name, v in rows:
        print(f"| {name} | {v:,.0f} |")
    print(f"| total | {total:,.0f} |")

    by_lib = {}
    for k, v in self_.items():
        name = library(libs.get(k, "?"))
        by_lib[name] = by_lib.get(name, 0) + v
    print("\n| library (self cost) | instructions per request |")
    print("| --- | ---: |")
    for name, v in sorted(by_lib.items(), key=lambda x: -x[1]):
        print(f"| {name} | {v:,.0f} |")

    print("\n| function (self cost, top 20) | library | instructions per request |")
    print("| --- | --- | ---: |")
    for k, v in sorted(self_.items(), key=lambda x: -x[1])[:20]:
        print(f"| {k[1]} | {library(libs.get(k, '?'))} | {v:,.0f} |")


main()
