package main

import (
	"fmt"
	"time"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor/blob"
)

// budgetConfig is serve's memory and connection budgets: the one message
// size limit, the task store's and the blob store's bounds and quotas, and
// each listener's connection limits. Sizes are strings (4MiB), parsed by
// validate; "0" (or empty) means the default, derived from the memory limit
// admission control reads (--memory-limit, admit.Derive's reserve) when the
// service is built, as docs/flags.md says.
type budgetConfig struct {
	MaxMessage     string // --max-message
	TaskStoreBytes string // --task-store-bytes
	TaskQuota      int    // --task-quota
	TaskQuotaBytes string // --task-quota-bytes
	BlobStoreBytes string // --blob-store-bytes
	BlobQuotaBytes string // --blob-quota-bytes

	MaxConns        int           // --max-conns
	MaxConnsPerAddr int           // --max-conns-per-addr
	HeaderTimeout   time.Duration // --header-timeout
	BodyTimeout     time.Duration // --body-timeout
	IdleTimeout     time.Duration // --idle-timeout
}

// Bounds of --max-message.
const (
	minMaxMessage = 64 << 10
	maxMaxMessage = 64 << 20
)

func addBudgets(f *cli.Flags, c *budgetConfig) {
	f.EnvString(&c.MaxMessage, "max-message", "AGENT_MAX_MESSAGE", "4MiB", "the message size limit: a larger A2A message is refused (-32602), a body over it plus 1MiB gets 413, and a child's control frame holds it plus 1MiB")
	f.EnvString(&c.TaskStoreBytes, "task-store-bytes", "AGENT_TASK_STORE_BYTES", "0", "bytes of task snapshots (history, artifacts, metadata) the store holds (0: a quarter of the supervisor's reserve of --memory-limit, within 16MiB..1GiB)")
	f.EnvInt(&c.TaskQuota, "task-quota", "AGENT_TASK_QUOTA", 0, "tasks one caller may hold (0: --task-capacity/8)")
	f.EnvString(&c.TaskQuotaBytes, "task-quota-bytes", "AGENT_TASK_QUOTA_BYTES", "0", "bytes of tasks one caller may hold (0: max(--task-store-bytes/8, 2x --max-message + 1MiB))")
	f.EnvString(&c.BlobStoreBytes, "blob-store-bytes", "AGENT_BLOB_STORE_BYTES", "0", "bytes of blobs (stored distillates, large parts of finished tasks) held (0: an eighth of the supervisor's reserve, within 8MiB..512MiB)")
	f.EnvString(&c.BlobQuotaBytes, "blob-quota-bytes", "AGENT_BLOB_QUOTA_BYTES", "0", "bytes of blobs one caller may hold (0: max(--blob-store-bytes/8, --max-message + 1MiB))")
	f.EnvInt(&c.MaxConns, "max-conns", "AGENT_MAX_CONNS", server.DefaultMaxConns, "connections each listener (main, health, metrics) holds; more are closed at once")
	f.EnvInt(&c.MaxConnsPerAddr, "max-conns-per-addr", "AGENT_MAX_CONNS_PER_ADDR", server.DefaultMaxConnsPerAddr, "connections one client address may hold on each listener (-1: no per-address cap, behind a proxy)")
	f.EnvDuration(&c.HeaderTimeout, "header-timeout", "AGENT_HEADER_TIMEOUT", server.DefaultHeaderTimeout, "a request's TLS handshake and headers must arrive within this")
	f.EnvDuration(&c.BodyTimeout, "body-timeout", "AGENT_BODY_TIMEOUT", server.DefaultBodyTimeout, "a request's body must arrive within this after its headers (408 and the connection closed)")
	f.EnvDuration(&c.IdleTimeout, "idle-timeout", "AGENT_IDLE_TIMEOUT", server.DefaultIdleTimeout, "a keep-alive connection idle this long is closed")
}

