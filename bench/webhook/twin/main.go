// The controller-runtime v0.25.3 twin of bench_webhook_server: a webhook
// server (pkg/webhook, its certwatcher on CERT_DIR) with the same two
// handlers, written as a controller-runtime user writes them on
// unstructured objects: /mutate defaults spec.replicas to 1 (a patch
// response computed by controller-runtime), /validate denies replicas > 10.
//
//	twin CERT_DIR PORT
//
// Prints "ready" once serving; stops on SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func decode(req admission.Request) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	return u, u.UnmarshalJSON(req.Object.Raw)
}

func mutate(_ context.Context, req admission.Request) admission.Response {
	u, err := decode(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); !found {
		if err := unstructured.SetNestedField(u.Object, int64(1), "spec", "replicas"); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	out, err := json.Marshal(u.Object)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

func validate(_ context.Context, req admission.Request) admission.Response {
	u, err := decode(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if r > 10 {
		return admission.Denied("spec.replicas must be at most 10")
	}
	return admission.Allowed("")
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: twin CERT_DIR PORT")
		os.Exit(2)
	}
	port, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: os.Args[1]})
	srv.Register("/mutate", &webhook.Admission{Handler: admission.HandlerFunc(mutate)})
	srv.Register("/validate", &webhook.Admission{Handler: admission.HandlerFunc(validate)})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		for srv.StartedChecker()(nil) != nil {
		}
		fmt.Println("ready")
	}()
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
