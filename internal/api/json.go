package api

import "encoding/json"

// List is a slice that encodes as [] when nil, so that a JSON reader never
// sees null for "no items".
type List[T any] []T

// MarshalJSON implements json.Marshaler.
func (l List[T]) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]T(l))
}

// Map is a map that encodes as {} when nil. encoding/json writes its keys
// sorted.
type Map[K comparable, V any] map[K]V

// MarshalJSON implements json.Marshaler.
func (m Map[K, V]) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[K]V(m))
}
