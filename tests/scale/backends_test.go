package scale_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"leases"
	"leases/etcd"
	"leases/etcdcluster"
	"leases/fence"
	"leases/postgres"
	"leases/postgres/pgtest"
	"leases/sqlite"
	"leases/testkit/testctx"
)

// ttl is every lease's: long against the grants of 10,000 leases on a
// busy machine, so that none runs out while the benchmark measures.
const ttl = 10 * time.Minute

// backends open a subject of P processes for the i-th point of the grid,
// on state of that point's own.
var backends = map[string]func(t *testing.T, processes, i int) subject{
	"sqlite":       openSQLite,
	"postgres":     openPostgres,
	"etcd":         openEtcd,
	"etcd-session": openEtcdSession,
	"etcd-txn":     openEtcdTxn,
}

// lessorProc is one process's Lessor, and its guarded write.
type lessorProc struct {
	lessor leases.Lessor
	write  func(ctx context.Context, lease leases.Lease) (func(context.Context) error, error)
}

func (p lessorProc) acquire(ctx context.Context, resource, holder string) (held, error) {
	return p.lessor.Acquire(ctx, resource, holder, ttl)
}

func (p lessorProc) renew(ctx context.Context, h held) error {
	_, err := p.lessor.Renew(ctx, h.(leases.Lease), ttl)
	return err
}

func (p lessorProc) guarded(ctx context.Context, h held) (func(context.Context) error, error) {
	return p.write(ctx, h.(leases.Lease))
}

func (p lessorProc) release(ctx context.Context, h held) error {
	return p.lessor.Release(ctx, h.(leases.Lease))
}

// tenureWrite is the guarded write on SQL: one upsert in a tenure's Tx.
func tenureWrite(begin func(context.Context, leases.Lease) (*fence.Tenure, error)) func(context.Context, leases.Lease) (func(context.Context) error, error) {
	return func(ctx context.Context, lease leases.Lease) (func(context.Context) error, error) {
		tn, err := begin(ctx, lease)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			return tn.Tx(ctx, nil, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO jobs (resource, runs) VALUES ($1, 1)
					ON CONFLICT (resource) DO UPDATE SET runs = jobs.runs + 1`, lease.Resource)
				return err
			})
		}, nil
	}
}

const jobsTable = `CREATE TABLE IF NOT EXISTS jobs (resource TEXT PRIMARY KEY, runs INTEGER NOT NULL)`

func openSQLite(t *testing.T, processes, _ int) subject {
	path := filepath.Join(t.TempDir(), "leases.db")
	var s subject
	for range processes {
		store, err := sqlite.Open(testctx.Context(t), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		if err := store.Tx(testctx.Context(t), func(tx *sql.Tx) error { _, err := tx.Exec(jobsTable); return err }); err != nil {
			t.Fatal(err)
		}
		s.procs = append(s.procs, lessorProc{lessor: store.Lessor(), write: tenureWrite(store.Tenure)})
	}
	return s
}

// server is the PostgreSQL server of the whole run, with
// pg_stat_statements to count the statements it runs.
var server struct {
	once sync.Once
	s    *pgtest.Server
	err  error
}

func openPostgres(t *testing.T, processes, i int) subject {
	if err := pgtest.Installed(); err != nil {
		t.Skip(err)
	}
	server.once.Do(func() {
		server.s, server.err = pgtest.Start(testctx.Context(t), "shared_preload_libraries=pg_stat_statements")
	})
	if server.err != nil {
		t.Fatal(server.err)
	}
	ctx := testctx.Context(t)
	admin := pgtest.Open(t, server.s, 1)
	for _, ddl := range []string{`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`, `DROP TABLE IF EXISTS jobs`,
		`CREATE TABLE jobs (resource TEXT PRIMARY KEY, runs INTEGER NOT NULL)`} {
		if _, err := admin.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	var s subject
	for p := range processes {
		store, err := postgres.New(pgtest.Open(t, server.s, 8), postgres.Options{Prefix: fmt.Sprintf("s%d_", i)})
		if err != nil {
			t.Fatal(err)
		}
		if p == 0 {
			if err := store.Create(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s.procs = append(s.procs, lessorProc{lessor: store.Lessor(), write: tenureWrite(store.Tenure)})
	}
	s.requests = func(ctx context.Context) (n, bytes int64, err error) {
		// Statements the server ran, less the ones of this query
		// (pg_stat_statements counts its own reads too).
		err = admin.QueryRowContext(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
			WHERE query NOT LIKE '%pg_stat_statements%'`).Scan(&n)
		return n, 0, err
	}
	return s
}

// cluster is the three-member etcd cluster of the whole run.
var cluster struct {
	once sync.Once
	c    *etcdcluster.Cluster
	err  error
}

// counter counts the gRPC messages a client sends and the bytes of
// every message it sends or receives.
type counter struct{ sent, bytes atomic.Int64 }

func (c *counter) add(m any, sent bool) {
	if msg, ok := m.(proto.Message); ok {
		c.bytes.Add(int64(proto.Size(msg)))
	}
	if sent {
		c.sent.Add(1)
	}
}

func (c *counter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.add(req, true)
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		c.add(reply, false)
	}
	return err
}

