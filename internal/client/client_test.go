package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

// TestErrorAnswers: an error answer's code is the body's, or, for a body
// that is not the API's (a proxy's), its status's broadest code.
func TestErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   api.ErrorCode
	}{
		{http.StatusConflict, `{"error":{"code":"session_ended","message":"m"}}`, api.CodeSessionEnded},
		{http.StatusConflict, `{"error":{"code":"a_code_from_a_newer_daemon","message":"m"}}`, "a_code_from_a_newer_daemon"},
		{http.StatusNotFound, "<html>not here</html>", api.CodeNotFound},
		{http.StatusBadRequest, "", api.CodeBadRequest},
		{http.StatusTooManyRequests, "slow down", api.CodeQuotaExceeded},
		{http.StatusBadGateway, "<html>bad gateway</html>", api.CodeInternal},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		c, err := New(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Sandbox(context.Background(), "sb1")
		var e *Error
		if !errors.As(err, &e) || e.Status != tc.status || e.Info.Code != tc.code {
			t.Errorf("%d %q: %v, want an *Error with code %s", tc.status, tc.body, err, tc.code)
		}
		c.Close()
		srv.Close()
	}
}
