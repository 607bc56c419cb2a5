package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// A signed file URL (sandbox.download_url, upload_url) is GET or POST
// /files whose query carries a signature of the path, the operation (read
// or write), the user and, when it has one, its expiry, made with the
// sandbox's access token:
//
//	v1_ + base64 (unpadded) of sha256("path:operation:user:token[:expiration]")
//
// It stands in for the X-Access-Token header, so a browser or curl can use
// the URL. On E2B the URL's host names the sandbox; with one listener for
// every sandbox (E2B_SANDBOX_URL) it names none, and the front end finds
// the sandbox whose token makes the signature.

// signatureOf is the signature of a /files URL for an access token.
func signatureOf(p, operation, user, token, expiration string) string {
	raw := p + ":" + operation + ":" + user + ":" + token
	if expiration != "" {
		raw += ":" + expiration
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// signedBy reports whether r's signature was made with token.
func signedBy(r *http.Request, token string) bool {
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	want := signatureOf(q.Get("path"), op, q.Get("username"), token, q.Get("signature_expiration"))
	return subtle.ConstantTimeCompare([]byte(q.Get("signature")), []byte(want)) == 1
}

// signed reports whether r is a signed file URL.
func signed(r *http.Request) bool {
	return r.URL.Path == "/files" && (r.Method == http.MethodGet || r.Method == http.MethodPost) &&
		r.URL.Query().Get("signature") != ""
}

// expired answers the 401 of a signed URL past its expiry (E2B's
// message), and reports whether it did.
func expired(w http.ResponseWriter, r *http.Request) bool {
	s := r.URL.Query().Get("signature_expiration")
	if s == "" {
		return false
	}
	at, err := strconv.ParseInt(s, 10, 64)
	if err == nil && time.Now().Unix() <= at {
		return false
	}
	writeJSON(w, http.StatusUnauthorized, map[string]any{"code": http.StatusUnauthorized, "message": "signature is already expired"})
	return true
}

// signedFiles serves a signed file URL that names no sandbox: the sandbox
// is the running one whose access token made the signature.
func (f *Front) signedFiles(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var found *box
		f.mu.Lock()
		for _, b := range f.boxes {
			if signedBy(r, b.token) {
				found = b
				break
			}
		}
		f.mu.Unlock()
		if found != nil {
			found = f.running(found.id)
		}
		if found == nil {
			apiError(w, api.CodeUnauthorized, "the URL's signature is not one of a running sandbox's")
			return
		}
		if expired(w, r) {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), boxKey{}, found)))
	})
}
