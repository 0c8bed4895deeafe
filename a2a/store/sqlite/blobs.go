package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/supervisor/blob"
)

var _ blob.Backend = (*Store)(nil)

// SaveBlob implements blob.Backend.
func (s *Store) SaveBlob(ctx context.Context, b blob.Stored) error {
	return s.write(ctx, "store distillate", func(tx *wtx) error {
		_, err := tx.ExecContext(ctxBG, `INSERT INTO blobs (id, owner, run_id, media_type, size, created_ns, expires_ns, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.Owner, b.RunID, b.MediaType, len(b.Content), store.Nanos(b.Created), nullTime(b.Expires), b.Content)
		if err != nil {
			return s.unavailable("store distillate", err)
		}
		return nil
	})
}

// LoadBlob implements blob.Backend.
func (s *Store) LoadBlob(ctx context.Context, id string) ([]byte, bool, error) {
	var content []byte
	err := s.rs.QueryRowContext(ctx, `SELECT content FROM blobs WHERE id = ?`, id).Scan(&content)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.unavailable("read distillate", err)
	}
	if content == nil {
		content = []byte{}
	}
	return content, true, nil
}

// ExpireBlobs implements blob.Backend.
func (s *Store) ExpireBlobs(ctx context.Context, owner string, at time.Time) error {
	return s.write(ctx, "expire distillates", func(tx *wtx) error {
		if _, err := tx.ExecContext(ctxBG, `UPDATE blobs SET expires_ns = ? WHERE owner = ? AND expires_ns IS NULL`, store.Nanos(at), owner); err != nil {
			return s.unavailable("expire distillates", err)
		}
		return nil
	})
}

// DeleteBlob implements blob.Backend.
func (s *Store) DeleteBlob(ctx context.Context, id string) error {
	return s.write(ctx, "delete distillate", func(tx *wtx) error {
		if _, err := tx.ExecContext(ctxBG, `DELETE FROM blobs WHERE id = ?`, id); err != nil {
			return s.unavailable("delete distillate", err)
		}
		return nil
	})
}

// BlobIndex implements blob.Backend. A blob's caller, whose quota
// it counts against, is the creator of its root task (the tasks table's owner;
// the anonymous caller once the task is gone).
func (s *Store) BlobIndex(ctx context.Context) ([]blob.Stored, error) {
	rows, err := s.rs.QueryContext(ctx, `SELECT b.id, b.owner, coalesce(t.owner, ''), b.run_id, b.media_type, b.size, b.created_ns, b.expires_ns
		FROM blobs b LEFT JOIN tasks t ON t.id = b.owner ORDER BY b.created_ns`)
	if err != nil {
		return nil, s.unavailable("list distillates", err)
	}
	defer rows.Close()
	var out []blob.Stored
	for rows.Next() {
		var b blob.Stored
		var created int64
		var expires sql.NullInt64
		if err := rows.Scan(&b.ID, &b.Owner, &b.Caller, &b.RunID, &b.MediaType, &b.Size, &created, &expires); err != nil {
			return nil, s.unavailable("list distillates", err)
		}
		b.Created = time.Unix(0, created)
		if expires.Valid {
			b.Expires = time.Unix(0, expires.Int64)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list distillates", err)
	}
	return out, nil
}

// nullTime is a time as a nullable column: NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}
