package server

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/minisandbox/msb/internal/api"
)

var fuzzSeeds = []string{
	`{}`, `null`, `[]`, `{"command":"echo hi","env":["A=1"],"timeout_ns":5}`, `{"command":null}`,
	`{"limits":{"memory_bytes":-1},"labels":{"a":"b"}}`, `{"rows":[{"instance_id":"x"}]}`,
	`{"predictions":[{"instance_id":"a","model_name_or_path":"m","model_patch":null}],"run_id":"r"}`,
	`{"action_type":"bash","command":"ls","timeout":"1.5","check":"silent","expect":["x"]}`,
	`{"action_type":"bash_interrupt","n_retry":2.0}`, `{"command":["ls",1],"env":{"a":"b"},"shell":"true"}`,
	`{"session_type":"bash","startup_source":["/x"],"startup_timeout":1}`, `{"path":"/x","encoding":"latin-1","errors":"replace"}`,
	"{\"command\":\"\\u0000\"}", `{"a":{"b":[null]}}`, `{"command":"x"} {"command":"y"}`, "\xff\xfe",
}

// FuzzDecode: native request bodies decode or are refused as bad_request,
// never a panic or another error.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	targets := []func() any{
		func() any { return &api.CreateSandboxRequest{} }, func() any { return &api.ExecRequest{} },
		func() any { return &api.SessionRequest{} }, func() any { return &api.EvaluateRequest{} },
		func() any { return &api.JobRequest{} }, func() any { return &api.AddInstancesRequest{} },
		func() any { return &api.GymResetRequest{} }, func() any { return &api.GymStepRequest{} },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, mk := range targets {
			r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
			err := decode(r, mk(), false)
			if err == nil {
				continue
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.code != api.CodeBadRequest {
				t.Fatalf("%T: %q: %v", mk(), body, err)
			}
		}
	})
}

// FuzzRexBody: SWE-ReX bodies read with pydantic's rules never panic, and
// refusals are 422 detail lists with a loc under "body".
func FuzzRexBody(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		m, err := rexBody(r)
		if err != nil {
			checkValidation(t, err)
			return
		}
		for _, tag := range []string{"", "bash", "bash_interrupt"} {
			v := newValidator(m, tag)
			v.required("command").str("command", "")
			v.optFloat("timeout")
			v.bool("shell", false)
			v.int("n_retry", 3)
			v.strList("expect", nil)
			v.literal("check", "raise", "silent", "raise", "ignore")
			v.strOrList("command")
			v.optStrMap("env")
			v.optStr("cwd")
			if err := v.tag("session_type", "bash"); err != nil {
				checkValidation(t, err)
			}
			if err := v.err(); err != nil {
				checkValidation(t, err)
			}
		}
	})
}

func checkValidation(t *testing.T, err error) {
	t.Helper()
	var ve *validationError
	if !errors.As(err, &ve) || len(ve.detail) == 0 {
		t.Fatalf("not a validation error: %v", err)
	}
	for _, d := range ve.detail {
		if len(d.Loc) == 0 || d.Loc[0] != "body" || d.Type == "" || d.Msg == "" {
			t.Fatalf("detail %+v", d)
		}
	}
}
