package e2b

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestE2BTemplateBuild: a template built with the SDK's Template builder
// (COPY, ENV, WORKDIR, RUN) starts sandboxes with its files and config,
// a template built on it keeps both, and what msb cannot build fails
// with a BuildException that says why.
func TestE2BTemplateBuild(t *testing.T) {
	out := sdkScript(t, "sdk_template.py")
	t.Logf("%s", out)
	var got struct {
		Logs          []string `json:"logs"`
		Exists        bool     `json:"exists"`
		Run           string   `json:"run"`
		Child         string   `json:"child"`
		UpdateNetwork string   `json:"update_network"`
		MissingImage  string   `json:"missing_image"`
		FailingRun    string   `json:"failing_run"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	want := "/opt/work\nhi from RUN in /opt/work\nhello from a COPY\ncopied script\nhi run\n"
	if got.Run != want {
		t.Errorf("a sandbox of the template printed %q, want %q", got.Run, want)
	}
	if got.Child != "hi from RUN in /opt/work\nhi\n" {
		t.Errorf("a sandbox of the template built on it printed %q", got.Child)
	}
	if !got.Exists {
		t.Error("Template.exists said no of a template built")
	}
	if !strings.Contains(strings.Join(got.Logs, "\n"), "step-output") {
		t.Errorf("the build's logs lack its RUN's output: %q", got.Logs)
	}
	if !strings.Contains(got.MissingImage, "msb cache import-image msb-test/never-imported:1") {
		t.Errorf("FROM an image msb lacks said %q, want the import hint", got.MissingImage)
	}
	if !strings.Contains(got.FailingRun, "exited with code 3") {
		t.Errorf("a failing RUN said %q", got.FailingRun)
	}
	if !strings.Contains(got.UpdateNetwork, "409") || !strings.Contains(got.UpdateNetwork, "only a filtered sandbox has rules") {
		t.Errorf("update_network said %q", got.UpdateNetwork)
	}
}

// TestBuildSpecCheck: steps msb cannot build are refused before a build
// starts, each saying which and why.
func TestBuildSpecCheck(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		spec buildSpec
		want string // "" when accepted
	}{
		{"all kinds", buildSpec{Steps: []buildStep{{Type: "RUN", Args: []string{"true"}}, {Type: "ENV", Args: []string{"A", "1"}},
			{Type: "WORKDIR", Args: []string{"/w"}}, {Type: "USER", Args: []string{"root"}},
			{Type: "COPY", Args: []string{"a", "/b", "", ""}, FilesHash: hash}}}, ""},
		{"unknown step", buildSpec{Steps: []buildStep{{Type: "RUN", Args: []string{"true"}}, {Type: "HEALTHCHECK"}}}, "step 2: HEALTHCHECK"},
		{"odd ENV", buildSpec{Steps: []buildStep{{Type: "ENV", Args: []string{"A", "1", "B"}}}}, "step 1: ENV"},
		{"COPY without files", buildSpec{Steps: []buildStep{{Type: "COPY", Args: []string{"a", "/b"}}}}, "COPY without a filesHash"},
		{"start command", buildSpec{StartCmd: "serve", ReadyCmd: "true"}, ""},
		{"ready command alone", buildSpec{ReadyCmd: "true"}, ""},
		{"registry", buildSpec{FromImage: "x/y", FromImageRegistry: []byte(`{"type":"registry"}`)}, "msb cache import-image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrBadStep) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrBadStep saying %q", err, tc.want)
			}
		})
	}
}
