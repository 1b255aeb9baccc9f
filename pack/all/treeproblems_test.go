package all

import (
	"errors"
	"testing"

	"github.com/bloscfs/bloscfs/pack"
)

// problemTree is a pack.Tree that tells a problem.
type problemTree struct{ pack.Tree }

func (problemTree) Problems() []error { return []error{errors.New("left out")} }

// TestTreeProblems: an opened tree tells the problems of the tree it
// wraps (the embedded interface does not carry the method).
func TestTreeProblems(t *testing.T) {
	var tr pack.Tree = &Tree{Tree: problemTree{}}
	p, ok := tr.(pack.TreeProblems)
	if !ok || len(p.Problems()) != 1 {
		t.Fatalf("the problems of the wrapped tree are lost: %v", ok)
	}
	if got := (&Tree{}).Problems(); got != nil {
		t.Errorf("a tree without problems tells %v", got)
	}
}
