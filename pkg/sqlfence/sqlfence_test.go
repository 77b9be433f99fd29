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

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedlock/fencedlock/pkg/fence"
	"github.com/fencedlock/fencedlock/pkg/sqlfence"
	"github.com/fencedlock/fencedlock/pkg/token"
)

const lockName = "default/ledger"

// TestFence runs the fence against a real PostgreSQL server, started once for all subtests.
func TestFence(t *testing.T) {
	db := startPostgres(t)
	t.Run("Sequence", func(t *testing.T) { testSequence(t, db) })
	t.Run("Transaction", func(t *testing.T) { testTransaction(t, db) })
	t.Run("QuotedIdentifiers", func(t *testing.T) { testQuotedIdentifiers(t, db) })
	t.Run("NullToken", func(t *testing.T) { testNullToken(t, db) })
	t.Run("ConcurrentUpdates", func(t *testing.T) { testConcurrentUpdates(t, db) })
	t.Run("ConcurrentUpserts", func(t *testing.T) { testConcurrentUpserts(t, db) })
}

type account struct {
	Owner   string
	Balance int64
	Token   int64
}

func readAccount(t *testing.T, db *sql.DB, table string, id int) account {
	t.Helper()
	var a account
	err := db.QueryRowContext(t.Context(),
		"SELECT owner, balance, fence_token FROM "+table+" WHERE id = $1", id).Scan(&a.Owner, &a.Balance, &a.Token)
	if err != nil {
		t.Fatalf("reading %s id %d: %v", table, id, err)
	}
	return a
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// wantStale checks that err is a refusal of presented, which lost to current.
func wantStale(t *testing.T, err error, presented, current token.Token) {
	t.Helper()
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("error = %v, want a *fence.StaleTokenError", err)
	}
	want := fence.StaleTokenError{Lock: lockName, Presented: presented, Current: current, ByObject: true}
	if *stale != want {
		t.Fatalf("StaleTokenError = %+v, want %+v", *stale, want)
	}
}

func testSequence(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	mustExec(t, db, `CREATE TABLE accounts (
		id bigint PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL,
		fence_token bigint NOT NULL DEFAULT 0)`)
	tbl := sqlfence.Table{Name: "accounts", Key: "id", Lock: lockName}
	check := func(want account) {
		t.Helper()
		if got := readAccount(t, db, "accounts", 1); got != want {
			t.Fatalf("row = %+v, want %+v", got, want)
		}
	}

	// The first write creates the row.
	if err := tbl.Upsert(ctx, db, 1, 10, map[string]any{"owner": "alice", "balance": 100}); err != nil {
		t.Fatalf("Upsert(10) on a new row: %v", err)
	}
	check(account{"alice", 100, 10})

	// The same holder writes again with the same token.
	if err := tbl.Update(ctx, db, 1, 10, map[string]any{"balance": 110}); err != nil {
		t.Fatalf("Update(10) after a write with 10: %v", err)
	}
	check(account{"alice", 110, 10})

	// A later holder.
	if err := tbl.Update(ctx, db, 1, 12, map[string]any{"balance": 120}); err != nil {
		t.Fatalf("Update(12): %v", err)
	}
	check(account{"alice", 120, 12})

	// An earlier holder writing late is refused and changes nothing.
	err := tbl.Update(ctx, db, 1, 11, map[string]any{"owner": "mallory", "balance": 999})
	wantStale(t, err, 11, 12)
	check(account{"alice", 120, 12})
	t.Logf("stale update: %v", err)

	err = tbl.Upsert(ctx, db, 1, 11, map[string]any{"owner": "mallory", "balance": 999})
	wantStale(t, err, 11, 12)
	check(account{"alice", 120, 12})

	// Upsert with an equal token updates only the given columns.
	if err := tbl.Upsert(ctx, db, 1, 12, map[string]any{"owner": "alice", "balance": 121}); err != nil {
		t.Fatalf("Upsert(12) after a write with 12: %v", err)
	}
	check(account{"alice", 121, 12})

	// No values: the token alone is raised, fencing out holder 12.
	if err := tbl.Update(ctx, db, 1, 13, nil); err != nil {
		t.Fatalf("Update(13) without values: %v", err)
	}
	check(account{"alice", 121, 13})
	wantStale(t, tbl.Update(ctx, db, 1, 12, map[string]any{"balance": 0}), 12, 13)

	// A missing row is not a stale token, and Update does not create it.
	err = tbl.Update(ctx, db, 2, 20, map[string]any{"owner": "bob", "balance": 1})
	if !errors.Is(err, sqlfence.ErrNoRow) {
		t.Fatalf("Update on a missing row: error = %v, want ErrNoRow", err)
	}
	if _, ok := errors.AsType[*fence.StaleTokenError](err); ok {
		t.Fatalf("Update on a missing row: error %v is also a StaleTokenError", err)
	}
	t.Logf("missing row: %v", err)
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM accounts").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows = %d (%v), want 1", n, err)
	}
}

