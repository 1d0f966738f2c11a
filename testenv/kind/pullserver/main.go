// Command pullserver is a read-only image registry for a kind cluster that
// can pull nothing from the Internet: it serves, over the registry HTTP API
// v2 (the GET and HEAD requests containerd makes to pull), images that
// `docker save` wrote into a folder, one folder per name and tag:
//
//	ROOT/<name>/<tag>/manifest.json, its config and its layer files
//
// The manifest a client gets is an OCI image manifest built from
// manifest.json (config and layers named by the SHA-256 of their files), so
// both of docker save's layouts (the classic one and the OCI one of newer
// engines, which also writes manifest.json) serve alike. A folder is read
// again when its manifest.json changes, so images added while the server
// runs are served at once.
//
// It replaces building a full registry (which costs minutes of a cold CI run)
// for the one thing the kind test needs: Pods whose image must be pulled.
// Anything else — pushes, catalogs, tag lists — is answered 405 or 404.
//
// Usage: pullserver -root DIR [-addr :5000]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

const (
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayer    = "application/vnd.oci.image.layer.v1.tar"
)

var (
	// The registry API's grammar for names, tags and the digests served.
	namePattern   = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	tagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// blob is one piece of content a digest names: a file, or the manifest's bytes.
type blob struct {
	mediaType string
	path      string
	data      []byte
	size      int64
}

// image is one ROOT/<name>/<tag> folder as last read.
type image struct {
	stamp    time.Time // manifest.json's modification time when read
	manifest string    // the manifest's digest
	blobs    map[string]blob
}

type server struct {
	root   string
	mu     sync.Mutex
	images map[string]*image // by "<name>:<tag>"
}

// loadImage reads (or re-reads, when manifest.json changed) ROOT/name/tag.
func (s *server) loadImage(name, tag string) (*image, error) {
	dir := filepath.Join(s.root, filepath.FromSlash(name), tag)
	st, err := os.Stat(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	key := name + ":" + tag
	s.mu.Lock()
	cached := s.images[key]
	s.mu.Unlock()
	if cached != nil && cached.stamp.Equal(st.ModTime()) {
		return cached, nil
	}
	img, err := readSaved(dir)
	if err != nil {
		return nil, err
	}
	img.stamp = st.ModTime()
	s.mu.Lock()
	s.images[key] = img
	s.mu.Unlock()
	return img, nil
}

// readSaved turns docker save's manifest.json in dir into an OCI manifest and
// the blobs it names.
func readSaved(dir string) (*image, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var saved []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	if len(saved) != 1 {
		return nil, fmt.Errorf("%s/manifest.json holds %d images, want 1", dir, len(saved))
	}
	img := &image{blobs: map[string]blob{}}
	file := func(rel, mediaType string) (descriptor, error) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return descriptor{}, fmt.Errorf("%s/manifest.json names %q, outside its folder", dir, rel)
		}
		f, err := os.Open(p)
		if err != nil {
			return descriptor{}, err
		}
		defer f.Close()
		h := sha256.New()
		var head [2]byte
		n, _ := io.ReadFull(f, head[:])
		h.Write(head[:n])
		rest, err := io.Copy(h, f)
		if err != nil {
			return descriptor{}, err
		}
		if mediaType == ociLayer && n == 2 && head[0] == 0x1f && head[1] == 0x8b {
			mediaType += "+gzip"
		}
		d := descriptor{mediaType, "sha256:" + hex.EncodeToString(h.Sum(nil)), int64(n) + rest}
		img.blobs[d.Digest] = blob{mediaType: "application/octet-stream", path: p, size: d.Size}
		return d, nil
	}
	config, err := file(saved[0].Config, ociConfig)
	if err != nil {
		return nil, err
	}
	layers := make([]descriptor, 0, len(saved[0].Layers))
	for _, l := range saved[0].Layers {
		d, err := file(l, ociLayer)
		if err != nil {
			return nil, err
		}
		layers = append(layers, d)
	}
	manifest, err := json.Marshal(struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Config        descriptor   `json:"config"`
		Layers        []descriptor `json:"layers"`
	}{2, ociManifest, config, layers})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(manifest)
	img.manifest = "sha256:" + hex.EncodeToString(sum[:])
	img.blobs[img.manifest] = blob{mediaType: ociManifest, data: manifest, size: int64(len(manifest))}
	return img, nil
}