func (c *counter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return countedStream{s, c}, nil
}

type countedStream struct {
	grpc.ClientStream
	c *counter
}

func (s countedStream) SendMsg(m any) error { s.c.add(m, true); return s.ClientStream.SendMsg(m) }

func (s countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.c.add(m, false)
	}
	return err
}

// etcdClients are P counted clients of the run's cluster.
func etcdClients(t *testing.T, processes int) ([]*clientv3.Client, *counter) {
	cluster.once.Do(func() { cluster.c, cluster.err = etcdcluster.Start(testctx.Context(t), etcdcluster.Options{}) })
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	c := &counter{}
	var clients []*clientv3.Client
	for range processes {
		client, err := clientv3.New(clientv3.Config{Endpoints: cluster.c.Endpoints(), Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.unary), grpc.WithChainStreamInterceptor(c.stream)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		clients = append(clients, client)
	}
	return clients, c
}

func (c *counter) requests(context.Context) (int64, int64, error) {
	return c.sent.Load(), c.bytes.Load(), nil
}

func openEtcd(t *testing.T, processes, i int) subject {
	clients, c := etcdClients(t, processes)
	s := subject{requests: c.requests}
	for _, client := range clients {
		store := etcd.New(client, etcd.Options{Prefix: fmt.Sprintf("/scale/%d/", i), CallTimeout: time.Minute})
		receiver := store.Receiver(leases.Fenced)
		s.procs = append(s.procs, lessorProc{lessor: store.Lessor(),
			write: func(_ context.Context, lease leases.Lease) (func(context.Context) error, error) {
				return func(ctx context.Context) error {
					_, err := receiver.Write(ctx, lease.Resource, lease.Epoch, "run")
					return err
				}, nil
			}})
	}
	return s
}

// sessionProc is the anchor of etcd's own: one concurrency.Session per
// process, one concurrency.Mutex per lease; a renewal round is one
// keep-alive of the session's lease, a guarded write a Txn on the
// mutex's ownership.
type sessionProc struct {
	client  *clientv3.Client
	session *concurrency.Session
	prefix  string
	mu      sync.Mutex
	renewed chan struct{} // closed by the round's one keep-alive; nil between rounds
}

func (p *sessionProc) acquire(ctx context.Context, resource, _ string) (held, error) {
	m := concurrency.NewMutex(p.session, p.prefix+resource)
	return m, m.Lock(ctx)
}

// renew joins the round's one keep-alive of the session's lease.
func (p *sessionProc) renew(ctx context.Context, _ held) error {
	p.mu.Lock()
	first := p.renewed == nil
	if first {
		p.renewed = make(chan struct{})
	}
	done := p.renewed
	p.mu.Unlock()
	if !first {
		<-done
		return nil
	}
	_, err := p.client.KeepAliveOnce(ctx, p.session.Lease())
	p.mu.Lock()
	p.renewed = nil
	p.mu.Unlock()
	close(done)
	return err
}

func (p *sessionProc) guarded(_ context.Context, h held) (func(context.Context) error, error) {
	m := h.(*concurrency.Mutex)
	return func(ctx context.Context) error {
		resp, err := p.client.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpPut(m.Key()+"/data", "run")).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("%s: not the owner", m.Key())
		}
		return err
	}, nil
}

func (p *sessionProc) release(ctx context.Context, h held) error {
	return h.(*concurrency.Mutex).Unlock(ctx)
}

func openEtcdSession(t *testing.T, processes, i int) subject {
	clients, c := etcdClients(t, processes)
	s := subject{requests: c.requests}
	for _, client := range clients {
		session, err := concurrency.NewSession(client, concurrency.WithTTL(int(ttl/time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = session.Close() })
		s.procs = append(s.procs, &sessionProc{client: client, session: session, prefix: fmt.Sprintf("/scale-session/%d/", i)})
	}
	return s
}

// txnProc is the floor: a bare Txn per operation (a grant creates a key,
// a renewal and a guarded write put it, a release deletes it).
type txnProc struct {
	client *clientv3.Client
	prefix string
}

func (p txnProc) acquire(ctx context.Context, resource, holder string) (held, error) {
	key := p.prefix + resource
	resp, err := p.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, holder)).Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("%s exists", key)
	}
	return key, err
}

func (p txnProc) renew(ctx context.Context, h held) error {
	_, err := p.client.Txn(ctx).Then(clientv3.OpPut(h.(string), "renewed")).Commit()
	return err
}

func (p txnProc) guarded(_ context.Context, h held) (func(context.Context) error, error) {
	return func(ctx context.Context) error {
		_, err := p.client.Txn(ctx).Then(clientv3.OpPut(h.(string)+"/data", "run")).Commit()
		return err
	}, nil
}

func (p txnProc) release(ctx context.Context, h held) error {
	_, err := p.client.Txn(ctx).Then(clientv3.OpDelete(h.(string))).Commit()
	return err
}

func openEtcdTxn(t *testing.T, processes, i int) subject {
	clients, c := etcdClients(t, processes)
	s := subject{requests: c.requests}
	for _, client := range clients {
		s.procs = append(s.procs, txnProc{client: client, prefix: fmt.Sprintf("/scale-txn/%d/", i)})
	}
	return s
}