func testTransaction(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	mustExec(t, db, `CREATE TABLE tx_accounts (
		id bigint PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL,
		fence_token bigint NOT NULL DEFAULT 0)`)
	tbl := sqlfence.Table{Name: "tx_accounts", Key: "id", Lock: lockName}
	if err := tbl.Upsert(ctx, db, 1, 5, map[string]any{"owner": "alice", "balance": 1}); err != nil {
		t.Fatal(err)
	}

	// A fenced write inside a transaction is undone by its rollback.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Update(ctx, tx, 1, 7, map[string]any{"balance": 7}); err != nil {
		t.Fatalf("Update in a transaction: %v", err)
	}
	wantStale(t, tbl.Update(ctx, tx, 1, 6, map[string]any{"balance": 6}), 6, 7)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got, want := readAccount(t, db, "tx_accounts", 1), (account{"alice", 1, 5}); got != want {
		t.Fatalf("after rollback: row = %+v, want %+v", got, want)
	}

	// A *sql.Conn works too.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := tbl.Update(ctx, conn, 1, 6, map[string]any{"balance": 6}); err != nil {
		t.Fatalf("Update on a *sql.Conn: %v", err)
	}
	if got, want := readAccount(t, db, "tx_accounts", 1), (account{"alice", 6, 6}); got != want {
		t.Fatalf("row = %+v, want %+v", got, want)
	}
}

