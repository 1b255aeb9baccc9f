package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bloscfs/bloscfs/internal/testkit"
	"github.com/bloscfs/bloscfs/internal/testkit/mounttest"
)

// TestKillDuringRemoteRead SIGKILLs the daemon of a remote mount at
// random moments while a reader streams an 8 MiB frame out of versitygw
// (ranged GETs in flight): every time the process is gone within a
// second, the reader gets an error rather than hang, and `bloscfs
// unmount` clears the dead mount. (The local mount is killed the same
// way, during start, reads, commits and unmounts, in integration/writes'
// TestKillAnywhere.)
func TestKillDuringRemoteRead(t *testing.T) {
	setup.Require(t)
	kills := 30
	if os.Getenv("BLOSCFS_LONG") != "" {
		kills = 300
	}
	b := "kills"
	s := newStore(t, b)
	ctx := context.Background()
	if err := s.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	for i := 0; plain.Len() < 8<<20; i++ {
		fmt.Fprintf(&plain, "%09d,%f\n", i, float64(i)*1.7)
	}
	tmp := t.TempDir()
	in, frame := filepath.Join(tmp, "big"), filepath.Join(tmp, "big.b2frame")
	if err := os.WriteFile(in, plain.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, "pack", "--codec", "zstd", "--clevel", "1", "--chunk-size", "256KiB", in, frame)
	f, err := os.Open(frame)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Upload(ctx, "big.b2frame", f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	for i := 0; i < kills; i++ {
		m := mountRemote(t, "s3://"+b)
		reader := exec.Command("sh", "-c", `while dd if="$1" of=/dev/null bs=256k 2>/dev/null; do :; done`, "sh", m.Path("big"))
		if err := reader.Start(); err != nil {
			t.Fatal(err)
		}
		d := time.Duration(rng.IntN(400)) * time.Millisecond
		time.Sleep(d)
		if pid := m.Cmd.Process.Pid; !testkit.KillGone(pid, time.Second) {
			t.Errorf("kill %d (%v into the reads): the daemon survived SIGKILL for 1s; its threads:\n%s", i, d, testkit.KernelStacks(pid))
		}
		if exited, _ := testkit.Wait(reader, 30*time.Second); !exited {
			t.Fatalf("kill %d: the reader did not exit within 30s of the daemon's death", i)
		}
		if mounttest.IsMounted(m.Dir) {
			if r := testkit.Run(30*time.Second, bin, "unmount", m.Dir); r.Err != nil {
				t.Fatalf("kill %d: bloscfs unmount of the dead mount: %v", i, r)
			}
		}
	}
}
