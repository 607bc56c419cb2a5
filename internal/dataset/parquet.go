package dataset

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// readParquet reads every row of a Parquet file into a map keyed by
// top-level column name. A column whose leaf is nested (a list, as dataset
// hubs write FAIL_TO_PASS and PASS_TO_PASS) becomes a list of its leaf
// values; any other column becomes its single value. Byte arrays become
// strings, numbers their decimal text (so that a timestamp column still
// reads as created_at).
func readParquet(r io.ReaderAt, size int64) (rows []rawRow, err error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, err
	}
	defer func() {
		// The library panics on some corrupt files; report it as an error.
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt Parquet file: %v", p)
		}
	}()
	schema := f.Schema()
	cols := schema.Columns()
	top := make([]string, len(cols))
	isList := make([]bool, len(cols))
	for i, path := range cols {
		top[i] = path[0]
		if leaf, ok := schema.Lookup(path...); ok {
			isList[i] = leaf.MaxRepetitionLevel > 0
		}
	}
	reader := parquet.NewReader(f)
	defer reader.Close()
	buf := make([]parquet.Row, 64)
	for {
		n, err := reader.ReadRows(buf)
		for _, row := range buf[:n] {
			fields := make(map[string]any, len(cols))
			for _, v := range row {
				c := v.Column()
				if c < 0 || c >= len(cols) {
					continue
				}
				name := top[c]
				if isList[c] {
					list, _ := fields[name].([]any)
					if list == nil {
						list = []any{}
					}
					if !v.IsNull() {
						list = append(list, parquetScalar(v))
					}
					fields[name] = list
					continue
				}
				if v.IsNull() {
					fields[name] = nil
				} else {
					fields[name] = parquetScalar(v)
				}
			}
			rows = append(rows, rawRow{fields: fields})
		}
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
	}
}

func parquetScalar(v parquet.Value) any {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return string(v.ByteArray())
	case parquet.Boolean:
		return v.Boolean()
	}
	return v.String()
}
