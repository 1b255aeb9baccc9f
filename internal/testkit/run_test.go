package testkit

import "testing"

// TestStackState reads the kernel stacks seen of killed daemons: one
// stuck closing a file of its own mount (issue 24: it never exits), one
// freeing its memory slowly on a loaded machine (it does), and a thread
// that runs.
func TestStackState(t *testing.T) {
	for _, tc := range []struct {
		name            string
		stack           string
		fuse, isExiting bool
	}{
		{"stuck on its own mount", `[<0>] request_wait_answer+0x1a3/0x2c0
[<0>] __fuse_simple_request+0xd6/0x290
[<0>] fuse_flush+0x1a9/0x200
[<0>] filp_close+0x2d/0x80
[<0>] put_files_struct+0x79/0xe0
[<0>] do_exit+0x2d1/0xab0
[<0>] do_group_exit+0x29/0xb0
`, true, true},
		{"freeing its memory", `[<0>] unmap_page_range+0x6fb/0x1460
[<0>] unmap_vmas+0x94/0x180
[<0>] exit_mmap+0xd5/0x3d0
[<0>] __mmput+0x41/0x140
[<0>] do_exit+0x287/0xab0
[<0>] do_group_exit+0x29/0xb0
[<0>] get_signal+0x83c/0x840
`, false, true},
		{"running", "", false, true},
		{"reading /dev/fuse", `[<0>] fuse_dev_do_read+0x7a6/0x8c0
[<0>] fuse_dev_read+0x5b/0x90
[<0>] vfs_read+0x2a0/0x360
`, true, false},
		{"asleep elsewhere", `[<0>] futex_wait_queue+0x60/0x90
[<0>] futex_wait+0x185/0x270
`, false, false},
	} {
		fuse, exiting := stackState(tc.stack)
		if fuse != tc.fuse || exiting != tc.isExiting {
			t.Errorf("%s: waits on FUSE %v, exiting %v; want %v, %v", tc.name, fuse, exiting, tc.fuse, tc.isExiting)
		}
	}
}
