package api

import (
	"crypto/rand"
	"math/big"
	"net/http"

	"github.com/convene/convene/internal/sipusers"
)

// GuestUser is the digest username guests dial into a session with, the
// session's PIN as password.
const GuestUser = "guest"

// newPIN makes a session's guest PIN (8 random digits) and keeps only its
// digests; the answer shows it once.
func (s *Server) newPIN(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	if s.o.Users == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node has no SIP service")
		return
	}
	n, err := rand.Int(rand.Reader, big.NewInt(100_000_000))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "no randomness")
		return
	}
	pin := n.Text(10)
	for len(pin) < 8 {
		pin = "0" + pin
	}
	realm := s.o.Users.Realm()
	md5, _ := sipusers.HA1(sipusers.MD5, GuestUser, realm, pin)
	sha, _ := sipusers.HA1(sipusers.SHA256, GuestUser, realm, pin)
	id := r.PathValue("id")
	if err := s.o.Sessions.SetPIN(r.Context(), id, md5, sha); err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"pin": pin, "username": GuestUser, "uri": "sip:" + id + "@" + realm})
}

// deletePIN ends guest dial-in to a session.
func (s *Server) deletePIN(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chair(w, r); !ok {
		return
	}
	if err := s.o.Sessions.ClearPIN(r.Context(), r.PathValue("id")); err != nil {
		s.writeServiceError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
