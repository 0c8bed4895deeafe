package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/tlsconfig"
)

func runCerts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		// The only subcommand's help is the command's.
		return runCerts(ctx, []string{"init", "-h"}, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "init" {
		fmt.Fprintln(stderr, "Usage: agentd certs init --trust-domain TD --dir DIR [--validity D] [--force]")
		return usageError("certs: the only subcommand is init")
	}
	f := newFlags("certs init", stderr, "Mints a development CA and SPIFFE X.509 SVIDs for local mTLS into --dir:\n"+
		"  ca.pem, ca-key.pem    the CA (keep the key private)\n"+
		"  bundle.pem            the trust bundle (--tls-bundle for everyone)\n"+
		"  server.pem, server-key.pem      spiffe://TD/agentd    (agentd serve --tls-cert/--tls-key)\n"+
		"  peer.pem, peer-key.pem          spiffe://TD/peer      (a client allowed by --allow-peer)\n"+
		"  operator.pem, operator-key.pem  spiffe://TD/operator  (a client allowed by --operator)\n"+
		"Not for production: use SPIRE (--spiffe-socket).")
	td := f.String("trust-domain", "", "the SPIFFE trust domain, e.g. example.org")
	dir := f.String("dir", "", "folder to write the files into (created 0700)")
	validity := f.Duration("validity", 30*24*time.Hour, "how long the CA and the SVIDs are valid")
	force := f.Bool("force", false, "replace existing files")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("certs init takes no arguments (got %q)", f.Args())
	}
	if *dir == "" {
		return usageError("--dir is required")
	}
	trust, err := spiffeid.TrustDomainFromString(*td)
	if err != nil || *td == "" {
		return usageError("--trust-domain %q: want a trust domain name such as example.org", *td)
	}
	if *validity <= 0 {
		return usageError("--validity must be positive (got %s)", *validity)
	}
	set, err := tlsconfig.WriteDevSet(*dir, trust, *validity, *force)
	if err != nil {
		return fmt.Errorf("certs init: %w", err)
	}
	fmt.Fprintf(stdout, "trust domain %s, valid until %s\n", trust, set.CA.Cert.NotAfter.UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "  server   %s\n  peer     %s\n  operator %s\n", set.Server, set.Peer, set.Operator)
	for _, p := range set.Files {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	fmt.Fprintf(stdout, "\nagentd serve --listen 127.0.0.1:8443 --tls-cert %[1]s/server.pem --tls-key %[1]s/server-key.pem --tls-bundle %[1]s/bundle.pem --allow-peer %[2]s --operator %[3]s\n", *dir, set.Peer, set.Operator)
	return nil
}
