/*
Copyright 2026 The fencedlock Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package sqlfence is the storage-side fence for a SQL table: a write carrying fencing token t is
// applied to a row only if the token stored in that row is not greater than t, and the row then
// records t. A holder that lost its lock (paused, partitioned, or simply slow) and writes late with
// its old token is refused by the database itself, whatever the holder believes.
//
// The check and the write are one statement, so the database decides atomically:
//
//	UPDATE "accounts" SET "balance" = $1, "fence_token" = $2
//	WHERE "id" = $3 AND COALESCE("fence_token", 0) <= $2
//
// The textbook fence refuses equal tokens (fence_token < $token) so that each token writes once.
// Here an equal token is admitted, as fencedlock's admission webhook does: the same holder may
// write the same row several times (retries, multi-step jobs), and only a strictly lower token,
// that is an earlier holder, is refused. A NULL token counts as 0: the row has never been written
// under a lock.
//
// The table needs a token column, bigint (tokens above 2^63-1 are refused before any statement):
//
//	ALTER TABLE accounts ADD COLUMN fence_token bigint NOT NULL DEFAULT 0;
//
// A Kubernetes Job whose pod template carries the label fencedlock.io/lock runs only once granted
// the lock, and reads its token through the downward API:
//
//	env:
//	- name: FENCING_TOKEN
//	  valueFrom:
//	    fieldRef:
//	      fieldPath: metadata.annotations['fencedlock.io/token']
//
// It then presents that token with each write:
//
//	tok, err := token.Parse(os.Getenv("FENCING_TOKEN"))
//	if err != nil {
//		return err
//	}
//	accounts := sqlfence.Table{Name: "accounts", Key: "id", Lock: "default/ledger"}
//	err = accounts.Update(ctx, db, 42, tok, map[string]any{"balance": 100})
//	var stale *fence.StaleTokenError
//	if errors.As(err, &stale) {
//		// A later holder has written this row: stop, do not retry with the same token.
//	}
//
// Statements use PostgreSQL's $n placeholders and go through database/sql, so any PostgreSQL
// driver works (pgx's stdlib, lib/pq). Upsert's INSERT ... ON CONFLICT ... DO UPDATE ... WHERE is
// PostgreSQL (9.5+) and SQLite (3.24+) syntax.
package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fencedlock/fencedlock/pkg/fence"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// DefaultTokenColumn is the token column used when Table.TokenColumn is empty.
const DefaultTokenColumn = "fence_token"

// ErrNoRow is returned (wrapped, with the table and key) by Update when no row has the key.
var ErrNoRow = errors.New("no such row")

// ErrInvalid is returned (wrapped) for a call that cannot be turned into a statement: empty or
// malformed identifiers, a nil key, a zero or out-of-range token. Nothing is sent to the database.
var ErrInvalid = errors.New("invalid sqlfence call")

// Execer runs statements. *sql.DB, *sql.Tx and *sql.Conn satisfy it; pass a *sql.Tx to make the
// fenced write part of a larger transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Execer = (*sql.DB)(nil)
	_ Execer = (*sql.Tx)(nil)
	_ Execer = (*sql.Conn)(nil)
)

// Table describes a fenced table. Identifiers are used verbatim and always quoted, so they are
// case-sensitive: a table created as CREATE TABLE Accounts is named "accounts".
type Table struct {
	// Schema optionally qualifies Name.
	Schema string
	// Name is the table's name.
	Name string
	// Key is the column that identifies a row; Upsert needs a unique constraint on it.
	Key string
	// TokenColumn holds the token of the last accepted write; DefaultTokenColumn when empty.
	TokenColumn string
	// Lock names the lock whose tokens fence this table, as namespace/name. It only fills
	// fence.StaleTokenError.Lock.
	Lock string
}

// Update sets the given columns of the row whose key is id, and its token column to tok, if the
// row's token is not greater than tok. It returns an error wrapping ErrNoRow if no row has that
// key, and one wrapping *fence.StaleTokenError (ByObject set) if the row was written with a
// greater token. An empty values map only raises the row's token.
func (t Table) Update(ctx context.Context, db Execer, id any, tok token.Token, values map[string]any) error {
	return t.write(ctx, db, id, tok, values, false)
}

// Upsert inserts the row whose key is id with the given columns and token tok or, if the key
// exists, updates it as Update does, if its token is not greater than tok. It returns an error
// wrapping *fence.StaleTokenError (ByObject set) if the row was written with a greater token.
// The key column needs a unique constraint (or be the primary key) for ON CONFLICT.
func (t Table) Upsert(ctx context.Context, db Execer, id any, tok token.Token, values map[string]any) error {
	return t.write(ctx, db, id, tok, values, true)
}

// write runs one fenced statement, an update or an upsert, and explains a refusal.
func (t Table) write(ctx context.Context, db Execer, id any, tok token.Token, values map[string]any,
	upsert bool) error {
	build, verb := t.updateSQL, "update"
	if upsert {
		build, verb = t.upsertSQL, "upsert"
	}
	q, args, err := build(id, tok, values)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("fenced %s of %s: %w", verb, t.row(id), err)
	}
	if applied, err := affected(res); err != nil || applied {
		return err
	}
	return t.explain(ctx, db, id, tok, upsert)
}

// updateSQL builds
//
//	UPDATE t SET c1 = $1, ..., tok = $n+1 WHERE key = $n+2 AND COALESCE(tok, 0) <= $n+1
//
// with the columns sorted, so the same call always yields the same statement.
func (t Table) updateSQL(id any, tok token.Token, values map[string]any) (string, []any, error) {
	cols, err := t.check(id, tok, values)
	if err != nil {
		return "", nil, err
	}
	tc := quoteIdent(t.tokenColumn())
	args := make([]any, 0, len(cols)+2)
	var b strings.Builder
	b.WriteString("UPDATE " + t.quotedName() + " SET ")
	for _, c := range cols {
		args = append(args, values[c])
		b.WriteString(quoteIdent(c) + " = $" + strconv.Itoa(len(args)) + ", ")
	}
	args = append(args, int64(tok))
	tp := "$" + strconv.Itoa(len(args))
	args = append(args, id)
	b.WriteString(tc + " = " + tp + " WHERE " + quoteIdent(t.Key) + " = $" + strconv.Itoa(len(args)) +
		" AND COALESCE(" + tc + ", 0) <= " + tp)
	return b.String(), args, nil
}

// upsertSQL builds
//
//	INSERT INTO t (key, c1, ..., tok) VALUES ($1, $2, ..., $n+2)
//	ON CONFLICT (key) DO UPDATE SET c1 = EXCLUDED.c1, ..., tok = EXCLUDED.tok
//	WHERE COALESCE(t.tok, 0) <= EXCLUDED.tok
//
// The existing row is referred to by the unqualified table name, which names the target table
// whether or not it is schema-qualified.
func (t Table) upsertSQL(id any, tok token.Token, values map[string]any) (string, []any, error) {
	cols, err := t.check(id, tok, values)
	if err != nil {
		return "", nil, err
	}
	name, key, tc := t.quotedName(), quoteIdent(t.Key), quoteIdent(t.tokenColumn())
	args := make([]any, 0, len(cols)+2)
	names := make([]string, 0, len(cols)+2)
	params := make([]string, 0, len(cols)+2)
	set := make([]string, 0, len(cols)+1)
	add := func(col string, v any) {
		args = append(args, v)
		names = append(names, col)
		params = append(params, "$"+strconv.Itoa(len(args)))
	}
	add(key, id)
	for _, c := range cols {
		qc := quoteIdent(c)
		add(qc, values[c])
		set = append(set, qc+" = EXCLUDED."+qc)
	}
	add(tc, int64(tok))
	set = append(set, tc+" = EXCLUDED."+tc)
	q := "INSERT INTO " + name + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(params, ", ") +
		") ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(set, ", ") +
		" WHERE COALESCE(" + quoteIdent(t.Name) + "." + tc + ", 0) <= EXCLUDED." + tc
	return q, args, nil
}

// explain tells why a fenced write affected no row. The refusal itself was decided atomically by
// the write; this follow-up read only finds the token it lost to, for the error. Between the two
// statements the row may change: a later holder may raise its token further (the error then names
// that later token, still a refusal), or, for writers that bypass the fence, the row may be
// inserted or deleted. Tokens only grow under the fence, so a stored token greater than tok now was
// greater at the write too.
func (t Table) explain(ctx context.Context, db Execer, id any, tok token.Token, upsert bool) error {
	q := "SELECT " + quoteIdent(t.tokenColumn()) + " FROM " + t.quotedName() + " WHERE " + quoteIdent(t.Key) + " = $1"
	var stored sql.NullInt64
	err := db.QueryRowContext(ctx, q, id).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if upsert {
			// The row existed when the upsert was refused and has been deleted since.
			return fmt.Errorf("fenced upsert of %s with token %s was refused, "+
				"but the row has been deleted since; retry", t.row(id), tok)
		}
		return fmt.Errorf("%s: %w", t.row(id), ErrNoRow)
	case err != nil:
		return fmt.Errorf("fenced write of %s with token %s was not applied; reading the row's token: %w",
			t.row(id), tok, err)
	case stored.Valid && stored.Int64 > 0 && token.Token(stored.Int64) > tok:
		return fmt.Errorf("%s: %w", t.row(id), &fence.StaleTokenError{
			Lock: t.Lock, Presented: tok, Current: token.Token(stored.Int64), ByObject: true})
	case upsert:
		return fmt.Errorf("fenced upsert of %s with token %s was refused, "+
			"but the row has been rewritten since outside the fence; retry", t.row(id), tok)
	default:
		// The row did not exist when the update ran, and has been inserted since.
		return fmt.Errorf("%s: %w when the fenced update ran (it has been inserted since)", t.row(id), ErrNoRow)
	}
}

// check validates a call and returns its value columns, sorted.
func (t Table) check(id any, tok token.Token, values map[string]any) ([]string, error) {
	if t.Schema != "" {
		if err := checkIdent("schema", t.Schema); err != nil {
			return nil, err
		}
	}
	if err := checkIdent("table name", t.Name); err != nil {
		return nil, err
	}
	if err := checkIdent("key column", t.Key); err != nil {
		return nil, err
	}
	tc := t.tokenColumn()
	if err := checkIdent("token column", tc); err != nil {
		return nil, err
	}
	if tc == t.Key {
		return nil, fmt.Errorf("%w: token column %q is also the key column", ErrInvalid, tc)
	}
	if id == nil {
		return nil, fmt.Errorf("%w: nil key for table %s", ErrInvalid, t.quotedName())
	}
	if tok.IsZero() {
		return nil, fmt.Errorf("%w: zero fencing token for %s: a fenced write needs the token its lock granted",
			ErrInvalid, t.row(id))
	}
	if tok > math.MaxInt64 {
		return nil, fmt.Errorf("%w: fencing token %s does not fit the bigint token column", ErrInvalid, tok)
	}
	cols := slices.Sorted(maps.Keys(values))
	for _, c := range cols {
		if err := checkIdent("value column", c); err != nil {
			return nil, err
		}
		if c == t.Key || c == tc {
			return nil, fmt.Errorf("%w: value column %q is the key or token column, which the fence sets",
				ErrInvalid, c)
		}
	}
	return cols, nil
}

func checkIdent(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalid, what, s)
	}
	return nil
}

func (t Table) tokenColumn() string {
	if t.TokenColumn == "" {
		return DefaultTokenColumn
	}
	return t.TokenColumn
}

func (t Table) quotedName() string {
	if t.Schema != "" {
		return quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	}
	return quoteIdent(t.Name)
}

// row names a row in messages.
func (t Table) row(id any) string {
	return fmt.Sprintf("row %s=%v of table %s", quoteIdent(t.Key), id, t.quotedName())
}

// quoteIdent quotes an SQL identifier: double quotes, with embedded double quotes doubled. Values
// are never quoted: they always go as placeholders.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// affected reports whether the write changed a row.
func affected(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("fenced write: the driver cannot report affected rows: %w", err)
	}
	return n > 0, nil
}