// budgetSizes are the parsed sizes (0: derived).
type budgetSizes struct {
	maxMessage                uint64
	taskBytes, taskQuotaBytes uint64
	blobBytes, blobQuotaBytes uint64
}

// sizes parses the sizes; an error names the setting.
func (c *budgetConfig) sizes() (budgetSizes, error) {
	var s budgetSizes
	for _, p := range []struct {
		name, v string
		dst     *uint64
	}{
		{"max-message", c.MaxMessage, &s.maxMessage},
		{"task-store-bytes", c.TaskStoreBytes, &s.taskBytes}, {"task-quota-bytes", c.TaskQuotaBytes, &s.taskQuotaBytes},
		{"blob-store-bytes", c.BlobStoreBytes, &s.blobBytes}, {"blob-quota-bytes", c.BlobQuotaBytes, &s.blobQuotaBytes},
	} {
		if p.v == "" {
			continue
		}
		n, err := parseSize(p.v)
		if err != nil {
			return s, fmt.Errorf("--%s: %v", p.name, err)
		}
		*p.dst = n
	}
	if s.maxMessage == 0 {
		s.maxMessage = api.DefaultMaxMessage
	}
	if s.maxMessage < minMaxMessage || s.maxMessage > maxMaxMessage {
		return s, fmt.Errorf("--max-message %s: want %s to %s", c.MaxMessage, formatSize(minMaxMessage), formatSize(maxMaxMessage))
	}
	return s, nil
}

// validate checks what it can before the memory limit is read: the sizes,
// the relations between settings given explicitly, and the connection
// limits. capacity is --task-capacity.
func (c *budgetConfig) validate(capacity int) error {
	s, err := c.sizes()
	if err != nil {
		return err
	}
	switch q := c.TaskQuota; {
	case q < 0:
		return fmt.Errorf("--task-quota must not be negative (got %d)", q)
	case q > capacity:
		return fmt.Errorf("--task-quota %d is over --task-capacity %d", q, capacity)
	}
	if err := checkQuotas(s); err != nil {
		return err
	}
	_, err = c.connLimits()
	return err
}

// checkQuotas checks the byte quotas against their stores and the message
// limit, where both sides are known (0: not yet derived).
func checkQuotas(s budgetSizes) error {
	switch {
	case s.taskQuotaBytes > 0 && s.taskBytes > 0 && s.taskQuotaBytes > s.taskBytes:
		return fmt.Errorf("--task-quota-bytes %s is over --task-store-bytes %s", formatSize(s.taskQuotaBytes), formatSize(s.taskBytes))
	case s.taskQuotaBytes > 0 && s.taskQuotaBytes < s.maxMessage:
		return fmt.Errorf("--task-quota-bytes %s is under --max-message %s: a caller could not send its largest message", formatSize(s.taskQuotaBytes), formatSize(s.maxMessage))
	case s.taskBytes > 0 && s.taskBytes < s.maxMessage:
		return fmt.Errorf("--task-store-bytes %s is under --max-message %s: the store could not hold the largest message", formatSize(s.taskBytes), formatSize(s.maxMessage))
	case s.blobQuotaBytes > 0 && s.blobBytes > 0 && s.blobQuotaBytes > s.blobBytes:
		return fmt.Errorf("--blob-quota-bytes %s is over --blob-store-bytes %s", formatSize(s.blobQuotaBytes), formatSize(s.blobBytes))
	}
	return nil
}

