package httpfence_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"leases/fence"
	"leases/httpfence"
	"leases/ops"
	"leases/session"
	"leases/sqlite"
)

// tools is a tool server's handler: POST /items stores an item in the
// tool's own database, in the record's transaction (httpfence.Tx), so
// that the item and the record of the call commit together; POST /mail
// sends a mail, an effect outside the database, between a pending record
// and its completion.
//
// Its imports:
//
//	import (
//		"context"
//		"database/sql"
//		"fmt"
//		"io"
//		"net/http"
//
//		"leases/fence"
//		"leases/httpfence"
//		"leases/ops"
//	)
func tools(ctx context.Context, db *sql.DB, send func(to string) error) (http.Handler, error) {
	table, err := ops.New(db, ops.Options{Dialect: fence.SQLite})
	if err == nil {
		err = table.Create(ctx) // once, at setup
	}
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /items", httpfence.Handler(table, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := io.ReadAll(r.Body)
		if err == nil {
			_, err = httpfence.Tx(r).ExecContext(r.Context(), `INSERT INTO items (name) VALUES (?)`, string(name))
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // rolled back, not recorded
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "stored %s\n", name)
	})))
	mux.Handle("POST /mail", httpfence.External(table, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to, err := io.ReadAll(r.Body)
		if err == nil {
			err = send(string(to))
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway) // recorded: the mail may have gone
			return
		}
		fmt.Fprintf(w, "sent to %s\n", to)
	})))
	return mux, nil
}

// store is an agent's call to the tool under its session: the client
// sends the session's lease and the operation's key, and sends nothing
// once the session has ended. The key names this operation: a retry of
// the call (after a timeout, say) sends it again, and the server answers
// from its record.
//
// Its imports:
//
//	import (
//		"errors"
//		"fmt"
//		"io"
//		"net/http"
//		"strings"
//
//		"leases/httpfence"
//		"leases/session"
//	)
func store(s *session.Session, url, item string) (string, error) {
	client := &http.Client{Transport: httpfence.Transport(s, nil)}
	ctx := httpfence.WithKey(s.Context(), "store "+item)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/items", strings.NewReader(item))
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if errors.Is(err, session.ErrEnded) {
		return "", err // the lease may be lost: nothing was sent
	}
	if err != nil {
		return "", err // sent or not: retry with the same key, the record tells
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return "", err
	case resp.StatusCode == http.StatusConflict && resp.Header.Get(httpfence.HeaderNewest) != "":
		return "", fmt.Errorf("superseded by epoch %s: stop", resp.Header.Get(httpfence.HeaderNewest))
	case resp.StatusCode >= 300:
		return "", fmt.Errorf("%s: %s", resp.Status, body) // 409 in progress: ask again later
	}
	if resp.Header.Get(httpfence.HeaderReplayed) == "true" {
		return "(again) " + string(body), nil
	}
	return string(body), nil
}

// report is a command that `leases run` runs: it has no session of its
// own, and sends the lease that `leases run` put in its environment
// (LEASES_RESOURCE, LEASES_EPOCH); `leases run` stops it when the lease
// may be lost, and the tool server refuses it once a newer holder's call
// was admitted. The key names the day's report: a rerun of the same day
// is a replay.
//
// Its imports:
//
//	import (
//		"bytes"
//		"context"
//		"fmt"
//		"net/http"
//
//		"leases/httpfence"
//	)
func report(url, day string, body []byte) error {
	rt, err := httpfence.FromEnvironment(nil)
	if err != nil {
		return err // not run by leases run
	}
	ctx := httpfence.WithKey(context.Background(), "report "+day)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/items", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s (newest epoch %q)", resp.Status, resp.Header.Get(httpfence.HeaderNewest))
	}
	return nil
}

// toolServer runs tools on a SQLite file of its own, in a temporary
// directory that done removes.
func toolServer() (server *httptest.Server, db *sql.DB, done func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "httpfence-example-")
	if err != nil {
		panic(err)
	}
	db, err = sql.Open("sqlite", filepath.Join(dir, "tool.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE items (name TEXT)`); err != nil {
		panic(err)
	}
	h, err := tools(ctx, db, func(string) error { return nil })
	if err != nil {
		panic(err)
	}
	server = httptest.NewServer(h)
	return server, db, func() { server.Close(); _ = db.Close(); _ = os.RemoveAll(dir) }
}

// A command run by `leases run` at epoch 3 reports, and reruns; then a
// newer holder (epoch 4) reports, and the old command's late report is
// refused.
func ExampleFromEnvironment() {
	server, _, done := toolServer()
	defer done()
	defer os.Unsetenv("LEASES_RESOURCE")
	defer os.Unsetenv("LEASES_EPOCH")
	os.Setenv("LEASES_RESOURCE", "reports")
	for _, run := range []struct{ epoch, day string }{{"3", "monday"}, {"3", "monday"}, {"4", "tuesday"}, {"3", "tuesday"}} {
		os.Setenv("LEASES_EPOCH", run.epoch)
		fmt.Printf("epoch %s, %s: %v\n", run.epoch, run.day, report(server.URL, run.day, []byte(run.day)))
	}
	// Output:
	// epoch 3, monday: <nil>
	// epoch 3, monday: <nil>
	// epoch 4, tuesday: <nil>
	// epoch 3, tuesday: 409 Conflict (newest epoch "4")
}

// A tool server and an agent: the agent stores an item, sends the call
// again (its answer was lost, say) and gets the stored answer, the item
// stored once; after its session has ended, its client sends nothing.
func Example() {
	ctx := context.Background()
	server, db, done := toolServer()
	defer done()
	dir, err := os.MkdirTemp("", "httpfence-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	leasesDB, err := sqlite.Open(ctx, filepath.Join(dir, "leases.db"))
	if err != nil {
		panic(err)
	}
	defer leasesDB.Close()
	s, err := session.Start(ctx, leasesDB.Lessor(), "tools", "agent-1", session.Options{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	for range 2 {
		answer, err := store(s, server.URL, "apples")
		fmt.Printf("%q %v\n", answer, err)
	}
	_ = s.Close(ctx)
	_, err = store(s, server.URL, "pears")
	fmt.Println("after the session:", errors.Is(err, session.ErrEnded))
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM items`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("items:", n)
	// Output:
	// "stored apples\n" <nil>
	// "(again) stored apples\n" <nil>
	// after the session: true
	// items: 1
}
