package main

import (
	"net/http"
	"strconv"
	"time"
)

// controlHandler serves the fault control API (plain HTTP on loopback).
// Every POST answers with the resulting state, as GET /status does.
//
//	POST /cut[?reset=1]                 close every client connection (RST with reset=1)
//	POST /stall[?seconds=N]             stall all traffic N seconds (0 or absent: until /unstall)
//	POST /unstall
//	POST /delay?ms=N                    delay each chunk of bytes by N ms (0 clears)
//	POST /refuse?seconds=N              refuse new connections for N seconds
//	POST /fail?code=C&count=N[&retry_after=S][&match=SUBSTR]
//	                                    answer the next N requests (path containing SUBSTR) with C
//	POST /clear                         end every fault (stall, delay, refuse, fail)
//	GET  /counts                        request counters;  POST /counts/reset zeroes them
//	GET  /status                        current faults and open connections
func (p *proxy) controlHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /cut", func(w http.ResponseWriter, r *http.Request) {
		n := p.cut(r.URL.Query().Get("reset") == "1")
		writeJSON(w, 200, map[string]any{"cut": n})
	})
	m.HandleFunc("POST /stall", func(w http.ResponseWriter, r *http.Request) {
		secs, ok := num(w, r, "seconds", 0)
		if ok {
			p.stall(time.Duration(secs) * time.Second)
			p.writeState(w)
		}
	})
	m.HandleFunc("POST /unstall", func(w http.ResponseWriter, r *http.Request) {
		p.unstall()
		p.writeState(w)
	})
	m.HandleFunc("POST /delay", func(w http.ResponseWriter, r *http.Request) {
		ms, ok := num(w, r, "ms", -1)
		if ok {
			p.mu.Lock()
			p.delay = time.Duration(ms) * time.Millisecond
			p.mu.Unlock()
			p.writeState(w)
		}
	})
	m.HandleFunc("POST /refuse", func(w http.ResponseWriter, r *http.Request) {
		secs, ok := num(w, r, "seconds", -1)
		if ok && secs > 0 {
			p.refuse(time.Duration(secs) * time.Second)
			p.writeState(w)
		} else if ok {
			http.Error(w, "seconds must be > 0", 400)
		}
	})
	m.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		code, ok1 := num(w, r, "code", -1)
		count, ok2 := num(w, r, "count", 1)
		retry, ok3 := num(w, r, "retry_after", 1)
		if !ok1 || !ok2 || !ok3 {
			return
		}
		if code < 400 || code > 599 {
			http.Error(w, "code must be 4xx or 5xx", 400)
			return
		}
		p.mu.Lock()
		p.fail = failRule{Code: code, Left: count, RetryAfter: retry, Match: r.URL.Query().Get("match")}
		p.mu.Unlock()
		p.writeState(w)
	})
	m.HandleFunc("POST /clear", func(w http.ResponseWriter, r *http.Request) {
		p.unstall()
		p.mu.Lock()
		p.delay, p.fail = 0, failRule{}
		refusing := p.ln == nil
		p.mu.Unlock()
		if refusing {
			p.relisten()
		}
		p.writeState(w)
	})
	m.HandleFunc("GET /counts", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		writeJSON(w, 200, p.stats)
	})
	m.HandleFunc("POST /counts/reset", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.stats = newStats()
		p.mu.Unlock()
		writeJSON(w, 200, map[string]any{"reset": true})
	})
	m.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { p.writeState(w) })
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	return m
}

func (p *proxy) writeState(w http.ResponseWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	writeJSON(w, 200, map[string]any{
		"addr":        p.addr,
		"connections": len(p.conns),
		"stalled":     p.stallCh != nil,
		"delayMs":     p.delay.Milliseconds(),
		"refusing":    p.ln == nil,
		"fail":        p.fail,
	})
}

// num reads an integer query parameter; def < 0 makes it required.
func num(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		if def < 0 {
			http.Error(w, "missing parameter "+name, 400)
			return 0, false
		}
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		http.Error(w, "bad parameter "+name, 400)
		return 0, false
	}
	return n, true
}