func testQuotedIdentifiers(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	const (
		schema = `s"ch`
		name   = `weird"name`
		key    = `K"ey`
		val    = `va"l ue`
		evil   = `x"; DROP TABLE accounts; --`
		tokCol = `To"ken`
	)
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() } // an independent quoting
	mustExec(t, db,
		"CREATE SCHEMA "+q(schema),
		"CREATE TABLE "+q(name)+" ("+q(key)+" text PRIMARY KEY, "+q(val)+" text, "+q(evil)+" int, "+
			q(tokCol)+" bigint NOT NULL DEFAULT 0)",
		"CREATE TABLE "+q(schema)+"."+q(name)+" ("+q(key)+" text PRIMARY KEY, "+q(val)+" text, "+
			q(evil)+" int, "+q(tokCol)+" bigint NOT NULL DEFAULT 0)")

	for _, tbl := range []sqlfence.Table{
		{Name: name, Key: key, TokenColumn: tokCol, Lock: lockName},
		{Schema: schema, Name: name, Key: key, TokenColumn: tokCol, Lock: lockName},
	} {
		full := q(name)
		if tbl.Schema != "" {
			full = q(schema) + "." + q(name)
		}
		const id = `o'brien"; --`
		if err := tbl.Upsert(ctx, db, id, 3, map[string]any{val: "v3", evil: 3}); err != nil {
			t.Fatalf("%s: Upsert: %v", full, err)
		}
		if err := tbl.Upsert(ctx, db, id, 4, map[string]any{val: "v4", evil: 4}); err != nil {
			t.Fatalf("%s: Upsert: %v", full, err)
		}
		if err := tbl.Update(ctx, db, id, 5, map[string]any{val: "v5"}); err != nil {
			t.Fatalf("%s: Update: %v", full, err)
		}
		wantStale(t, tbl.Update(ctx, db, id, 4, map[string]any{val: "late"}), 4, 5)
		wantStale(t, tbl.Upsert(ctx, db, id, 4, map[string]any{val: "late"}), 4, 5)
		if err := tbl.Update(ctx, db, "nobody", 5, map[string]any{val: "x"}); !errors.Is(err, sqlfence.ErrNoRow) {
			t.Fatalf("%s: Update of a missing row: %v, want ErrNoRow", full, err)
		}

		var v string
		var e, tok int64
		err := db.QueryRowContext(ctx, "SELECT "+q(val)+", "+q(evil)+", "+q(tokCol)+" FROM "+full+
			" WHERE "+q(key)+" = $1", id).Scan(&v, &e, &tok)
		if err != nil {
			t.Fatal(err)
		}
		if v != "v5" || e != 4 || tok != 5 {
			t.Fatalf("%s: row = (%q, %d, %d), want (\"v5\", 4, 5)", full, v, e, tok)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM accounts").Scan(&n); err != nil {
		t.Fatalf("table accounts after writes to a column named %q: %v", evil, err)
	}
}

// testNullToken checks that a row whose token column is NULL (a column added without a default)
// counts as never written under a lock.
func testNullToken(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	mustExec(t, db,
		"CREATE TABLE legacy (id int PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL)",
		"INSERT INTO legacy VALUES (1, 'alice', 1)",
		"ALTER TABLE legacy ADD COLUMN fence_token bigint")
	tbl := sqlfence.Table{Name: "legacy", Key: "id", Lock: lockName}
	if err := tbl.Update(ctx, db, 1, 1, map[string]any{"balance": 2}); err != nil {
		t.Fatalf("Update of a row with a NULL token: %v", err)
	}
	if got, want := readAccount(t, db, "legacy", 1), (account{"alice", 2, 1}); got != want {
		t.Fatalf("row = %+v, want %+v", got, want)
	}
	mustExec(t, db, "INSERT INTO legacy VALUES (2, 'bob', 1, NULL)")
	if err := tbl.Upsert(ctx, db, 2, 1, map[string]any{"owner": "bob", "balance": 2}); err != nil {
		t.Fatalf("Upsert of a row with a NULL token: %v", err)
	}
	if got, want := readAccount(t, db, "legacy", 2), (account{"bob", 2, 1}); got != want {
		t.Fatalf("row = %+v, want %+v", got, want)
	}
}

// concurrentTable creates a table whose trigger logs, in commit order, the token of every write
// applied to it: the trigger runs while the write holds the row lock, until its commit, so the
// order of the log's sequence numbers is the order in which writes to a row were committed.
func concurrentTable(t *testing.T, db *sql.DB, name string) {
	t.Helper()
	mustExec(t, db,
		"CREATE TABLE "+name+" (id int PRIMARY KEY, payload text NOT NULL, fence_token bigint NOT NULL DEFAULT 0)",
		"CREATE TABLE "+name+"_log (seq bigserial PRIMARY KEY, id int NOT NULL, fence_token bigint NOT NULL)",
		"CREATE FUNCTION "+name+"_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "+
			"INSERT INTO "+name+"_log (id, fence_token) VALUES (NEW.id, NEW.fence_token); RETURN NEW; END $$",
		"CREATE TRIGGER "+name+"_log AFTER INSERT OR UPDATE ON "+name+
			" FOR EACH ROW EXECUTE FUNCTION "+name+"_log()")
}

