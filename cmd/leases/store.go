package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"leases"
)

// storeEnv names the environment variable that says where the leases are
// when no flag does, for scripts: LEASES_STORE=sqlite:PATH,
// LEASES_STORE=etcd:ENDPOINTS.
const storeEnv = "LEASES_STORE"

// DefaultTimeout bounds each call to the store when --timeout is not
// given.
const DefaultTimeout = 10 * time.Second

// A backend is one kind of store. Each lives in a file of its own
// (backend_sqlite.go, backend_etcd.go) that registers it from init:
// adding a backend adds one file and touches nothing else.
type backend struct {
	// name is the flag that selects it (--sqlite) and its scheme in
	// LEASES_STORE (sqlite:).
	name string
	// arg names what follows the flag in the help: PATH, ENDPOINTS, DSN.
	arg string
	// help says what the store is, in one line.
	help string
	// clock says, in a few words, whose clock the times printed are.
	clock string
	// note says whose clock times the leases, and what the times mean,
	// under holders' table.
	note string
	// prefix says what --prefix chooses in this store, with its default;
	// empty for a store that takes no --prefix.
	prefix string
	// ttls says how the store may change a TTL asked for (etcd's whole
	// seconds and minimum); empty where a lease gets the TTL asked for.
	ttls string
	// open opens the store.
	open opener
}

// An opener opens the store at where (a path, endpoints, a DSN).
type opener func(ctx context.Context, where string, o openOptions) (*store, error)

// openOptions are what every backend is opened with.
type openOptions struct {
	// timeout bounds each call, and each wait for a lock or a connection.
	timeout time.Duration
	// create: the command may create the store (acquire, run); holders,
	// renew and release refuse a store that is not there, so that a
	// mistyped path is an error rather than an empty new file.
	create bool
	// prefix is --prefix: empty for the store's default.
	prefix string
}

// A store is an open store: its lessor and how to close it.
type store struct {
	backend *backend
	// raw is the backend's lessor.
	raw leases.Lessor
	// lessor is raw with every call bounded by --timeout but Changed,
	// which lasts as long as its caller waits.
	lessor leases.Lessor
	close  func() error
	// unanswered, when not nil, says why a call that --timeout cut may
	// have had no answer (etcd: what each endpoint does), for its error.
	unanswered func() string
}

var backends []*backend

// register adds a backend; backend files call it from init.
func register(b *backend) {
	backends = append(backends, b)
	slices.SortFunc(backends, func(x, y *backend) int { return strings.Compare(x.name, y.name) })
}

// storeFlags are the flags that say where the leases are, and the bound
// on each call, on one command's flag set.
type storeFlags struct {
	fs      *flag.FlagSet
	where   map[string]*string // by backend name
	prefix  string
	timeout time.Duration
}

func defineStoreFlags(fs *flag.FlagSet) *storeFlags {
	f := &storeFlags{fs: fs, where: map[string]*string{}}
	var prefixes []string
	for _, b := range backends {
		f.where[b.name] = fs.String(b.name, "", fmt.Sprintf("`%s`: %s", b.arg, b.help))
		if b.prefix != "" {
			prefixes = append(prefixes, fmt.Sprintf("with --%s, %s", b.name, b.prefix))
		}
	}
	fs.StringVar(&f.prefix, "prefix", "", "the `prefix`: "+strings.Join(prefixes, "; "))
	durationVar(fs, &f.timeout, "timeout", DefaultTimeout, "10s", "the bound on each call to the store (and on each wait for its lock or a connection), a `duration`")
	return f
}

// open opens the store the flags, or else LEASES_STORE, name.
func (f *storeFlags) open(ctx context.Context, getenv func(string) string, create bool) (*store, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var chosen []*backend
	for _, b := range backends {
		if set[b.name] {
			chosen = append(chosen, b)
		}
	}
	var b *backend
	var where string
	switch len(chosen) {
	case 1:
		b, where = chosen[0], *f.where[chosen[0].name]
	case 0:
		spec := getenv(storeEnv)
		if spec == "" {
			return nil, usagef("no store: give %s, or set %s", storeChoices(), storeEnv)
		}
		scheme, rest, _ := strings.Cut(spec, ":")
		for _, candidate := range backends {
			if candidate.name == scheme {
				b, where = candidate, rest
			}
		}
		if b == nil {
			return nil, usagef("%s=%q: want one of %s", storeEnv, spec, envChoices())
		}
	default:
		return nil, usagef("more than one store: --%s and --%s; give one", chosen[0].name, chosen[1].name)
	}
	if set["prefix"] && b.prefix == "" {
		return nil, usagef("--prefix is for %s; the store is --%s", prefixed(), b.name)
	}
	if where == "" {
		return nil, usagef("--%s needs a %s", b.name, b.arg)
	}
	ctx, cancel := boundCall(ctx, f.timeout)
	defer cancel()
	s, err := b.open(ctx, where, openOptions{timeout: f.timeout, create: create, prefix: f.prefix})
	if err != nil {
		return nil, explained(ctx, err, nil)
	}
	s.backend = b
	s.lessor = bounded(s.raw, f.timeout, s.unanswered)
	return s, nil
}

