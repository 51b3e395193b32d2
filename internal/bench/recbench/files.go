package recbench

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/convene/convene/internal/rtpdump"
)

// files reads what the servers recorded, a little more each step: every
// .rtpdump and .mjr file under a directory, each from where the last read
// stopped (the end of its last whole record), so that a long run does not
// read its files again and again.
type files struct {
	dir   string
	tails map[string]*tail
	// Records counts the packets read, Unmarked those without a mark
	// (RTCP, or what the load did not send); Bad the files that could not
	// be read (their error in BadErr).
	Records, Unmarked uint64
	Bad               int
	BadErr            error
}

// tail is one file and how far it has been read.
type tail struct {
	path string
	off  int64  // where the next record starts; 0 before the header is read
	head []byte // an rtpdump file's text line and header, to resume after
}

func newFiles(dir string) *files { return &files{dir: dir, tails: map[string]*tail{}} }

// scan reads what was added to the files since the last scan and gives
// each marked packet to visit.
func (f *files) scan(visit func(stream, n uint32)) {
	_ = filepath.WalkDir(f.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if !strings.HasSuffix(path, ".rtpdump") && !strings.HasSuffix(path, ".mjr") {
			return nil
		}
		t := f.tails[path]
		if t == nil {
			t = &tail{path: path}
			f.tails[path] = t
		}
		return nil
	})
	for _, t := range f.tails {
		err := t.read(func(pkt []byte) {
			f.Records++
			if s, n, ok := readMark(pkt); ok {
				visit(s, n)
			} else {
				f.Unmarked++
			}
		})
		if err != nil {
			f.Bad++
			f.BadErr = err
		}
	}
}

// read gives every whole record after t.off to visit and moves t.off past
// them. A file whose header is not written yet is left for later.
func (t *tail) read(visit func(pkt []byte)) error {
	fh, err := os.Open(t.path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if strings.HasSuffix(t.path, ".mjr") {
		return t.readMJR(fh, visit)
	}
	return t.readRTPDump(fh, visit)
}

func (t *tail) readMJR(fh *os.File, visit func([]byte)) error {
	var m *mjrReader
	if t.off == 0 {
		var err error
		if m, err = newMJRReader(fh); errors.Is(err, errMJRNotYet) {
			return nil
		} else if err != nil {
			return err
		}
	} else {
		if _, err := fh.Seek(t.off, io.SeekStart); err != nil {
			return err
		}
		m = resumeMJR(fh)
		m.off = t.off
	}
	for {
		p, err := m.next()
		if err != nil {
			t.off = m.off
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			return err
		}
		visit(p)
	}
}

// readRTPDump resumes an rtpdump.Reader: after the first read it is given
// the file's header again, then the file from t.off.
func (t *tail) readRTPDump(fh *os.File, visit func([]byte)) error {
	var src io.Reader = fh
	base := int64(0)
	if t.off > 0 {
		if _, err := fh.Seek(t.off, io.SeekStart); err != nil {
			return err
		}
		src = io.MultiReader(bytes.NewReader(t.head), fh)
		base = t.off - int64(len(t.head))
	}
	r, err := rtpdump.NewReader(src)
	if err != nil {
		if t.off == 0 {
			return nil // the header is not written yet
		}
		return err
	}
	if t.off == 0 {
		t.head = make([]byte, r.Offset())
		if _, err := fh.ReadAt(t.head, 0); err != nil {
			return err
		}
	}
	for {
		p, err := r.Next()
		if err != nil {
			t.off = base + r.Offset()
			var torn *rtpdump.TruncatedError
			if err == io.EOF || errors.As(err, &torn) {
				return nil
			}
			return err
		}
		if !p.RTCP {
			visit(p.Data)
		}
	}
}
