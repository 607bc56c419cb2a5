package e2b

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

func TestNetworkOf(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name     string
		internet *bool
		rules    *networkRules
		network  string
		policy   *engine.NetPolicy
	}{
		{"nothing asked: msb's default", nil, nil, engine.NetworkNone, nil},
		{"internet off", &off, nil, engine.NetworkNone, nil},
		{"internet off, deny only", &off, &networkRules{DenyOut: []string{"1.2.3.4"}}, engine.NetworkNone, nil},
		{"internet on", &on, nil, engine.NetworkFiltered, nil},
		{"allow and deny", nil, &networkRules{AllowOut: []string{"pypi.org"}, DenyOut: []string{"0.0.0.0/0"}},
			engine.NetworkFiltered, &engine.NetPolicy{Allow: []string{"pypi.org"}, Deny: []string{"0.0.0.0/0"}}},
		{"internet off, allow", &off, &networkRules{AllowOut: []string{"127.0.0.1:8000"}},
			engine.NetworkFiltered, &engine.NetPolicy{Allow: []string{"127.0.0.1:8000"}, Deny: []string{"0.0.0.0/0"}}},
		{"deny only", &on, &networkRules{DenyOut: []string{"10.0.0.0/8"}},
			engine.NetworkFiltered, &engine.NetPolicy{Deny: []string{"10.0.0.0/8"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			network, policy := networkOf(tc.internet, tc.rules)
			if network != tc.network || !reflect.DeepEqual(policy, tc.policy) {
				t.Fatalf("got %s %+v, want %s %+v", network, policy, tc.network, tc.policy)
			}
		})
	}
}

// TestE2BNetworkRules: the SDK's network rules hold in the sandbox, with
// listeners on the host's 127.0.0.1 as the only targets.
func TestE2BNetworkRules(t *testing.T) {
	t.Setenv("MSB_TEST_OPEN_PORT", strconv.Itoa(privtest.ServeOK(t)))
	t.Setenv("MSB_TEST_CLOSED_PORT", strconv.Itoa(privtest.ServeOK(t)))
	out := sdkScript(t, "sdk_network.py")
	var got struct {
		Allowed     string `json:"allowed"`
		Denied      string `json:"denied"`
		InternetOff string `json:"internet_off"`
		// after update_network swapped the two ports
		UpdatedAllowed string `json:"updated_allowed"`
		UpdatedDenied  string `json:"updated_denied"`
		LoopbackUpdate string `json:"loopback_update"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.Allowed != "ok" {
		t.Errorf("allowed port said %q", got.Allowed)
	}
	if !strings.Contains(got.Denied, "refused") {
		t.Errorf("denied port said %q, want connection refused", got.Denied)
	}
	if got.UpdatedAllowed != "ok" || !strings.Contains(got.UpdatedDenied, "refused") {
		t.Errorf("after update_network the newly allowed port said %q, the newly denied one %q", got.UpdatedAllowed, got.UpdatedDenied)
	}
	if !strings.Contains(got.LoopbackUpdate, "409") || !strings.Contains(got.LoopbackUpdate, "loopback") {
		t.Errorf("opening the host's loopback by update_network said %q, want a 409 naming it", got.LoopbackUpdate)
	}
	// No route: "Network is unreachable" without an interface to route
	// by, "No route to host" through the sandbox's eth0 (docs/sandbox.md).
	if !strings.Contains(got.InternetOff, "unreachable") && !strings.Contains(got.InternetOff, "No route to host") {
		t.Errorf("with allow_internet_access false the connect said %q, want no route", got.InternetOff)
	}
}

// TestNetworkUpdatePolicy: update_network's body replaces the rules of a
// filtered sandbox; what it omits is cleared.
func TestNetworkUpdatePolicy(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name string
		u    networkUpdate
		want *engine.NetPolicy
	}{
		{"nothing: all but the host's loopback", networkUpdate{}, nil},
		{"internet on", networkUpdate{AllowInternetAccess: &on}, nil},
		{"internet off: nothing", networkUpdate{AllowInternetAccess: &off}, &engine.NetPolicy{Deny: []string{allTraffic}}},
		{"internet off, allow", networkUpdate{AllowInternetAccess: &off, AllowOut: []string{"1.2.3.4"}},
			&engine.NetPolicy{Allow: []string{"1.2.3.4"}, Deny: []string{allTraffic}}},
		{"rules", networkUpdate{AllowOut: []string{"a.example"}, DenyOut: []string{"0.0.0.0/0"}},
			&engine.NetPolicy{Allow: []string{"a.example"}, Deny: []string{"0.0.0.0/0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.u.policy(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