// images returns every image of name (all its tag folders).
func (s *server) imagesOf(name string) []*image {
	entries, _ := os.ReadDir(filepath.Join(s.root, filepath.FromSlash(name)))
	var out []*image
	for _, e := range entries {
		if !e.IsDir() || !tagPattern.MatchString(e.Name()) {
			continue
		}
		if img, err := s.loadImage(name, e.Name()); err == nil {
			out = append(out, img)
		} else if !errors.Is(err, os.ErrNotExist) {
			log.Printf("%s:%s: %v", name, e.Name(), err)
		}
	}
	return out
}

// apiError answers in the registry API's error format.
func apiError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]string{{"code": code, "message": message}},
	})
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		apiError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry serves pulls only (GET, HEAD)")
		return
	}
	path := r.URL.Path
	if path == "/v2/" || path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
		return
	}
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "not a registry API path: "+path)
		return
	}
	var name, kind, ref string
	for _, k := range []string{"/manifests/", "/blobs/"} {
		if i := strings.LastIndex(rest, k); i > 0 {
			name, kind, ref = rest[:i], strings.Trim(k, "/"), rest[i+len(k):]
			break
		}
	}
	if kind == "" || !namePattern.MatchString(name) {
		apiError(w, http.StatusNotFound, "NAME_UNKNOWN", "no repository in path "+path)
		return
	}
	var found *blob
	var digest string
	switch {
	case digestPattern.MatchString(ref):
		digest = ref
		for _, img := range s.imagesOf(name) {
			if b, ok := img.blobs[ref]; ok && (kind == "blobs") == (ref != img.manifest) {
				found = &b
				break
			}
		}
	case kind == "manifests" && tagPattern.MatchString(ref):
		if img, err := s.loadImage(name, ref); err == nil {
			digest = img.manifest
			b := img.blobs[digest]
			found = &b
		} else if !errors.Is(err, os.ErrNotExist) {
			log.Printf("%s:%s: %v", name, ref, err)
		}
	default:
		apiError(w, http.StatusBadRequest, "DIGEST_INVALID", "not a tag or sha256 digest: "+ref)
		return
	}
	if found == nil {
		code := map[string]string{"manifests": "MANIFEST_UNKNOWN", "blobs": "BLOB_UNKNOWN"}[kind]
		apiError(w, http.StatusNotFound, code, fmt.Sprintf("%s %s:%s is not here", kind, name, ref))
		return
	}
	w.Header().Set("Content-Type", found.mediaType)
	w.Header().Set("Docker-Content-Digest", digest)
	if found.data != nil {
		w.Header().Set("Content-Length", fmt.Sprint(found.size))
		if r.Method == http.MethodGet {
			w.Write(found.data)
		}
		return
	}
	f, err := os.Open(found.path)
	if err != nil {
		apiError(w, http.StatusNotFound, "BLOB_UNKNOWN", err.Error())
		return
	}
	defer f.Close()
	http.ServeContent(w, r, "", time.Time{}, f) // Range requests too (resumed pulls)
}

func main() {
	root := flag.String("root", "", "folder of docker-save images: ROOT/<name>/<tag>/manifest.json")
	addr := flag.String("addr", ":5000", "listen address")
	flag.Parse()
	if *root == "" {
		log.Fatal("pullserver: -root is required")
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Addr:              *addr,
		Handler:           &server{root: abs, images: map[string]*image{}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("pullserver: serving %s on %s", abs, *addr)
	log.Fatal(srv.ListenAndServe())
}
