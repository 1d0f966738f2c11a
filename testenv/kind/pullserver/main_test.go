package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// saved writes a docker-save-shaped image (classic layout) to root/name/tag.
func saved(t *testing.T, root, name, tag string, config, layer []byte) {
	t.Helper()
	dir := filepath.Join(root, name, tag)
	if err := os.MkdirAll(filepath.Join(dir, "l1"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(rel string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cfg.json", config)
	write("l1/layer.tar", layer)
	write("manifest.json", []byte(`[{"Config":"cfg.json","RepoTags":["x:1"],"Layers":["l1/layer.tar"]}]`))
}

func get(t *testing.T, srv *httptest.Server, method, path string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestPullsAnImageAsContainerdDoes(t *testing.T) {
	root := t.TempDir()
	config := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}`)
	layer := []byte(strings.Repeat("layer bytes ", 100))
	saved(t, root, "library/nginx", "latest", config, layer)
	srv := httptest.NewServer(&server{root: root, images: map[string]*image{}})
	defer srv.Close()

	if resp, _ := get(t, srv, "GET", "/v2/"); resp.StatusCode != 200 {
		t.Fatalf("/v2/: %d", resp.StatusCode)
	}
	resp, body := get(t, srv, "GET", "/v2/library/nginx/manifests/latest")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ociManifest {
		t.Fatalf("manifest: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != digestOf(body) {
		t.Fatalf("Docker-Content-Digest %s, manifest hashes to %s", got, digestOf(body))
	}
	var m struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Config.Digest != digestOf(config) || m.Config.Size != int64(len(config)) || m.Config.MediaType != ociConfig {
		t.Fatalf("config descriptor %+v", m.Config)
	}
	if len(m.Layers) != 1 || m.Layers[0].Digest != digestOf(layer) || m.Layers[0].MediaType != ociLayer {
		t.Fatalf("layer descriptors %+v", m.Layers)
	}
	// by digest, as containerd asks after resolving the tag
	if r2, b2 := get(t, srv, "GET", "/v2/library/nginx/manifests/"+digestOf(body)); r2.StatusCode != 200 || string(b2) != string(body) {
		t.Fatalf("manifest by digest: %d", r2.StatusCode)
	}
	if r, b := get(t, srv, "GET", "/v2/library/nginx/blobs/"+digestOf(layer)); r.StatusCode != 200 || string(b) != string(layer) {
		t.Fatalf("layer blob: %d, %d bytes", r.StatusCode, len(b))
	}
	if r, b := get(t, srv, "HEAD", "/v2/library/nginx/blobs/"+digestOf(config)); r.StatusCode != 200 || len(b) != 0 ||
		r.ContentLength != int64(len(config)) {
		t.Fatalf("HEAD config: %d, length %d", r.StatusCode, r.ContentLength)
	}
}

func TestRefusesWhatItDoesNotServe(t *testing.T) {
	root := t.TempDir()
	saved(t, root, "library/nginx", "latest", []byte(`{}`), []byte("x"))
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("no"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&server{root: root, images: map[string]*image{}})
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v2/library/nginx/manifests/1.0", 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/library/other/manifests/latest", 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/library/nginx/blobs/sha256:" + strings.Repeat("0", 64), 404, "BLOB_UNKNOWN"},
		{"GET", "/v2/library/nginx/blobs/latest", 400, "DIGEST_INVALID"},
		{"GET", "/v2/../secret/manifests/latest", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/library/nginx/manifests/..%2f..%2fsecret", 400, "DIGEST_INVALID"},
		{"PUT", "/v2/library/nginx/manifests/latest", 405, "UNSUPPORTED"},
		{"POST", "/v2/library/nginx/blobs/uploads/", 405, "UNSUPPORTED"},
		{"GET", "/v2/_catalog", 404, "NAME_UNKNOWN"},
	} {
		resp, body := get(t, srv, c.method, c.path)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.code) {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, resp.StatusCode, body, c.status, c.code)
		}
	}
}

func TestServesAnImageAddedWhileRunning(t *testing.T) {
	root := t.TempDir()
	srv := httptest.NewServer(&server{root: root, images: map[string]*image{}})
	defer srv.Close()
	if resp, _ := get(t, srv, "GET", "/v2/library/app/manifests/v1"); resp.StatusCode != 404 {
		t.Fatalf("before: %d", resp.StatusCode)
	}
	saved(t, root, "library/app", "v1", []byte(`{"os":"linux"}`), []byte("a"))
	if resp, body := get(t, srv, "GET", "/v2/library/app/manifests/v1"); resp.StatusCode != 200 {
		t.Fatalf("after: %d %s", resp.StatusCode, body)
	}
}

func TestABrokenManifestIsNotServed(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "library", "bad", "v1")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`[{"Config":"../../../../etc/passwd","Layers":[]}]`), 0o644)
	srv := httptest.NewServer(&server{root: root, images: map[string]*image{}})
	defer srv.Close()
	if resp, body := get(t, srv, "GET", "/v2/library/bad/manifests/v1"); resp.StatusCode != 404 {
		t.Fatalf("a manifest naming a file outside its folder: %d %s", resp.StatusCode, body)
	}
}