func payload(tok token.Token) string { return "written with token " + tok.String() }

// writeResult is one fenced write made by one writer.
type writeResult struct {
	tok token.Token
	err error
}

// race runs writers goroutines, each on its own connection, released at once, each making the
// writes that write(w) returns in order; it returns every write's result.
func race(t *testing.T, db *sql.DB, writers int,
	write func(ctx context.Context, conn *sql.Conn, w int) []writeResult) []writeResult {
	t.Helper()
	ctx := t.Context()
	conns := make([]*sql.Conn, writers)
	for w := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		conns[w] = c
	}
	start := make(chan struct{})
	results := make([][]writeResult, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			results[w] = write(ctx, conns[w], w)
		})
	}
	close(start)
	wg.Wait()
	return slices.Concat(results...)
}

// checkRace checks the writes to row id: each refusal is a StaleTokenError that lost to a greater
// token; the applied writes, in commit order, are exactly the accepted ones, with increasing
// tokens; the row holds the greatest token's data, and that write was accepted.
func checkRace(t *testing.T, db *sql.DB, table string, id int, results []writeResult) {
	t.Helper()
	var accepted []token.Token
	var maxTok token.Token
	for _, r := range results {
		maxTok = max(maxTok, r.tok)
		if r.err == nil {
			accepted = append(accepted, r.tok)
			continue
		}
		var stale *fence.StaleTokenError
		if !errors.As(r.err, &stale) {
			t.Fatalf("row %d: write with token %s: %v, want success or a StaleTokenError", id, r.tok, r.err)
		}
		if stale.Presented != r.tok || stale.Current <= r.tok || !stale.ByObject {
			t.Fatalf("row %d: write with token %s refused with %+v", id, r.tok, *stale)
		}
	}
	if !slices.Contains(accepted, maxTok) {
		t.Fatalf("row %d: the write with the greatest token %s was refused", id, maxTok)
	}

	rows, err := db.QueryContext(t.Context(),
		"SELECT fence_token FROM "+table+"_log WHERE id = $1 ORDER BY seq", id)
	if err != nil {
		t.Fatal(err)
	}
	var committed []token.Token
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		committed = append(committed, token.Token(tok))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The tokens are distinct, so the fence (<=) must make them strictly increasing.
	for i := 1; i < len(committed); i++ {
		if committed[i] <= committed[i-1] {
			t.Fatalf("row %d: write with token %s committed after one with token %s (commit order %v)",
				id, committed[i], committed[i-1], committed)
		}
	}
	slices.Sort(accepted)
	if !slices.Equal(committed, accepted) {
		t.Fatalf("row %d: committed writes %v, accepted writes %v", id, committed, accepted)
	}

	var p string
	var tok int64
	err = db.QueryRowContext(t.Context(), "SELECT payload, fence_token FROM "+table+" WHERE id = $1", id).
		Scan(&p, &tok)
	if err != nil {
		t.Fatal(err)
	}
	if token.Token(tok) != maxTok || p != payload(maxTok) {
		t.Fatalf("row %d = (%q, %d), want (%q, %s)", id, p, tok, payload(maxTok), maxTok)
	}
	t.Logf("row %d: %d writes, %d accepted, %d refused", id, len(results), len(accepted), len(results)-len(accepted))
}

func testConcurrentUpdates(t *testing.T, db *sql.DB) {
	t.Helper()
	const writers, rounds = 8, 25
	concurrentTable(t, db, "race_update")
	mustExec(t, db, "INSERT INTO race_update (id, payload, fence_token) VALUES (1, 'initial', 100)",
		"TRUNCATE race_update_log")
	tbl := sqlfence.Table{Name: "race_update", Key: "id", Lock: lockName}
	// Writer w makes writes with tokens 101+w, 109+w, ...: each writer's tokens increase, and all
	// the tokens are distinct.
	results := race(t, db, writers, func(ctx context.Context, conn *sql.Conn, w int) []writeResult {
		out := make([]writeResult, 0, rounds)
		for r := range rounds {
			tok := token.Token(101 + r*writers + w)
			out = append(out, writeResult{tok, tbl.Update(ctx, conn, 1, tok, map[string]any{"payload": payload(tok)})})
		}
		return out
	})
	checkRace(t, db, "race_update", 1, results)
}

