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
	// APIKeyHashFile keeps the SHA-256 digest of the operator key the node
	// made (never the key itself).
	APIKeyHashFile = "api_key.sha256"
	// legacyAPIKeyFile is where nodes before the hashed file kept the key
	// in clear; it is hashed and removed at start.
	legacyAPIKeyFile = "api_key"
	tokenSecretFile  = "token_secret"
)

// access builds the API's access control from the config. Without
// auth.api_keys the operator key is the one whose digest the data dir
// keeps, made at first start so `make run` works on a laptop with no
// setup. fresh is the key in clear when the node has just made it (or
// moved an old clear-text key file to its digest): the caller prints it,
// that once.
func access(cfg config.Config) (acc *api.Access, fresh string, err error) {
	keys := auth.NewKeys(strings.Split(cfg.Auth.APIKeys, ",")...)
	if strings.TrimSpace(cfg.Auth.APIKeys) == "" {
		digest, made, err := keyDigest(cfg.DataDir)
		if err != nil {
			return nil, "", err
		}
		if keys, err = keys.WithHashes(digest); err != nil {
			return nil, "", fmt.Errorf("%s: %w", filepath.Join(cfg.DataDir, APIKeyHashFile), err)
		}
		fresh = made
	}
	secret := cfg.Auth.TokenSecret
	if secret == "" {
		if secret, err = secretFile(cfg.DataDir, tokenSecretFile, 32); err != nil {
			return nil, "", err
		}
	}
	return &api.Access{Keys: keys, Tokens: auth.NewSigner([]byte(secret), nil)}, fresh, nil
}

// keyDigest returns the digest of the node's operator key, making a key
// (returned in made) when there is none yet.
func keyDigest(dir string) (digest, made string, err error) {
	p := filepath.Join(dir, APIKeyHashFile)
	b, err := os.ReadFile(p)
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), "", nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("auth: %w", err)
	}
	key := ""
	legacy := filepath.Join(dir, legacyAPIKeyFile)
	if b, err := os.ReadFile(legacy); err == nil && strings.TrimSpace(string(b)) != "" {
		key = strings.TrimSpace(string(b))
	} else {
		key = auth.RandomHex(16)
	}
	digest, err = NewAPIKey(dir, key)
	if err != nil {
		return "", "", err
	}
	if err := os.Remove(legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("auth: %w", err)
	}
	return digest, key, nil
}

// NewAPIKey makes key the node's operator key: its digest replaces the one
// in dir (the node reads it at start). It returns the digest.
func NewAPIKey(dir, key string) (string, error) {
	if err := privateDir(dir); err != nil {
		return "", err
	}
	digest := auth.HashKey(key)
	tmp := filepath.Join(dir, APIKeyHashFile+".tmp")
	if err := os.WriteFile(tmp, []byte(digest+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, APIKeyHashFile)); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return digest, nil
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
	if err := privateDir(dir); err != nil {
		return "", err
	}
	s := auth.RandomHex(n)
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return s, nil
}

// privateDir makes dir, or tightens an existing one made by an older
// version, to be the node user's alone (0700).
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}
