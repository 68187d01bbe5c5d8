package railfence

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSFiles names the PEM files of a mutual TLS identity: this service's certificate and key
// (issued for its railfence identity, e.g. spiffe://railfence/client) and the CA that signed
// the railfence servers' certificates.
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// MutualTLSConfig loads files into a client tls.Config: TLS 1.2 or newer, the server verified
// against the CA file only (not the system roots), this certificate presented on request.
func MutualTLSConfig(files TLSFiles) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("railfence: client certificate: %w", err)
	}
	pem, err := os.ReadFile(files.CAFile)
	if err != nil {
		return nil, fmt.Errorf("railfence: CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("railfence: CA file %s holds no PEM certificate", files.CAFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
	}, nil
}

// DialMutualTLS makes a client connection to target (host:port) over mutual TLS from files. The
// connection is lazy, as grpc.NewClient's are: a bad CA or a refused certificate shows on the
// first call, as codes.Unavailable with no railfence reason. Close it when done.
func DialMutualTLS(target string, files TLSFiles, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	config, err := MutualTLSConfig(files)
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(config))}, opts...)...)
}
