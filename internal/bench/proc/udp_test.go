package proc

import (
	"net"
	"os"
	"strings"
	"testing"
)

func TestUDPDrops(t *testing.T) {
	table := `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
   94: 00000000:8870 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1330543 2 00000000042016ec 12
   95: 0100007F:8871 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1330544 2 000000005e11e032 5
   96: 0100007F:8872 00000000:0000 07 00000000:00034000 00:00000000 00000000     0        0 1330545 2 000000005e11e033 7
`
	n, err := udpDrops(strings.NewReader(table), map[string]bool{"1330543": true, "1330545": true})
	if err != nil || n != 19 {
		t.Errorf("drops %d, %v; want 12+7", n, err)
	}
	// This process's own socket is found, with no drops.
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := UDPDrops(os.Getpid()); err != nil || n != 0 {
		t.Errorf("UDPDrops(self) = %d, %v", n, err)
	}
}
