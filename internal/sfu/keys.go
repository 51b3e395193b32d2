package sfu

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"strings"
	"sync"

	"github.com/pion/dtls/v3"
	"github.com/pion/dtls/v3/pkg/crypto/prf"
	"github.com/pion/dtls/v3/pkg/protocol/extension"
	"github.com/pion/dtls/v3/pkg/protocol/handshake"
	"github.com/pion/srtp/v3"
)

// dtlsKeys learns, during a subscriber connection's DTLS handshake, what
// the node's SRTP keys are made from (RFC 5764 §4.2), so that the direct
// path (direct.go) can encrypt the connection's audio itself: pion keeps
// its DTLS connection and SRTP sessions to itself.
//
// It reads two of pion's public hooks: the key log (RFC: the NSS key log
// format, a CLIENT_RANDOM line with the master secret) and the server's
// hello (its random, the cipher suite and the SRTP profile it chose). So
// it learns the keys only when the node is the DTLS server, as it is for a
// browser's subscriber connection (the node offers, the browser answers
// "active"); as a DTLS client it sees no server hello, and the connection
// keeps pion's path.
//
// The master secret is held in memory as long as the connection, as pion
// holds it; it is never written anywhere.
type dtlsKeys struct {
	mu           sync.Mutex
	serverRandom []byte
	suite        dtls.CipherSuiteID
	profile      srtp.ProtectionProfile
	clientRandom []byte
	master       []byte
}

// keyLogLabel is the key log's label of a DTLS 1.2 master secret.
const keyLogLabel = "CLIENT_RANDOM"

// Write takes pion's key log: "CLIENT_RANDOM <client random> <master
// secret>\n", in hex. Anything else is ignored.
func (k *dtlsKeys) Write(p []byte) (int, error) {
	f := strings.Fields(string(p))
	if len(f) != 3 || f[0] != keyLogLabel {
		return len(p), nil
	}
	cr, err1 := hex.DecodeString(f[1])
	ms, err2 := hex.DecodeString(f[2])
	if err1 != nil || err2 != nil || len(cr) != handshake.RandomLength || len(ms) == 0 {
		return len(p), nil
	}
	k.mu.Lock()
	k.clientRandom, k.master = cr, ms
	k.mu.Unlock()
	return len(p), nil
}

// serverHello notes the node's server hello and sends it unchanged.
func (k *dtlsKeys) serverHello(m handshake.MessageServerHello) handshake.Message {
	random := m.Random.MarshalFixed()
	k.mu.Lock()
	k.serverRandom = append([]byte(nil), random[:]...)
	if m.CipherSuiteID != nil {
		k.suite = dtls.CipherSuiteID(*m.CipherSuiteID)
	}
	for _, e := range m.Extensions {
		if u, ok := e.(*extension.UseSRTP); ok && len(u.ProtectionProfiles) == 1 {
			k.profile = srtp.ProtectionProfile(u.ProtectionProfiles[0])
		}
	}
	k.mu.Unlock()
	return &m
}

var errNoKeys = errors.New("sfu: the handshake's keys are not known")

// localContext is an SRTP context that encrypts as the node's side of the
// connection does (the server's write keys).
func (k *dtlsKeys) localContext() (*srtp.Context, error) {
	cfg, err := k.sessionKeys()
	if err != nil {
		return nil, err
	}
	return srtp.CreateContext(cfg.Keys.LocalMasterKey, cfg.Keys.LocalMasterSalt, cfg.Profile)
}

// remoteContext is an SRTP context that decrypts what the other side of
// the connection sends (the client's write keys), with replay protection
// as pion's own (a window of 64 packets). It takes packets whose header
// extensions are encrypted too (RFC 9335 cryptex, which pion negotiates
// with a publisher that offers it) and packets whose extensions are not.
func (k *dtlsKeys) remoteContext() (*srtp.Context, error) {
	cfg, err := k.sessionKeys()
	if err != nil {
		return nil, err
	}
	return srtp.CreateContext(cfg.Keys.RemoteMasterKey, cfg.Keys.RemoteMasterSalt, cfg.Profile, srtp.SRTPReplayProtection(64),
		srtp.Cryptex(srtp.CryptexModeEnabled))
}

// sessionKeys are both sides' SRTP master keys and salts, the node being
// the DTLS server.
func (k *dtlsKeys) sessionKeys() (srtp.Config, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.master == nil || k.serverRandom == nil || k.profile == 0 || k.suite == 0 {
		return srtp.Config{}, errNoKeys
	}
	cfg := srtp.Config{Profile: k.profile}
	err := cfg.ExtractSessionKeysFromDTLS(exporter{k}, false)
	return cfg, err
}

// exporter is RFC 5705's keying material exporter of a DTLS 1.2 session,
// as pion's own (dtls.State.ExportKeyingMaterial): the PRF of the master
// secret over the label and both randoms, client first. Called under mu.
type exporter struct{ k *dtlsKeys }

func (e exporter) ExportKeyingMaterial(label string, context []byte, length int) ([]byte, error) {
	if len(context) != 0 {
		return nil, errors.New("sfu: keying material with a context")
	}
	seed := bytes.Join([][]byte{[]byte(label), e.k.clientRandom, e.k.serverRandom}, nil)
	return prf.PHash(e.k.master, seed, length, prfHash(e.k.suite))
}

// prfHash is a cipher suite's PRF hash: SHA-384 for the suites named so,
// SHA-256 for every other suite of DTLS 1.2.
func prfHash(s dtls.CipherSuiteID) func() hash.Hash {
	if strings.HasSuffix(dtls.CipherSuiteName(s), "SHA384") {
		return sha512.New384
	}
	return sha256.New
}
