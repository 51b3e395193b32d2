package sfu

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
	"github.com/pion/dtls/v3/pkg/crypto/selfsign"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// TestKeysOfARealHandshake: what dtlsKeys learns from the key log and the
// server hello of a real DTLS handshake (pion's, over loopback UDP) gives
// the keying material pion's own connection exports, for cipher suites of
// either PRF hash and for both kinds of SRTP profile; and a packet the
// local context encrypts, the client decrypts with the keys it exports.
func TestKeysOfARealHandshake(t *testing.T) {
	for _, suite := range []dtls.CipherSuiteID{dtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, dtls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384} {
		for _, profile := range []dtls.SRTPProtectionProfile{dtls.SRTP_AEAD_AES_128_GCM, dtls.SRTP_AES128_CM_HMAC_SHA1_80} {
			k := &dtlsKeys{}
			server, client := dtlsHandshake(t, suite, profile, k)
			st, _ := server.ConnectionState()
			const label = "EXTRACTOR-dtls_srtp"
			want, err := st.ExportKeyingMaterial(label, nil, 60)
			if err != nil {
				t.Fatal(err)
			}
			got, err := exporter{k}.ExportKeyingMaterial(label, nil, 60)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s, %v: keying material %x (%v), pion's %x", dtls.CipherSuiteName(suite), profile, got, err, want)
			}
			local, err := k.localContext()
			if err != nil {
				t.Fatal(err)
			}
			cst, _ := client.ConnectionState()
			cfg := srtp.Config{Profile: srtp.ProtectionProfile(profile)}
			if err := cfg.ExtractSessionKeysFromDTLS(&cst, true); err != nil {
				t.Fatal(err)
			}
			remote, err := srtp.CreateContext(cfg.Keys.RemoteMasterKey, cfg.Keys.RemoteMasterSalt, cfg.Profile)
			if err != nil {
				t.Fatal(err)
			}
			h := rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: 7, Timestamp: 960, SSRC: 0x1234}
			plain, _ := (&rtp.Packet{Header: h, Payload: []byte("twenty ms of opus")}).Marshal()
			enc, err := local.EncryptRTP(nil, plain, nil)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := remote.DecryptRTP(nil, enc, nil)
			if err != nil || !bytes.Equal(dec, plain) {
				t.Fatalf("%s, %v: the client decrypts %x (%v), want %x", dtls.CipherSuiteName(suite), profile, dec, err, plain)
			}
		}
	}
	if _, err := (&dtlsKeys{}).localContext(); err == nil {
		t.Error("a context without a handshake")
	}
	k := &dtlsKeys{}
	for _, line := range []string{"", "CLIENT_RANDOM zz 00\n", "CLIENT_RANDOM 00 11\n", "SERVER_HANDSHAKE_TRAFFIC_SECRET 00 11\n"} {
		if n, err := k.Write([]byte(line)); n != len(line) || err != nil {
			t.Errorf("Write(%q) = %d, %v", line, n, err)
		}
	}
	if k.master != nil {
		t.Error("a malformed key log line was taken")
	}
}

// dtlsHandshake runs a DTLS handshake over loopback UDP: the server with
// keys' hooks, the client as a browser would (its own certificate).
func dtlsHandshake(t *testing.T, suite dtls.CipherSuiteID, profile dtls.SRTPProtectionProfile, keys *dtlsKeys) (server, client *dtls.Conn) {
	t.Helper()
	cert, err := selfsign.GenerateSelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	base := func() *dtls.Config {
		return &dtls.Config{Certificates: []tls.Certificate{cert}, CipherSuites: []dtls.CipherSuiteID{suite},
			SRTPProtectionProfiles: []dtls.SRTPProtectionProfile{profile}, InsecureSkipVerify: true}
	}
	scfg := base()
	scfg.ClientAuth = dtls.RequireAnyClientCert
	scfg.KeyLogWriter = keys
	scfg.ServerHelloMessageHook = keys.serverHello
	if server, err = dtls.Server(sc, cc.LocalAddr(), scfg); err != nil {
		t.Fatal(err)
	}
	if client, err = dtls.Client(cc, sc.LocalAddr(), base()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- server.HandshakeContext(ctx) }()
	if err := client.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return server, client
}
