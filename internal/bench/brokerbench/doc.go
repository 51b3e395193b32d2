// Package bench is Convene's benchmark instrument: the seed's broker tests
// (av-service-architecture-single-broker-performance, Tables 1–7) run
// against Convene and a peer broker in one invocation, beside a probe of the
// machine's own UDP fan-out limit, with bisection for the largest meeting
// that still meets the quality bar, and a report in Markdown, JSON and PNG.
package brokerbench
