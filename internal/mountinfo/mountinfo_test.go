package mountinfo

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRead(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	table := `22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
40 30 0:40 /pods /mnt/with\040space rw shared:9 master:3 - tmpfs tmp\011fs rw,size=8192k
broken line
41 30 0:41 / /x rw
`
	if err := os.WriteFile(f, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/", Mountpoint: "/proc", FSType: "proc", Source: "proc", SuperOptions: "rw"},
		{Root: "/", Mountpoint: "/sys/fs/cgroup/cpu,cpuacct", FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,cpu,cpuacct"},
		{Root: "/pods", Mountpoint: "/mnt/with space", FSType: "tmpfs", Source: "tmp\tfs", SuperOptions: "rw,size=8192k"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing table read without error")
	}
	for in, want := range map[string]string{
		`/a/b`:          "/a/b",
		`/a\040b`:       "/a b",
		`/x\134y`:       `/x\y`,
		`/trailing\04`:  `/trailing\04`,
		`/tab\011end\0`: "/tab\tend\\0",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadSelf(t *testing.T) {
	ms, err := Read(Self)
	if err != nil {
		t.Fatal(err)
	}
	root := false
	for _, m := range ms {
		root = root || m.Mountpoint == "/"
	}
	if !root {
		t.Errorf("no / in the mount table: %+v", ms)
	}
}
