package rtcbench

import (
	"strconv"

	"github.com/convene/convene/internal/bench/janus"
)

// Room is the Janus VideoRoom every run uses.
const Room = 1234

// startJanus runs Janus with the VideoRoom plugin and one room, gathering
// ICE candidates on its veth interface (ICE-lite, one host candidate, no
// trickle, like Convene's node).
func startJanus(dir string, pin bool) (*janus.Server, error) {
	return janus.Start(janus.Options{Dir: dir, Plugin: "videoroom", Veth: true, Pin: pin, PluginConfig: `general: {
}
room-` + strconv.Itoa(Room) + `: {
	description = "bench"
	publishers = 4
	bitrate = 0
	audiocodec = "opus"
	videocodec = "vp8"
	fir_freq = 0
	notify_joining = false
}
`})
}
