// Go twin of bench_store's memory scenario: the same List file decoded into
// client-go unstructured objects held in a cache.Indexer with the namespace
// index, measured as heap bytes per object (runtime.ReadMemStats HeapAlloc
// after GC, before and after filling).
//
//	go run . DIR KIND STRIP   prints "clientgo=<B>"
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

func heap() uint64 {
	var m runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: storebench DIR KIND STRIP")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1] + "/" + os.Args[2] + ".json")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strip, _ := strconv.ParseBool(os.Args[3])

	before := heap()
	// The decoder a dynamic informer uses for unstructured lists.
	list := &unstructured.UnstructuredList{}
	if err := list.UnmarshalJSON(data); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	n := len(list.Items)
	for i := range list.Items {
		u := &unstructured.Unstructured{Object: list.Items[i].Object}
		if strip {
			u.SetManagedFields(nil)
		}
		if err := indexer.Add(u); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	list = nil
	after := heap()
	runtime.KeepAlive(data)
	if len(indexer.ListKeys()) != n {
		fmt.Fprintln(os.Stderr, "indexer lost objects")
		os.Exit(1)
	}
	fmt.Printf("clientgo=%d\n", (after-before)/uint64(n))
	runtime.KeepAlive(indexer)
}
