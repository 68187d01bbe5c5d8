package railfence

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// refused builds the status a railfence server sends: code, ErrorInfo, optionally RetryInfo.
func refused(t *testing.T, code codes.Code, domain string, reason Reason, retry time.Duration) error {
	t.Helper()
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Domain: domain, Reason: string(reason), Metadata: map[string]string{"field": "amount"}}}
	if retry > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	}
	st, err := status.New(code, "refused").WithDetails(details...)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestRefusalReadsReasonRetryClassAndHint(t *testing.T) {
	err := fmt.Errorf("create payout: %w", refused(t, codes.Unavailable, Domain, ReasonUnavailable, 1500*time.Millisecond))
	reason, retry, after, ok := Refusal(err)
	if !ok || reason != ReasonUnavailable || retry != RetryTransient || after != 1500*time.Millisecond {
		t.Fatalf("Refusal = %q, %v, %v, %v; want UNAVAILABLE, transient, 1.5s, true", reason, retry, after, ok)
	}
}

func TestRefusalUsesTheCodeToFindTheRetryClass(t *testing.T) {
	if _, retry, _, _ := Refusal(refused(t, codes.InvalidArgument, Domain, ReasonAmountInvalid, 0)); retry != RetryFinal {
		t.Fatalf("AMOUNT_INVALID under invalid_argument: retry %v, want final", retry)
	}
	// The same reason with a code the catalogue does not pair it with is not guessed.
	if _, retry, _, ok := Refusal(refused(t, codes.Unavailable, Domain, ReasonAmountInvalid, 0)); !ok || retry != RetryUnknown {
		t.Fatalf("AMOUNT_INVALID under unavailable: retry %v ok %v, want unknown, true", retry, ok)
	}
}

func TestRefusalIgnoresOtherDomainsAndPlainErrors(t *testing.T) {
	if _, _, _, ok := Refusal(refused(t, codes.InvalidArgument, "example.com", ReasonAmountInvalid, 0)); ok {
		t.Fatal("an ErrorInfo of another domain was read as a railfence refusal")
	}
	if _, _, _, ok := Refusal(status.Error(codes.Unavailable, "connection refused")); ok {
		t.Fatal("a status without ErrorInfo was read as a railfence refusal")
	}
	if _, _, _, ok := Refusal(errors.New("not a status")); ok {
		t.Fatal("a plain error was read as a railfence refusal")
	}
	if _, _, _, ok := Refusal(nil); ok {
		t.Fatal("nil was read as a railfence refusal")
	}
}

func TestEveryCatalogueReasonHasAKnownRetryClass(t *testing.T) {
	if len(catalogue) < 50 {
		t.Fatalf("catalogue has %d entries; reasons.go looks truncated", len(catalogue))
	}
	for _, e := range catalogue {
		if RetryOf(e.code, e.reason) == RetryUnknown || e.retry.String() == "unknown" {
			t.Errorf("%s/%s has no retry class", e.code, e.reason)
		}
	}
}
