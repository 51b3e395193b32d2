package chatbench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/convene/convene/internal/bench/floorbench"
)

// Floor is the floor token figures of the newest `convene-bench floor`
// report, shown beside the seed's.
type Floor struct {
	Report   string           `json:"report"`
	Grant    floorbench.Stats `json:"request_to_grant"`
	Handover floorbench.Stats `json:"handover"`
}

// latestFloor reads the newest <dir>/*-floor.json; nil when there is none.
func latestFloor(dir string) *Floor {
	files, _ := filepath.Glob(filepath.Join(dir, "*-floor.json"))
	slices.Sort(files) // named by date
	for i := len(files) - 1; i >= 0; i-- {
		b, err := os.ReadFile(files[i])
		if err != nil {
			continue
		}
		var r floorbench.Result
		if json.Unmarshal(b, &r) == nil && r.Handover.N > 0 {
			return &Floor{Report: filepath.Base(files[i]), Grant: r.Grant, Handover: r.Handover}
		}
	}
	return nil
}
