package railfence_test

import (
	"context"
	"log"

	commonv1 "github.com/railfence/railfence/clients/go/gen/railfence/common/v1"
	payoutsv1 "github.com/railfence/railfence/clients/go/gen/railfence/payouts/v1"
	"github.com/railfence/railfence/clients/go/railfence"
)

// The example of docs/go-client.md, compiled by every `go test` so the page cannot drift from
// the API. It has no Output comment: it needs a mesh, so go test builds it but does not run it.
func Example() {
	conn, err := railfence.DialMutualTLS("payouts.railfence.svc:8443", railfence.TLSFiles{
		CertFile: "/var/run/secrets/railfence/tls.crt", // your identity, e.g. spiffe://railfence/client
		KeyFile:  "/var/run/secrets/railfence/tls.key",
		CAFile:   "/var/run/secrets/railfence/ca.crt", // the CA of railfence's servers
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	payouts := payoutsv1.NewPayoutServiceClient(conn)

	// One key per payout intent, stored with the intent before the first call.
	intentKey := "0b5c7f9e-4a8e-4c1e-9a47-2f4b0f6d1c3a"
	ctx := railfence.WithIdempotencyKey(context.Background(), intentKey)
	res, err := payouts.CreatePayout(ctx, &payoutsv1.CreatePayoutRequest{
		AccountId: "acc-1", Beneficiary: "ben-1", ClientReference: "order-42",
		Amount: &commonv1.Money{AmountMinor: 1050, Currency: "EUR"},
	})
	if reason, retry, after, ok := railfence.Refusal(err); ok {
		switch {
		case reason == railfence.ReasonAccountDailyLimitExceeded: // branch on reasons, never on messages
		case retry == railfence.RetryTransient: // same request, same key, not before `after`
			_ = after
		}
		return
	} else if err != nil {
		// No railfence answer: the payout may exist. Retry with the same key (docs/go-client.md).
		return
	}
	log.Printf("payout %s", res.GetPayout().GetPayoutId())
}
