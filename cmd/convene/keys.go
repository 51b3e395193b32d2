package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/node"
)

const keysUsage = `usage: convene keys new [config flags]

Makes a new operator API key for the node of this configuration
(-data-dir, -config FILE or CONVENE_* select it), prints it once and keeps
only its SHA-256 digest in <data_dir>/api_key.sha256; the old key stops
working when the node is next started. Keys set in auth.api_keys are not
affected (and take the place of the data dir's key).
`

// keysCmd runs `convene keys`.
func keysCmd(args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "new" {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	cfg, pos, err := config.Load("", env, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, keysUsage)
		return 0
	}
	if err != nil || len(pos) > 0 {
		fmt.Fprintln(stderr, "convene keys:", err, pos)
		return 2
	}
	key := auth.RandomHex(16)
	if _, err := node.NewAPIKey(cfg.DataDir, key); err != nil {
		fmt.Fprintln(stderr, "convene keys:", err)
		return 1
	}
	fmt.Fprintf(stdout, "API key: %s\n  (shown only now; its digest is in %s; restart the node to use it)\n", key,
		filepath.Join(cfg.DataDir, node.APIKeyHashFile))
	return 0
}
