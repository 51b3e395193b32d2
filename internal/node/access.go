package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/convene/convene/internal/api"
	"github.com/convene/convene/internal/auth"
	"github.com/convene/convene/internal/config"
)

// Files in the data dir that hold generated secrets.
const (
	apiKeyFile      = "api_key"
	tokenSecretFile = "token_secret"
)

// access builds the API's access control from the config. A key or secret
// that is not configured is read from the data dir, or made and kept there
// at first start, so `make run` works on a laptop with no setup; generated
// reports whether the API key came from there (the caller prints it).
func access(cfg config.Config) (acc *api.Access, key string, generated bool, err error) {
	keys := strings.Split(cfg.Auth.APIKeys, ",")
	key = strings.TrimSpace(keys[0])
	if key == "" {
		if key, err = secretFile(cfg.DataDir, apiKeyFile, 16); err != nil {
			return nil, "", false, err
		}
		keys, generated = []string{key}, true
	}
	secret := cfg.Auth.TokenSecret
	if secret == "" {
		if secret, err = secretFile(cfg.DataDir, tokenSecretFile, 32); err != nil {
			return nil, "", false, err
		}
	}
	return &api.Access{Keys: auth.NewKeys(keys...), Tokens: auth.NewSigner([]byte(secret), nil)}, key, generated, nil
}

// secretFile returns the secret kept in dir/name, making it (n random
// bytes, hex) if the file does not exist.
func secretFile(dir, name string, n int) (string, error) {
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("auth: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	s := auth.RandomHex(n)
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return s, nil
}
