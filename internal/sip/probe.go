package sip

import (
	"context"
	"sync"

	"github.com/emiago/sipgo/sip"
)

// probeContacts sends an OPTIONS to every registered contact; one that
// does not answer at all (timeout or transport error) is dropped. Any
// response, even an error, shows the contact is alive. The probe also
// refreshes the NAT binding on the path (like Kamailio's nathelper).
func (s *Server) probeContacts() {
	bs := s.loc.all(s.o.Now())
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range bs {
		b := bs[i]
		select {
		case sem <- struct{}{}:
		case <-s.ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.probe(b)
		}()
	}
	wg.Wait()
}

func (s *Server) probe(b binding) {
	tp, addr := b.dest()
	req := sip.NewRequest(sip.OPTIONS, *b.uri.Clone())
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "convene", Host: s.o.Domain}}
	from.Params.Add("tag", sip.GenerateTagN(16))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: *b.uri.Clone()})
	s.route(req, tp, addr)
	wait := s.o.ProbeTimeout
	if wait <= 0 {
		wait = sip.Timer_F
	}
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()
	_, err := s.client.Do(ctx, req)
	if err == nil || s.ctx.Err() != nil {
		return
	}
	if s.loc.drop(b.user, b.contact) {
		s.m.dropped.Inc()
		s.m.registrations.Set(float64(s.loc.size()))
		s.log.Info("sip: dropped a contact that does not answer OPTIONS", "user", b.user, "contact", b.contact, "err", err)
	}
}
