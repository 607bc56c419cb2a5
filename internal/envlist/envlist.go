// Package envlist merges environment lists: the NAME=value entries of an
// exec's environment, an image's Config.Env or a sandbox's config.
package envlist

import "strings"

// Merge returns base with over's entries replacing base's of the same
// name in place and the others added after, in over's order. Neither
// input is changed.
func Merge(base, over []string) []string {
	out := append(make([]string, 0, len(base)+len(over)), base...)
	idx := make(map[string]int, len(out))
	for i, kv := range out {
		idx[Name(kv)] = i
	}
	for _, kv := range over {
		if i, ok := idx[Name(kv)]; ok {
			out[i] = kv
			continue
		}
		idx[Name(kv)] = len(out)
		out = append(out, kv)
	}
	return out
}

// Name is an entry's variable name: what precedes its first '='.
func Name(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	return name
}