func testConcurrentUpserts(t *testing.T, db *sql.DB) {
	t.Helper()
	const writers, rows = 8, 10
	concurrentTable(t, db, "race_upsert")
	tbl := sqlfence.Table{Name: "race_upsert", Key: "id", Lock: lockName}
	// Every writer upserts each row once, racing to create it.
	results := race(t, db, writers, func(ctx context.Context, conn *sql.Conn, w int) []writeResult {
		out := make([]writeResult, 0, rows)
		for id := range rows {
			tok := token.Token(1000*(id+1) + w + 1)
			out = append(out, writeResult{tok, tbl.Upsert(ctx, conn, id, tok, map[string]any{"payload": payload(tok)})})
		}
		return out
	})
	for id := range rows {
		var mine []writeResult
		for _, r := range results {
			if int(r.tok)/1000 == id+1 {
				mine = append(mine, r)
			}
		}
		checkRace(t, db, "race_upsert", id, mine)
	}
}

// noDB fails the test on any statement: invalid calls must be refused before reaching the
// database.
type noDB struct{ t *testing.T }

func (d noDB) ExecContext(_ context.Context, q string, _ ...any) (sql.Result, error) {
	d.t.Errorf("statement sent to the database: %s", q)
	return nil, errors.New("no database")
}

func (d noDB) QueryRowContext(_ context.Context, q string, _ ...any) *sql.Row {
	d.t.Errorf("query sent to the database: %s", q)
	return nil
}

func TestInvalid(t *testing.T) {
	ok := sqlfence.Table{Name: "accounts", Key: "id"}
	vals := map[string]any{"balance": 1}
	for _, c := range []struct {
		name   string
		tbl    sqlfence.Table
		id     any
		tok    token.Token
		values map[string]any
	}{
		{"empty table name", sqlfence.Table{Key: "id"}, 1, 1, vals},
		{"empty key column", sqlfence.Table{Name: "accounts"}, 1, 1, vals},
		{"NUL in table name", sqlfence.Table{Name: "acc\x00ounts", Key: "id"}, 1, 1, vals},
		{"NUL in schema", sqlfence.Table{Schema: "s\x00", Name: "accounts", Key: "id"}, 1, 1, vals},
		{"token column is the key", sqlfence.Table{Name: "accounts", Key: "id", TokenColumn: "id"}, 1, 1, vals},
		{"empty value column", ok, 1, 1, map[string]any{"": 1}},
		{"value column is the key", ok, 1, 1, map[string]any{"id": 2}},
		{"value column is the token column", ok, 1, 1, map[string]any{"fence_token": 2}},
		{"nil key", ok, nil, 1, vals},
		{"zero token", ok, 1, 0, vals},
		{"token above bigint", ok, 1, math.MaxInt64 + 1, vals},
	} {
		t.Run(c.name, func(t *testing.T) {
			for op, f := range map[string]func(context.Context, sqlfence.Execer, any, token.Token, map[string]any) error{
				"Update": c.tbl.Update, "Upsert": c.tbl.Upsert,
			} {
				err := f(t.Context(), noDB{t}, c.id, c.tok, c.values)
				if !errors.Is(err, sqlfence.ErrInvalid) {
					t.Errorf("%s: error = %v, want ErrInvalid", op, err)
				}
				t.Logf("%s: %v", op, err)
			}
		})
	}
}

// recorder records the statement it is sent and fails it.
type recorder struct {
	query string
	args  []any
}

var errRecorded = errors.New("recorded")

