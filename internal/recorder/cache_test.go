package recorder

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// TestSyncedPagesLeaveTheCache: what the recording synced, but its last
// cacheTail bytes or so, is no longer in the page cache (mincore over the
// file), and the file still holds every packet.
func TestSyncedPagesLeaveTheCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(dir), &fs); err == nil && fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is on tmpfs, whose pages cannot leave the cache")
	}
	room := broker.NewRoom("s_cache")
	cam, err := room.Join(broker.Member{ID: "alice/cam", Owner: "alice", Kind: media.Video, Sends: true,
		Info: broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Start(room, dir, Options{SyncEvery: 5 * time.Millisecond, FlushEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12000 // 14.4 MB
	for i := range n {
		cam.Publish(packet(rtp(96, uint16(i), 0xb1, 1188)))
		if i%100 == 99 {
			time.Sleep(2 * time.Millisecond) // the queue drains
		}
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	man, err := ReadManifest(dir)
	if err != nil || len(man.Streams) != 1 {
		t.Fatalf("manifest %+v, %v", man, err)
	}
	path := filepath.Join(dir, man.Streams[0].File)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	dropped := int((st.Size()-cacheTail)&^(cacheTail-1)) / os.Getpagesize()
	resident := 0
	for _, v := range vec[:dropped] {
		resident += int(v & 1)
	}
	if dropped < len(vec)/2 || resident > 0 {
		t.Fatalf("%d of the file's first %d pages (of %d) are in the page cache after the recording synced them", resident, dropped, len(vec))
	}
	got, err := readAll(t, path)
	if err != nil || len(got) != n {
		t.Fatalf("%d packets on disk, %d sent: %v", len(got), n, err)
	}
}
