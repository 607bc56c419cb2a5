package e2b

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestE2BSuiteExpectations: what E2B's own SDK test suite expects of the
// base template and envd (docs/e2b.md "E2B's own test suite"), through the
// SDK: /home/user as the working directory, HOME and the start of
// relative paths and of a command's relative cwd; files.list walks in
// lexical order; removing what is not there succeeds; a symlink's entry
// names the absolute path it leads to; a command whose sandbox is killed
// ends in SandboxNotRunningException, not an exit code;
// Template.exists("base"); Template.assign_tags and remove_tags; signed
// file URLs, which name no sandbox on one listener; a template's start
// command, run at the end of its build until its ready command succeeds,
// then at each create; COPY of several files into a directory; a template
// FROM base starts in /home/user.
func TestE2BSuiteExpectations(t *testing.T) {
	out := sdkScript(t, "sdk_suite_fixes.py")
	var got struct {
		PwdHome    []string `json:"pwd_home"`
		Written    string   `json:"written"`
		Stat       string   `json:"stat"`
		Listed     []string `json:"listed"`
		RelCwd     string   `json:"rel_cwd"`
		Removed    bool     `json:"removed_missing"`
		Link       []any    `json:"link"`
		Dangling   []any    `json:"dangling"`
		KilledWait string   `json:"killed_wait"`
		BaseExists bool     `json:"base_exists"`
		Assigned   []string `json:"assigned"`
		Tags       []string `json:"tags"`
		Refused    []string `json:"refused"`
		Signed     []any    `json:"signed"`
		Uploaded   string   `json:"uploaded"`
		AsUser     string   `json:"as_user"`
		StartProcs []string `json:"start_procs"`
		StartLog   string   `json:"start_log"`
		Copied     []string `json:"copied"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if fmt.Sprint(got.PwdHome) != "[/home/user /home/user]" {
		t.Errorf("pwd and $HOME of a base sandbox's command: %v, want /home/user twice", got.PwdHome)
	}
	if got.Written != "/home/user/rel.txt" || got.Stat != "/home/user/rel.txt" {
		t.Errorf("files.write and get_info of rel.txt: %q %q, want /home/user/rel.txt", got.Written, got.Stat)
	}
	want := "[/home/user/listing/a /home/user/listing/b /home/user/listing/b.txt /home/user/listing/c /home/user/listing/c/d]"
	if fmt.Sprint(got.Listed) != want {
		t.Errorf("files.list(depth=2): %v, want %s", got.Listed, want)
	}
	if got.RelCwd != "/home/user/listing/c" {
		t.Errorf("pwd with cwd listing/c: %q, want /home/user/listing/c", got.RelCwd)
	}
	if !got.Removed {
		t.Error("files.remove of a path that is not there raised")
	}
	// The SDK shows a link as a symlink (is_symlink); envd resolves its target.
	if fmt.Sprint(got.Link) != "[symlink /home/user/listing/b.txt]" || fmt.Sprint(got.Dangling) != "[symlink /nowhere]" {
		t.Errorf("get_info of a link to ../b.txt and of one to /nowhere: %v %v, want [symlink /home/user/listing/b.txt] [symlink /nowhere]",
			got.Link, got.Dangling)
	}
	want = "[[200 signed] [200 signed] [401 signature is already expired] " +
		"[401 the URL's signature is not one of a running sandbox's] 200 401]"
	if fmt.Sprint(got.Signed) != want || got.Uploaded != "uploaded" {
		t.Errorf("signed URLs for `user`: download, with an expiry, expired, tampered, upload; as a user the host base lacks: %v (uploaded %q), want %s (uploaded)",
			got.Signed, got.Uploaded, want)
	}
	if got.AsUser != "root" {
		t.Errorf("commands.run(user=\"user\") on the host base ran as %q, want root, which stands in for E2B's user there", got.AsUser)
	}
	// The build's run wrote one line (kept in the template), the create's another.
	if fmt.Sprint(got.StartProcs) != "[start]" || got.StartLog != "up\nup\n" {
		t.Errorf("a sandbox of a template with a start command: processes %v, its log %q; want [start] and two lines up",
			got.StartProcs, got.StartLog)
	}
	want = "[/home/user a.txt b.txt dangling.txt link.txt a.txt]"
	if fmt.Sprint(got.Copied) != want {
		t.Errorf("a template FROM base: where RUN ran, COPY folder/* copied, and the link's file: %v, want %s", got.Copied, want)
	}
	if got.KilledWait != "SandboxNotRunningException" {
		t.Errorf("wait on a command whose sandbox was killed: %s, want SandboxNotRunningException (end of life)", got.KilledWait)
	}
	if !got.BaseExists {
		t.Error(`Template.exists("base") is False`)
	}
	if fmt.Sprint(got.Assigned) != "[latest prod]" || fmt.Sprint(got.Tags) != "[latest v1]" {
		t.Errorf("assign_tags(prod, suite-tags:latest) answered %v, then remove_tags(prod) left %v; want [latest prod], [latest v1]",
			got.Assigned, got.Tags)
	}
	if fmt.Sprint(got.Refused) != "[:x suite-tags: other:x]" {
		t.Errorf("assign_tags refused %v, want [:x suite-tags: other:x]", got.Refused)
	}
}
