#!/usr/bin/env python3
"""bench/controller/stages.py: kcr's cost per watch event, by stage, from two
callgrind runs of `bench_controller replay` on the same list (see
./instructions): EVENTS_ANN and LIST_ANN are `callgrind_annotate
--inclusive=yes --threshold=100` of the run with the events and of the
list-only run. Prints a markdown table: each stage's inclusive instructions
in the events run and (events run - list-only run) / EVENTS per event.

Usage: stages.py EVENTS_ANN LIST_ANN EVENTS

The stages are differences of inclusive costs along the watch path, so each
function is counted once:
  transport       libcurl (HTTP/1.1, chunked decoding, recv) up to the sink
  JSON reader     kcr__jreader_feed minus the framer's callback (the lexing
                  and grammar of object/json_reader.c)
  object build    the framer's callbacks, the decoder and the object builder,
                  minus what the decoder hands on (reflector on_event)
  reflector on_event  the transform and the informer's sink, without the
                  rows below
  DeltaFIFO       kcr__delta_fifo_apply_or_queue (an event finding the fifo
                  empty is applied at once on the reflector's thread) and
                  kcr_delta_fifo_pop (the processing thread, behind a
                  backlog), without the cache update
  cache update    kcr__informer_process on either thread: indexer update,
                  queueing for the handlers
  handler + workqueue  inline delivery: controller routing, workqueue add,
                  on whichever thread applied the change (these rows use
                  functions, not threads)
  worker: queue   the worker minus the reconcile: workqueue get (waits
                  included), done
  reconcile       kcr__reconcile_key: the context, the cache read, the
                  user's reconcile (bench_controller's, which reads the
                  object from the cache)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from callgrind import load, total_of  # noqa: E402 (bench/callgrind.py)


def get(costs, file, fn):
    return costs.get((file, fn), 0)


def stages(c, total):
    reader = get(c, "json_reader.c", "kcr__jreader_feed")
    callbacks = get(c, "framer.c", "on_event")
    on_event = get(c, "reflector.c", "on_event")
    decode = get(c, "decode.c", "kcr__watch_decoder_feed") + get(c, "decode.c", "kcr__list_decoder_feed")
    sinks = get(c, "http_verbs.c", "watch_sink") + get(c, "http_verbs.c", "list_sink")
    transport = get(c, "http_transport.c", "kcr__transport_do") - sinks
    apply_or_queue = get(c, "delta_fifo.c", "kcr__delta_fifo_apply_or_queue")
    pop = get(c, "delta_fifo.c", "kcr_delta_fifo_pop")
    process = get(c, "informer.c", "kcr__informer_process")
    after = get(c, "informer.c", "kcr__informer_after_apply")
    # after_apply runs on both threads: the processing thread's share is
    # what its loop spends beyond the pops
    after_on_reflector = after - (get(c, "informer.c", "process_main") - pop)
    inline = get(c, "informer_handlers.c", "kcr__informer_deliver_inline")
    reconcile = get(c, "reconcile.c", "kcr__reconcile_key")
    worker = get(c, "workers.c", "worker_main")
    rows = [
        ("transport (libcurl, HTTP/1.1 chunks)", transport),
        ("JSON reader (kcr's lexing)", reader - callbacks),
        ("object build (framer, decoder, builder)", decode - (reader - callbacks) - on_event),
        ("reflector on_event: transform, sink", on_event - apply_or_queue - after_on_reflector),
        ("DeltaFIFO: apply at once or queue, pop", apply_or_queue + pop - process),
        ("cache update (kcr__informer_process, either thread)", process),
        ("handler + workqueue add (inline routing, either thread)", inline),
        ("worker: workqueue get/done, waits", worker - reconcile),
        ("reconcile (kcr__reconcile_key + the bench's reconcile)", reconcile),
    ]
    rows.append(("other (main thread, start-up, the rest)", total - sum(v for _, v in rows)))
    rows.append(("total", total))
    return rows


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: stages.py EVENTS_ANN LIST_ANN EVENTS")
    ev, ls, n = load(sys.argv[1])[0], load(sys.argv[2])[0], int(sys.argv[3])
    print("| stage | events run, inclusive Ir | per event (events - list only) / %d | share |" % n)
    print("| --- | ---: | ---: | ---: |")
    se, sl = stages(ev, total_of(sys.argv[1])), stages(ls, total_of(sys.argv[2]))
    per_total = (se[-1][1] - sl[-1][1]) / n
    for (name, e), (_, l) in zip(se, sl):
        per = (e - l) / n
        print("| %s | %s | %s | %.1f %% |" % (name, format(e, ","), format(round(per), ","),
                                            100 * per / per_total))


main()