func (r *recorder) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	r.query, r.args = q, args
	return nil, errRecorded
}

func (r *recorder) QueryRowContext(context.Context, string, ...any) *sql.Row {
	panic("unexpected query")
}

// TestStatements pins the statements: sorted columns (stable across map iteration orders),
// quoted identifiers, values only as placeholders.
func TestStatements(t *testing.T) {
	tbl := sqlfence.Table{Schema: "app", Name: `we"ird`, Key: "id"}
	values := map[string]any{}
	for i := range 10 {
		values["c"+strconv.Itoa(9-i)] = i
	}
	wantUpdate := `UPDATE "app"."we""ird" SET "c0" = $1, "c1" = $2, "c2" = $3, "c3" = $4, "c4" = $5, ` +
		`"c5" = $6, "c6" = $7, "c7" = $8, "c8" = $9, "c9" = $10, "fence_token" = $11 ` +
		`WHERE "id" = $12 AND COALESCE("fence_token", 0) <= $11`
	wantUpsert := `INSERT INTO "app"."we""ird" ("id", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", ` +
		`"fence_token") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ` +
		`ON CONFLICT ("id") DO UPDATE SET "c0" = EXCLUDED."c0", "c1" = EXCLUDED."c1", "c2" = EXCLUDED."c2", ` +
		`"c3" = EXCLUDED."c3", "c4" = EXCLUDED."c4", "c5" = EXCLUDED."c5", "c6" = EXCLUDED."c6", ` +
		`"c7" = EXCLUDED."c7", "c8" = EXCLUDED."c8", "c9" = EXCLUDED."c9", "fence_token" = EXCLUDED."fence_token" ` +
		`WHERE COALESCE("we""ird"."fence_token", 0) <= EXCLUDED."fence_token"`
	for range 20 {
		var r recorder
		if err := tbl.Update(t.Context(), &r, "k", 7, values); !errors.Is(err, errRecorded) {
			t.Fatal(err)
		}
		if r.query != wantUpdate {
			t.Fatalf("Update statement:\n got %s\nwant %s", r.query, wantUpdate)
		}
		wantArgs := []any{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, int64(7), "k"}
		if !slices.Equal(r.args, wantArgs) {
			t.Fatalf("Update args = %v, want %v", r.args, wantArgs)
		}

		if err := tbl.Upsert(t.Context(), &r, "k", 7, values); !errors.Is(err, errRecorded) {
			t.Fatal(err)
		}
		if r.query != wantUpsert {
			t.Fatalf("Upsert statement:\n got %s\nwant %s", r.query, wantUpsert)
		}
		wantArgs = []any{"k", 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, int64(7)}
		if !slices.Equal(r.args, wantArgs) {
			t.Fatalf("Upsert args = %v, want %v", r.args, wantArgs)
		}
	}
}

// BenchmarkUpdate measures a fenced update against a real server over TCP on 127.0.0.1: accepted
// (one UPDATE), and refused (the UPDATE, then the SELECT that reads the winning token).
func BenchmarkUpdate(b *testing.B) {
	db := startPostgres(b)
	ctx := context.Background()
	for _, s := range []string{
		"CREATE TABLE bench (id int PRIMARY KEY, payload text NOT NULL, fence_token bigint NOT NULL DEFAULT 0)",
		"INSERT INTO bench VALUES (1, '', 1)",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	tbl := sqlfence.Table{Name: "bench", Key: "id", Lock: lockName}
	var last token.Token = 1
	b.Run("accepted", func(b *testing.B) {
		for b.Loop() {
			last++
			if err := tbl.Update(ctx, db, 1, last, map[string]any{"payload": "x"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		var stale *fence.StaleTokenError
		for b.Loop() {
			if err := tbl.Update(ctx, db, 1, 1, map[string]any{"payload": "x"}); !errors.As(err, &stale) {
				b.Fatalf("want a refusal, got %v", err)
			}
		}
	})
}
