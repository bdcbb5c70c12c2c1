package history

import "sync"

// Recorder makes one worker's records: it numbers the calls, stamps
// every record with the moment and the tick, and hands each to its sink,
// in the order it stamped them. A chaos worker's sink writes JSON lines
// on its standard output; a stress controller's adds to a History.
type Recorder struct {
	mu     sync.Mutex
	nextID int64
	stamp  func() (t, tick int64)
	sink   func(Record)
}

// NewRecorder is a recorder that stamps records with stamp and hands them
// to sink; both run under the recorder's lock.
func NewRecorder(stamp func() (t, tick int64), sink func(Record)) *Recorder {
	return &Recorder{stamp: stamp, sink: sink}
}

// Call records an operation's invocation, before it begins, so that a
// worker killed during the operation has said that it invoked it; it
// returns the id that pairs it with its return.
func (r *Recorder) Call(rec Record) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	rec.Kind, rec.ID = "call", r.nextID
	r.put(rec)
	return rec.ID
}

// Return records the return of the call id.
func (r *Recorder) Return(id int64, rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec.Kind, rec.ID = "ret", id
	r.put(rec)
}

// Emit records rec, of any other kind than a call or a return.
func (r *Recorder) Emit(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.put(rec)
}

func (r *Recorder) put(rec Record) {
	rec.T, rec.Tick = r.stamp()
	r.sink(rec)
}
