package railfence

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// Domain is the google.rpc.ErrorInfo domain of every railfence refusal.
const Domain = "railfence.dev"

// Refusal reads a railfence refusal from err (a gRPC status error, possibly wrapped): its
// reason, the catalogue's retry class for its (code, reason) pair, and the server's retry hint
// (google.rpc.RetryInfo; zero when absent). ok is false when err carries no ErrorInfo of domain
// railfence.dev: the call failed before a railfence server answered it (a TLS or connection
// failure, a deadline on the client) or in the RPC framework. Branch on status.Code(err) then,
// and remember that a CreatePayout whose answer was lost may have created the payout: send it
// again with the same Idempotency-Key, never with a new one.
func Refusal(err error) (reason Reason, retry RetryClass, retryAfter time.Duration, ok bool) {
	st, found := statusOf(err)
	if !found {
		return "", RetryUnknown, 0, false
	}
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.ErrorInfo:
			if v.GetDomain() == Domain && !ok {
				reason, ok = Reason(v.GetReason()), true
			}
		case *errdetails.RetryInfo:
			if delay := v.GetRetryDelay(); delay != nil && delay.IsValid() {
				retryAfter = delay.AsDuration()
			}
		}
	}
	if !ok {
		return "", RetryUnknown, 0, false
	}
	return reason, RetryOf(st.Code(), reason), retryAfter, true
}

// statusOf finds the gRPC status in err, unwrapping like errors.As does.
func statusOf(err error) (*status.Status, bool) {
	var carrier interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &carrier) {
		return nil, false
	}
	st := carrier.GRPCStatus()
	return st, st != nil
}
