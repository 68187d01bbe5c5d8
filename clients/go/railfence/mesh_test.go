package railfence_test

// Calls against a running railfence mesh over mutual TLS, the way a Go service calls it. The
// mesh is named by environment variables (test/clients/go-client.test.ts starts one and sets
// them); without them every test here skips, so a plain `go test ./...` is harmless. The
// TypeScript wrapper fails on a skip: a skipped test proves nothing.
//
//	RAILFENCE_GO_TEST_PAYOUTS     host:port of a payouts server
//	RAILFENCE_GO_TEST_RAIL_PROXY  host:port of a rail-proxy (a call this identity may not make)
//	RAILFENCE_GO_TEST_CERT, RAILFENCE_GO_TEST_KEY, RAILFENCE_GO_TEST_CA  PEM files: the caller's
//	                              certificate and key (identity "client") and the mesh's CA

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	commonv1 "github.com/railfence/railfence/clients/go/gen/railfence/common/v1"
	payoutsv1 "github.com/railfence/railfence/clients/go/gen/railfence/payouts/v1"
	railproxyv1 "github.com/railfence/railfence/clients/go/gen/railfence/railproxy/v1"
	"github.com/railfence/railfence/clients/go/railfence"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// meshConn dials the server named by addrVar over mutual TLS, or skips the test.
func meshConn(t *testing.T, addrVar string) *grpc.ClientConn {
	t.Helper()
	env := map[string]string{}
	for _, name := range []string{addrVar, "RAILFENCE_GO_TEST_CERT", "RAILFENCE_GO_TEST_KEY", "RAILFENCE_GO_TEST_CA"} {
		env[name] = os.Getenv(name)
		if env[name] == "" {
			t.Skipf("%s is not set: no mesh to call (npm test runs this against one)", name)
		}
	}
	conn, err := railfence.DialMutualTLS(env[addrVar], railfence.TLSFiles{
		CertFile: env["RAILFENCE_GO_TEST_CERT"],
		KeyFile:  env["RAILFENCE_GO_TEST_KEY"],
		CAFile:   env["RAILFENCE_GO_TEST_CA"],
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMeshHealthCheck(t *testing.T) {
	conn := meshConn(t, "RAILFENCE_GO_TEST_PAYOUTS")
	res, err := grpc_health_v1.NewHealthClient(conn).Check(callContext(t), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	if res.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, want SERVING", res.GetStatus())
	}
}

func TestMeshCreatePayoutReplayGivesTheSamePayout(t *testing.T) {
	payouts := payoutsv1.NewPayoutServiceClient(meshConn(t, "RAILFENCE_GO_TEST_PAYOUTS"))
	key := rand.Text()
	req := &payoutsv1.CreatePayoutRequest{
		AccountId:       "acct-go",
		Amount:          &commonv1.Money{AmountMinor: 4200, Currency: "EUR"},
		Beneficiary:     "iban:DE89370400440532013000",
		ClientReference: "go-client " + key,
	}
	first, err := payouts.CreatePayout(railfence.WithIdempotencyKey(callContext(t), key), req)
	if err != nil {
		t.Fatalf("CreatePayout: %v", err)
	}
	id := first.GetPayout().GetPayoutId()
	if id == "" || first.GetPayout().GetAmount().GetAmountMinor() != 4200 {
		t.Fatalf("CreatePayout answered %v", first.GetPayout())
	}
	replay, err := payouts.CreatePayout(railfence.WithIdempotencyKey(callContext(t), key), req)
	if err != nil {
		t.Fatalf("CreatePayout replay: %v", err)
	}
	if replay.GetPayout().GetPayoutId() != id {
		t.Fatalf("the replay under the same key made payout %s, the first call %s", replay.GetPayout().GetPayoutId(), id)
	}
	got, err := payouts.GetPayout(callContext(t), &payoutsv1.GetPayoutRequest{PayoutId: id})
	if err != nil || got.GetPayout().GetPayoutId() != id {
		t.Fatalf("GetPayout(%s): %v, %v", id, got, err)
	}
}

// expectRefusal fails unless err is a railfence refusal with code, reason and retry class.
func expectRefusal(t *testing.T, err error, code codes.Code, reason railfence.Reason, retry railfence.RetryClass) {
	t.Helper()
	got, class, _, ok := railfence.Refusal(err)
	if !ok {
		t.Fatalf("not a railfence refusal: %v", err)
	}
	if status.Code(err) != code || got != reason || class != retry {
		t.Fatalf("refusal %s %s (%s), want %s %s (%s): %v", status.Code(err), got, class, code, reason, retry, err)
	}
}

func TestMeshRefusalInvalidAmount(t *testing.T) {
	payouts := payoutsv1.NewPayoutServiceClient(meshConn(t, "RAILFENCE_GO_TEST_PAYOUTS"))
	_, err := payouts.CreatePayout(railfence.WithIdempotencyKey(callContext(t), rand.Text()), &payoutsv1.CreatePayoutRequest{
		AccountId:   "acct-go",
		Amount:      &commonv1.Money{AmountMinor: -5, Currency: "EUR"},
		Beneficiary: "iban:DE89370400440532013000",
	})
	expectRefusal(t, err, codes.InvalidArgument, railfence.ReasonAmountInvalid, railfence.RetryFinal)
}

func TestMeshRefusalForbiddenCall(t *testing.T) {
	// The caller's identity ("client") may use the payouts API, not the rail-proxy.
	proxy := railproxyv1.NewRailProxyServiceClient(meshConn(t, "RAILFENCE_GO_TEST_RAIL_PROXY"))
	_, err := proxy.GetSubmission(callContext(t), &railproxyv1.GetSubmissionRequest{PayoutId: fmt.Sprintf("po-%d", time.Now().UnixNano())})
	expectRefusal(t, err, codes.PermissionDenied, railfence.ReasonPermissionDenied, railfence.RetryFinal)
}
