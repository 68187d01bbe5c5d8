// Package railfence is the Go client side of railfence: the reason catalogue (reasons.go,
// generated from the TypeScript one), reading a refusal's reason and retry hint from a gRPC
// status (Refusal), the Idempotency-Key header of CreatePayout (WithIdempotencyKey) and a mutual
// TLS connection from certificate files (DialMutualTLS).
//
// The service stubs are the generated packages under gen/, e.g.
// github.com/railfence/railfence/clients/go/gen/railfence/payouts/v1. How a Go service adds
// railfence, and what each retry class asks of a caller: docs/go-client.md.
package railfence
