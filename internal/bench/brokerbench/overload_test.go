package brokerbench

import "testing"

// The listeners offered to a peer with a connection per listener fit its
// open files, meetings' speakers included (many 20-person meetings ran
// out of files at 2 × capacity before).
func TestFilesAllow(t *testing.T) {
	for _, sc := range overloadScenarios() {
		n := filesAllow(sc, 20000)
		need := func(n int) int { return 2*len(sc.plan(n)) + 2*n + 512 }
		if n <= 0 || need(n) > 20000 || need(n+1) <= 20000 {
			t.Errorf("%s: %d listeners need %d files of 20000; %d would need %d", sc.name, n, need(n), n+1, need(n+1))
		}
	}
	if n := filesAllow(overloadScenarios()[0], 100); n != 0 {
		t.Errorf("100 files allow %d listeners", n)
	}
}
