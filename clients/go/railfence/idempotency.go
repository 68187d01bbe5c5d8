package railfence

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// IdempotencyKeyHeader is the gRPC metadata key CreatePayout requires (docs/payouts-api.md).
const IdempotencyKeyHeader = "idempotency-key"

// WithIdempotencyKey returns ctx carrying key for the next CreatePayout. Make one key per
// payout intent (a UUID), store it with the intent before the first call, and send every retry
// of that intent under the same key: the server answers a replay with the payout it created.
// Never mint a new key because an answer was lost.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, IdempotencyKeyHeader, key)
}
