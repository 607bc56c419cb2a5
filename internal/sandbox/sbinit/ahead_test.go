package sbinit

import "testing"

func TestAheadSafe(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		safe bool
	}{
		{nil, true},
		{[]string{"PATH=/bin", "HOME=/root", "PSX=1", "MY_PS1=x", "BASH_FUNCS=1"}, true},
		{[]string{"PROMPT_COMMAND=:"}, false},
		{[]string{"PS0=$(x)"}, false},
		{[]string{"PS1=$(x)"}, false},
		{[]string{"PS4=$(x)"}, false},
		{[]string{"SHELLOPTS=xtrace"}, false},
		{[]string{"BASHOPTS=extdebug"}, false},
		{[]string{"BASH_FUNC_exec%%=() { :; }"}, false},
	} {
		if got := aheadSafe(tc.env); got != tc.safe {
			t.Errorf("aheadSafe(%q) = %v, want %v", tc.env, got, tc.safe)
		}
	}
}
