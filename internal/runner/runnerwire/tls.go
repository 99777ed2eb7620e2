package runnerwire

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"
)

// The control port serves HTTPS with a certificate made for one run. The manager derives the
// run's key pair from the run's control token (itself an HMAC of the run's UID under the
// manager's key), so it can remake the certificate at any time and never reads it back; it
// stores the pair in the run's token Secret for the pod, and its client accepts exactly that
// certificate and no other: no CA, no host names, no dates to check. This is how
// CloudNativePG's operator dials its instance managers, with a pin in place of its CA.
const (
	// TLSCertKey and TLSKeyKey are the token Secret's keys of the PEM certificate and key.
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
)

// Certificate is a run's control-port certificate.
type Certificate struct {
	// DER is the certificate, the bytes a client pins.
	DER []byte
	// CertPEM and KeyPEM are what the runner loads (--tls-cert-file, --tls-key-file).
	CertPEM, KeyPEM []byte
}

// RunCertificate derives the self-signed Ed25519 certificate of the run whose control token
// is token. Ed25519 signatures and DER are deterministic, so the same token always gives the
// same certificate, byte for byte.
func RunCertificate(token string) (Certificate, error) {
	if token == "" {
		return Certificate{}, errors.New("run certificate: empty control token")
	}
	seed := sha256.Sum256([]byte("vacuum-runner control-port key\x00" + token))
	key := ed25519.NewKeyFromSeed(seed[:])
	serial := new(big.Int).SetBytes(seed[:16])
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "vacuum-runner"},
		// The client pins the certificate and checks no dates; these are fixed so that the
		// certificate is the same whenever it is made.
		NotBefore:   time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:    time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Certificate{}, fmt.Errorf("run certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Certificate{}, fmt.Errorf("run certificate key: %w", err)
	}
	return Certificate{
		DER:     der,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}, nil
}

// ErrCertificateMismatch is returned (wrapped) when a runner presents another certificate
// than the pinned one.
var ErrCertificateMismatch = errors.New("the runner's certificate is not the run's")

// PinnedTLSConfig accepts exactly the certificate der and nothing else.
func PinnedTLSConfig(der []byte) *tls.Config {
	pin := bytes.Clone(der)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Chain and name verification are replaced by VerifyConnection's exact match with
		// the one certificate the manager made for this run.
		InsecureSkipVerify: true, //nolint:gosec // pinned in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, pin) {
				return ErrCertificateMismatch
			}
			return nil
		},
	}
}

// PinnedClient is an HTTP client for one runner's control port that accepts only the
// certificate der. It keeps no idle connections: a run is polled every few seconds, and a
// client per run must not leave connections behind when the run ends.
func PinnedClient(der []byte, timeout time.Duration) *http.Client {
	// No proxy: a runner is dialed on its pod IP.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
		TLSClientConfig:     PinnedTLSConfig(der),
		TLSHandshakeTimeout: timeout,
		DisableKeepAlives:   true,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// PinnedClientFromPEM is PinnedClient for a PEM certificate, as read from a token Secret.
func PinnedClientFromPEM(certPEM []byte, timeout time.Duration) (*http.Client, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("pinned certificate: no PEM CERTIFICATE block")
	}
	return PinnedClient(b.Bytes, timeout), nil
}
