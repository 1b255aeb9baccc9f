package ordered

import (
	"errors"
	"fmt"
	"testing"
)

func TestRun(t *testing.T) {
	var got []int
	err := Run(100, func(i int) ([]byte, error) { return []byte{byte(i)}, nil },
		func(i int, b []byte) error {
			if int(b[0]) != i {
				return fmt.Errorf("result %d at %d", b[0], i)
			}
			got = append(got, i)
			return nil
		})
	if err != nil || len(got) != 100 {
		t.Fatalf("%v, %d results", err, len(got))
	}
	boom := errors.New("boom")
	err = Run(1000, func(i int) ([]byte, error) {
		if i == 17 {
			return nil, boom
		}
		return nil, nil
	}, func(int, []byte) error { return nil })
	if err != boom {
		t.Fatalf("err = %v", err)
	}
	if err := Run(0, nil, nil); err != nil {
		t.Fatal(err)
	}
}