func storeChoices() string {
	var words []string
	for _, b := range backends {
		words = append(words, b.synopsis())
	}
	return strings.Join(words, " or ")
}

// synopsis is how the help names the store's flags: --name ARG, and
// [--prefix P] where it takes one.
func (b *backend) synopsis() string {
	if b.prefix != "" {
		return "--" + b.name + " " + b.arg + " [--prefix P]"
	}
	return "--" + b.name + " " + b.arg
}

// prefixed names the stores that take --prefix.
func prefixed() string {
	var words []string
	for _, b := range backends {
		if b.prefix != "" {
			words = append(words, "--"+b.name)
		}
	}
	return strings.Join(words, " and ")
}

func envChoices() string {
	var words []string
	for _, b := range backends {
		words = append(words, b.name+":"+b.arg)
	}
	return strings.Join(words, ", ")
}

// envExamples is every way to say where the leases are in the
// environment.
func envExamples() string {
	var words []string
	for _, b := range backends {
		words = append(words, storeEnv+"="+b.name+":"+b.arg)
	}
	return strings.Join(words, " or ")
}

// boundCall is ctx bounded by --timeout, saying so when it fires.
func boundCall(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, &timeoutError{timeout})
}

// timeoutError is the cause of a call cut off by --timeout.
type timeoutError struct{ timeout time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("--timeout %v passed", e.timeout) }

// explained is err, from a call under ctx, saying that --timeout cut it
// off when it did and err does not say so already, and then what
// unanswered says, if it is not nil.
func explained(ctx context.Context, err error, unanswered func() string) error {
	var cut *timeoutError
	if err == nil || !errors.As(context.Cause(ctx), &cut) {
		return err
	}
	if !errors.As(err, &cut) {
		err = fmt.Errorf("%w (%w)", err, cut)
	}
	if unanswered == nil {
		return err
	}
	// The library's error says the cut already (it keeps the context's
	// cause): what went unanswered goes beside it.
	return &reworded{msg: strings.Replace(err.Error(), cut.Error(), cut.Error()+"; "+unanswered(), 1), err: err}
}

// reworded is err with another text.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// bounded is l with every call bounded by timeout, and unanswered's words
// in the error of a call it cut; Changed, which lasts as long as its
// caller waits, is passed on unbounded.
func bounded(l leases.Lessor, timeout time.Duration, unanswered func() string) leases.Lessor {
	return boundedLessor{lessor: l, timeout: timeout, unanswered: unanswered}
}

type boundedLessor struct {
	lessor     leases.Lessor
	timeout    time.Duration
	unanswered func() string
}

func (b boundedLessor) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (leases.Lease, error) {
	ctx, cancel := boundCall(ctx, b.timeout)
	defer cancel()
	lease, err := b.lessor.Acquire(ctx, resource, holder, ttl)
	return lease, explained(ctx, err, b.unanswered)
}

func (b boundedLessor) Renew(ctx context.Context, held leases.Lease, ttl time.Duration) (leases.Lease, error) {
	ctx, cancel := boundCall(ctx, b.timeout)
	defer cancel()
	lease, err := b.lessor.Renew(ctx, held, ttl)
	return lease, explained(ctx, err, b.unanswered)
}

func (b boundedLessor) Release(ctx context.Context, held leases.Lease) error {
	ctx, cancel := boundCall(ctx, b.timeout)
	defer cancel()
	return explained(ctx, b.lessor.Release(ctx, held), b.unanswered)
}

func (b boundedLessor) Lease(ctx context.Context, resource string) (leases.Lease, bool, error) {
	ctx, cancel := boundCall(ctx, b.timeout)
	defer cancel()
	lease, ok, err := b.lessor.Lease(ctx, resource)
	return lease, ok, explained(ctx, err, b.unanswered)
}

func (b boundedLessor) Live(ctx context.Context, resources ...string) ([]leases.Lease, int64, error) {
	ctx, cancel := boundCall(ctx, b.timeout)
	defer cancel()
	live, now, err := b.lessor.Live(ctx, resources...)
	return live, now, explained(ctx, err, b.unanswered)
}

func (b boundedLessor) Changed(ctx context.Context, resource string) (<-chan struct{}, error) {
	return b.lessor.Changed(ctx, resource)
}

// usageError is bad usage or bad input, found before anything was done:
// exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// isUsage reports whether err is bad usage or input: the command's own
// finding, or the store's leases.ErrInvalidInput.
func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u) || errors.Is(err, leases.ErrInvalidInput)
}
