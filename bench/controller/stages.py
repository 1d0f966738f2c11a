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
  DeltaFIFO push  reflector on_event: transform, DeltaFIFO update
  pop + store     kcr_delta_fifo_pop: the pop and the informer's processing
                  of the delta (indexer update, queueing for the handlers)
  handler + workqueue  inline delivery: controller routing, workqueue add
                  (on the informer's thread; the first list's on the
                  reflector's, whichever comes first, which is why these
                  rows use functions, not threads)
  worker: queue   the worker minus the reconcile: workqueue get (waits
                  included), done
  reconcile       kcr__reconcile_key: the context, the cache read, the
                  user's reconcile (bench_controller's, which reads the
                  object from the cache)
"""
import re
import sys



def load(path):
    """Inclusive cost per function name (file:function, first section only)."""
    costs, section = {}, False
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.rstrip().endswith("file:function"):
            section = True
            continue
        if not section:
            continue
        if line.startswith("-----") and costs:
            break
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)  (\S.*?)(?: \[.*\])?$", line)
        if not m or m.group(2).startswith("=>"):
            continue
        fn = m.group(2)
        fn = fn[fn.rfind(":") + 1:] if ":" in fn else fn
        file = m.group(2)[: -len(fn) - 1]
        key = (file.split("/")[-1], fn)
        costs[key] = max(costs.get(key, 0), int(m.group(1).replace(",", "")))
    return costs


def get(costs, file, fn):
    return costs.get((file, fn), 0)


def stages(c, total):
    reader = get(c, "json_reader.c", "kcr__jreader_feed")
    callbacks = get(c, "framer.c", "on_event")
    on_event = get(c, "reflector.c", "on_event")
    decode = get(c, "decode.c", "kcr__watch_decoder_feed") + get(c, "decode.c", "kcr__list_decoder_feed")
    sinks = get(c, "http_verbs.c", "watch_sink") + get(c, "http_verbs.c", "list_sink")
    transport = get(c, "http_transport.c", "kcr__transport_do") - sinks
    inline = get(c, "informer_handlers.c", "kcr__informer_deliver_inline")
    pop = get(c, "delta_fifo.c", "kcr_delta_fifo_pop")
    reconcile = get(c, "reconcile.c", "kcr__reconcile_key")
    worker = get(c, "workers.c", "worker_main")
    rows = [
        ("transport (libcurl, HTTP/1.1 chunks)", transport),
        ("JSON reader (kcr's lexing)", reader - callbacks),
        ("object build (framer, decoder, builder)", decode - (reader - callbacks) - on_event),
        ("DeltaFIFO push (reflector on_event)", on_event),
        ("DeltaFIFO pop + store update (kcr_delta_fifo_pop)", pop),
        ("handler + workqueue add (inline routing)", inline),
        ("worker: workqueue get/done, waits", worker - reconcile),
        ("reconcile (kcr__reconcile_key + the bench's reconcile)", reconcile),
    ]
    rows.append(("other (main thread, start-up, the rest)", total - sum(v for _, v in rows)))
    rows.append(("total", total))
    return rows


def total_of(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)  PROGRAM TOTALS", line)
        if m:
            return int(m.group(1).replace(",", ""))
    sys.exit("stages.py: no PROGRAM TOTALS in %s" % path)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: stages.py EVENTS_ANN LIST_ANN EVENTS")
    ev, ls, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    print("| stage | events run, inclusive Ir | per event (events - list only) / %d | share |" % n)
    print("| --- | ---: | ---: | ---: |")
    se, sl = stages(ev, total_of(sys.argv[1])), stages(ls, total_of(sys.argv[2]))
    per_total = (se[-1][1] - sl[-1][1]) / n
    for (name, e), (_, l) in zip(se, sl):
        per = (e - l) / n
        print("| %s | %s | %s | %.1f %% |" % (name, format(e, ","), format(round(per), ","),
                                            100 * per / per_total))


main()
