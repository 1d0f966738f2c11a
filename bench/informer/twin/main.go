// Go twin of bench_informer's sync scenario: a client-go dynamic shared
// informer on the ConfigMaps of one namespace, timed like the C side: from
// before the kubeconfig is loaded to the informer's HasSynced, then the
// process's peak RSS (VmHWM). client-go has no sync notification and
// cache.WaitForCacheSync polls every 100 ms, so the twin polls HasSynced
// every millisecond instead (kcr's wait_for_sync wakes on the sync itself).
// managedFields are stripped by a transform, as kcr's informer does by
// default, so both caches hold the same data. client-go's defaults otherwise
// (v0.37: WatchListClient on, so the initial state comes from a streaming
// list; KUBE_FEATURE_WatchListClient=false makes it a LIST).
//
//	twin KUBECONFIG NAMESPACE   prints "seconds=<s> rss_mb=<MB> objects=<n>"
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/clientcmd"
)

func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(s.Text())[1], 64)
			return kb / 1024
		}
	}
	return -1
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: twin KUBECONFIG NAMESPACE")
		os.Exit(2)
	}
	start := time.Now()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, os.Args[2], nil)
	inf := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Informer()
	_ = inf.SetTransform(func(obj interface{}) (interface{}, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	deadline := start.Add(10 * time.Minute)
	for !inf.HasSynced() {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "not synced after 10 minutes")
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	n := len(inf.GetStore().ListKeys())
	fmt.Printf("seconds=%.3f rss_mb=%.1f objects=%d\n", secs, vmHWM(), n)
	cancel()
	f.Shutdown()
}
