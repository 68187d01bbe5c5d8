package railfence

import "google.golang.org/grpc/codes"

// Reason is a google.rpc.ErrorInfo reason of domain railfence.dev (the constants in reasons.go).
type Reason string

// RetryClass says what a caller may do after a refusal (docs/errors.md, "retry").
type RetryClass int

const (
	// RetryUnknown: the pair is not in this module's catalogue (a newer server, or not a
	// railfence refusal). Treat it as RetryFinal until the module is updated.
	RetryUnknown RetryClass = iota
	// RetryTransient: the same request may succeed later. A call protected against duplicates
	// (a read, or CreatePayout under the same Idempotency-Key) may be sent again with backoff,
	// never sooner than the retry hint.
	RetryTransient
	// RetryLater: the same request succeeds only once a condition clears (a lease expires, a
	// limit window resets); decide when, not before the retry hint. Do not loop on it.
	RetryLater
	// RetryCheckStatus: the request may already have taken effect. Never send it again; read
	// the status (GetSubmission) instead.
	RetryCheckStatus
	// RetryFinal: the same request gets the same answer. Change the request or stop.
	RetryFinal
)

// String is the class as docs/errors.md and the TypeScript client name it.
func (c RetryClass) String() string {
	switch c {
	case RetryTransient:
		return "transient"
	case RetryLater:
		return "later"
	case RetryCheckStatus:
		return "check-status"
	case RetryFinal:
		return "final"
	default:
		return "unknown"
	}
}

type catalogueEntry struct {
	code   codes.Code
	reason Reason
	retry  RetryClass
}

// RetryOf is the retry class of a (code, reason) answer; RetryUnknown when the catalogue has no
// such pair (code and reason are compared together, as every client should).
//
// A call without duplicate protection (SubmitPayout) is never retried, whatever the class.
func RetryOf(code codes.Code, reason Reason) RetryClass {
	for _, e := range catalogue {
		if e.code == code && e.reason == reason {
			return e.retry
		}
	}
	return RetryUnknown
}