// connLimits is each listener's connection limits.
func (c *budgetConfig) connLimits() (server.ConnLimits, error) {
	switch {
	case c.MaxConns <= 0:
		return server.ConnLimits{}, fmt.Errorf("--max-conns must be positive (got %d)", c.MaxConns)
	case c.MaxConnsPerAddr == 0 || c.MaxConnsPerAddr < -1:
		return server.ConnLimits{}, fmt.Errorf("--max-conns-per-addr must be positive, or -1 for no per-address cap (got %d)", c.MaxConnsPerAddr)
	case c.MaxConnsPerAddr > c.MaxConns:
		return server.ConnLimits{}, fmt.Errorf("--max-conns-per-addr %d is over --max-conns %d", c.MaxConnsPerAddr, c.MaxConns)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"header-timeout", c.HeaderTimeout}, {"body-timeout", c.BodyTimeout}, {"idle-timeout", c.IdleTimeout}} {
		if d.v <= 0 {
			return server.ConnLimits{}, fmt.Errorf("--%s must be a positive duration (got %s)", d.name, d.v)
		}
	}
	return server.ConnLimits{MaxConns: c.MaxConns, MaxConnsPerAddr: c.MaxConnsPerAddr,
		HeaderTimeout: c.HeaderTimeout, BodyTimeout: c.BodyTimeout, IdleTimeout: c.IdleTimeout}, nil
}

// budgets are the resolved budgets.
type budgets struct {
	maxMessage int
	tasks      tasks.MemoryLimits
	blobs      blob.Config
	conns      server.ConnLimits
}

// resolve derives the defaults for the supervisor's reserve (admit.Derive's,
// from the memory limit) and checks them against the settings given: a
// default that collides with one is bad config, naming both. capacity and
// retention are the task store's (--task-capacity, --task-retention).
func (c *budgetConfig) resolve(reserve uint64, capacity int, retention time.Duration) (budgets, error) {
	var b budgets
	s, err := c.sizes()
	if err != nil {
		return b, err
	}
	b.maxMessage = int(s.maxMessage)
	frame := uint64(api.FrameLimit(b.maxMessage))
	if s.taskBytes == 0 {
		s.taskBytes = max(uint64(budget.TaskStoreBytes(reserve)), 2*s.maxMessage+1<<20)
	}
	if s.taskQuotaBytes == 0 {
		s.taskQuotaBytes = min(max(s.taskBytes/8, 2*s.maxMessage+1<<20), s.taskBytes)
	}
	if s.blobBytes == 0 {
		s.blobBytes = max(uint64(budget.BlobStoreBytes(reserve)), frame)
	}
	if s.blobQuotaBytes == 0 {
		s.blobQuotaBytes = min(max(s.blobBytes/8, frame), s.blobBytes)
	}
	if err := checkQuotas(s); err != nil {
		return b, err
	}
	quota := c.TaskQuota
	if quota == 0 {
		quota = max(capacity/8, 1)
	}
	b.tasks = tasks.MemoryLimits{Capacity: capacity, Bytes: int64(s.taskBytes), QuotaTasks: quota, QuotaBytes: int64(s.taskQuotaBytes), Retention: retention}
	// One blob is at most a control frame (a child's blob/put arrives in
	// one), and an offloaded part at most a message.
	b.blobs = blob.Config{MaxBlobBytes: int(min(frame, s.blobQuotaBytes)), MaxTotalBytes: int64(s.blobBytes), QuotaBytes: int64(s.blobQuotaBytes), Retention: retention}
	if b.conns, err = c.connLimits(); err != nil {
		return b, err
	}
	return b, nil
}

// logAttrs are the resolved budgets for the "budgets" log line.
func (b budgets) logAttrs() []any {
	return []any{
		"max_message", b.maxMessage, "frame_limit", api.FrameLimit(b.maxMessage), "body_limit", server.BodyLimit(b.maxMessage),
		"task_store_bytes", b.tasks.Bytes, "task_quota", b.tasks.QuotaTasks, "task_quota_bytes", b.tasks.QuotaBytes,
		"blob_store_bytes", b.blobs.MaxTotalBytes, "blob_quota_bytes", b.blobs.QuotaBytes,
		"max_conns", b.conns.MaxConns, "max_conns_per_addr", b.conns.MaxConnsPerAddr,
	}
}
