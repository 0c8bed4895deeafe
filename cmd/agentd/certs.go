package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/tlsconfig"
)

// certsConfig is `agentd certs init`.
type certsConfig struct {
	TrustDomain string
	Dir         string
	Validity    time.Duration
	Force       bool
}

// parseCerts parses `certs init [flags]`; `certs -h` is the help of init.
func parseCerts(args []string, stderr io.Writer) (*certsConfig, error) {
	if len(args) > 0 && cli.IsHelp(args[0]) {
		// The only subcommand's help is the command's.
		args = []string{"init", "-h"}
	}
	if len(args) == 0 || args[0] != "init" {
		fmt.Fprintln(stderr, "Usage: agentd certs init --trust-domain TD --dir DIR [--validity D] [--force]")
		return nil, cli.UsageError("certs: the only subcommand is init")
	}
	c := &certsConfig{}
	f := cli.NewFlags("certs init", stderr, "Mints a development CA and SPIFFE X.509 SVIDs for local mTLS into --dir:\n"+
		"  ca.pem, ca-key.pem    the CA (keep the key private)\n"+
		"  bundle.pem            the trust bundle (--tls-bundle for everyone)\n"+
		"  server.pem, server-key.pem      spiffe://TD/agentd    (agentd serve --tls-cert/--tls-key)\n"+
		"  peer.pem, peer-key.pem          spiffe://TD/peer      (a client allowed by --allow-peer)\n"+
		"  operator.pem, operator-key.pem  spiffe://TD/operator  (a client allowed by --operator)\n"+
		"Not for production: use SPIRE (--spiffe-socket).")
	f.StringVar(&c.TrustDomain, "trust-domain", "", "the SPIFFE trust domain, e.g. example.org")
	f.StringVar(&c.Dir, "dir", "", "folder to write the files into (created 0700)")
	f.DurationVar(&c.Validity, "validity", 30*24*time.Hour, "how long the CA and the SVIDs are valid")
	f.BoolVar(&c.Force, "force", false, "replace existing files")
	if err := f.Parse(args[1:]); err != nil {
		return nil, err
	}
	if f.NArg() > 0 {
		return nil, cli.UsageError("certs init takes no arguments (got %q)", f.Args())
	}
	return c, nil
}

// Validate checks every setting and names the bad one.
func (c *certsConfig) Validate() error {
	if c.Dir == "" {
		return errors.New("--dir is required")
	}
	if _, err := c.trustDomain(); err != nil {
		return err
	}
	if c.Validity <= 0 {
		return fmt.Errorf("--validity must be positive (got %s)", c.Validity)
	}
	return nil
}

func (c *certsConfig) trustDomain() (spiffeid.TrustDomain, error) {
	td, err := spiffeid.TrustDomainFromString(c.TrustDomain)
	if err != nil || c.TrustDomain == "" {
		return td, fmt.Errorf("--trust-domain %q: want a trust domain name such as example.org", c.TrustDomain)
	}
	return td, nil
}

func runCerts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseCerts(args, stderr))
	if err != nil {
		return err
	}
	trust, _ := c.trustDomain() // checked by Validate
	set, err := tlsconfig.WriteDevSet(c.Dir, trust, c.Validity, c.Force)
	if err != nil {
		return fmt.Errorf("certs init: %w", err)
	}
	fmt.Fprintf(stdout, "trust domain %s, valid until %s\n", trust, set.CA.Cert.NotAfter.UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "  server   %s\n  peer     %s\n  operator %s\n", set.Server, set.Peer, set.Operator)
	for _, p := range set.Files {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	fmt.Fprintf(stdout, "\nagentd serve --listen 127.0.0.1:8443 --tls-cert %[1]s/server.pem --tls-key %[1]s/server-key.pem --tls-bundle %[1]s/bundle.pem --allow-peer %[2]s --operator %[3]s\n", c.Dir, set.Peer, set.Operator)
	return nil
}
