package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Handler serves the store read-only over HTTP, for nodes that Pull:
//
//	GET /v1/layers/<hex>/manifest   a layer's canonical manifest
//	GET /v1/objects/sha256/<hex>    an object's content
//	GET /v1/refs/<name>             "sha256:<hex>\n", the layer a ref points at
//
// Mount it under a prefix with http.StripPrefix. HEAD works too.
func (s *Store) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/layers/{hex}/manifest", func(w http.ResponseWriter, r *http.Request) {
		d, err := parseHexDigest(r.PathValue("hex"))
		if err != nil {
			http.Error(w, "malformed layer digest", http.StatusBadRequest)
			return
		}
		b, err := s.manifestBytes(LayerID(d))
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Write(b)
	})
	mux.HandleFunc("GET /v1/objects/sha256/{hex}", func(w http.ResponseWriter, r *http.Request) {
		d, err := parseHexDigest(r.PathValue("hex"))
		if err != nil {
			http.Error(w, "malformed object digest", http.StatusBadRequest)
			return
		}
		f, err := s.OpenObject(d)
		if err != nil {
			httpError(w, err)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("ETag", `"`+d.String()+`"`)
		http.ServeContent(w, r, "", fi.ModTime(), f)
	})
	mux.HandleFunc("GET /v1/refs/{name...}", func(w http.ResponseWriter, r *http.Request) {
		id, err := s.Ref(r.PathValue("name"))
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, id.String()+"\n")
	})
	return mux
}

// httpError answers with a status and a message safe to show a client;
// internal details (paths) stay out.
func httpError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, ErrBadRef):
		http.Error(w, "invalid ref name", http.StatusBadRequest)
	default:
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// PullOptions tune Pull.
type PullOptions struct {
	// Client makes the requests (default http.DefaultClient).
	Client *http.Client
}

// PullReport says what Pull fetched.
type PullReport struct {
	Layers  []LayerID `json:"layers"`  // layers fetched (the rest were present)
	Objects int       `json:"objects"` // objects fetched
	Bytes   int64     `json:"bytes"`   // their size
}

// Pull fetches a layer and its parents from a store served by Handler at
// baseURL, downloading only the manifests and objects this store lacks,
// verifying each against its digest, and materializes them. Set a ref or
// take a lease afterwards to keep the layer.
func (s *Store) Pull(ctx context.Context, baseURL string, id LayerID, opts PullOptions) (PullReport, error) {
	var rep PullReport
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return rep, err
	}
	defer unlock()
	p := puller{s: s, base: strings.TrimSuffix(baseURL, "/"), client: opts.Client, rep: &rep}
	if p.client == nil {
		p.client = http.DefaultClient
	}
	if err := p.layer(ctx, id, 0); err != nil {
		return rep, fmt.Errorf("pulling layer %s from %s: %w", id, baseURL, err)
	}
	return rep, nil
}

type puller struct {
	s      *Store
	base   string
	client *http.Client
	rep    *PullReport
}

func (p *puller) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("GET %s: %w", path, ErrNotFound)
		}
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp, nil
}

// manifest returns the layer's manifest, from this store or else fetched
// and checked; fetched holds the bytes to store once the objects are in.
func (p *puller) manifest(ctx context.Context, id LayerID) (m *Manifest, fetched []byte, err error) {
	m, err = p.s.Manifest(id)
	if !errors.Is(err, ErrNotFound) {
		return m, nil, err
	}
	resp, err := p.get(ctx, "/v1/layers/"+id.Hex()+"/manifest")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the manifest of layer %s: %w", id, err)
	}
	if m, err = checkManifest(id, b); err != nil {
		return nil, nil, err
	}
	return m, b, nil
}

// layer pulls parents first, then the layer's objects, then stores its
// manifest and materializes it: each step lands complete (objects are
// verified temp files linked into place, the manifest and the tree renamed
// into place), and a layer's manifest only after every object it uses.
func (p *puller) layer(ctx context.Context, id LayerID, depth int) error {
	if p.s.Has(id) {
		return nil
	}
	if depth > 128 {
		return fmt.Errorf("%w: layer parents nest deeper than 128", ErrBadManifest)
	}
	m, fetched, err := p.manifest(ctx, id)
	if err != nil {
		return err
	}
	for _, parent := range m.Parents {
		if err := p.layer(ctx, parent, depth+1); err != nil {
			return err
		}
	}
	// Fetch missing objects, each written with the metadata of the first
	// entry using it, in parallel; publish them in one batch.
	var need []*Entry
	seen := map[Digest]bool{}
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type == TypeFile && !seen[e.Digest] && !p.s.HasObject(e.Digest) {
			seen[e.Digest] = true
			need = append(need, e)
		}
	}
	pending := make([]pendingObject, len(need))
	defer func() { discard(pending) }()
	err = parallel(ctx, p.s.workers, len(need), func(ctx context.Context, i int) error {
		e := need[i]
		resp, err := p.get(ctx, "/v1/objects/sha256/"+e.Digest.Hex())
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		key := p.s.keyOf(e).withoutXattrs() // objects carry no xattrs
		po, err := p.s.writeTemp(ctx, resp.Body, e.Size, e.Digest, &key, false)
		if err != nil {
			return err
		}
		pending[i] = po
		return nil
	})
	if err != nil {
		return err
	}
	if err := p.s.publish(pending); err != nil {
		return err
	}
	pending = nil
	for _, e := range need {
		p.rep.Objects++
		p.rep.Bytes += e.Size
	}
	// The manifest last: a pull killed before this point leaves objects
	// (complete and verified, or temp files) but no layer naming missing ones.
	if fetched != nil {
		if _, err := p.s.putManifest(fetched); err != nil {
			return err
		}
	}
	if _, err := p.s.materialize(ctx, id, m); err != nil {
		return err
	}
	p.rep.Layers = append(p.rep.Layers, id)
	return nil
}
