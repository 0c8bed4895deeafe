#!/usr/bin/env bash
# Builds spire-server and spire-agent (the version pinned in this folder's
# go.mod) from the Go module proxy into a cache outside the repository, once,
# and prints the folder. The first build takes about 25 minutes on 2 cores;
# later calls reuse the binaries.
set -euo pipefail
cd "$(dirname "$0")"
ver=$(awk '$1 == "github.com/spiffe/spire" {print $2}' go.mod)
out=${AGENTD_SPIRE_CACHE:-$HOME/.cache/agentd-spire/$ver}
if [ -x "$out/spire-server" ] && [ -x "$out/spire-agent" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"
echo "building spire-server and spire-agent $ver into $out (about 25 minutes the first time)" >&2
go build -o "$out/" github.com/spiffe/spire/cmd/spire-server github.com/spiffe/spire/cmd/spire-agent >&2
echo "$out"
