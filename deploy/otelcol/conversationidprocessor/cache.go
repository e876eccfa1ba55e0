package conversationidprocessor

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// traceCache remembers the routing key of the last traces seen, so a log event that
// carries no conversation id of its own follows its trace's conversation. Bounded in
// count (FIFO eviction): its bytes are then bounded too, since keys are fixed-size.
type traceCache struct {
	mu    sync.Mutex
	keys  map[pcommon.TraceID]traceEntry
	order []pcommon.TraceID
	next  int
}

// traceEntry is what a trace was routed by, and its conversation id when it had one of
// at most maxCachedIDBytes (copied onto the trace's late spans; a longer one is not
// kept, so an entry's bytes are bounded).
type traceEntry struct {
	key  string
	conv pcommon.Value
	has  bool
}

const maxCachedIDBytes = 256

func newTraceCache(size int) *traceCache {
	return &traceCache{keys: make(map[pcommon.TraceID]traceEntry), order: make([]pcommon.TraceID, size)}
}

func (c *traceCache) put(tid pcommon.TraceID, key string) {
	c.putEntry(tid, traceEntry{key: key})
}

// putConversation remembers the trace's key and (if short enough) its conversation id.
func (c *traceCache) putConversation(tid pcommon.TraceID, key string, conv pcommon.Value, text string) {
	e := traceEntry{key: key}
	if len(text) <= maxCachedIDBytes {
		e.conv = pcommon.NewValueEmpty()
		conv.CopyTo(e.conv)
		e.has = true
	}
	c.putEntry(tid, e)
}

func (c *traceCache) putEntry(tid pcommon.TraceID, e traceEntry) {
	if len(c.order) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.keys[tid]; ok {
		c.keys[tid] = e
		return
	}
	old := c.order[c.next]
	if !old.IsEmpty() {
		delete(c.keys, old)
	}
	c.order[c.next] = tid
	c.next = (c.next + 1) % len(c.order)
	c.keys[tid] = e
}

func (c *traceCache) get(tid pcommon.TraceID) (string, bool) {
	e, ok := c.entry(tid)
	return e.key, ok
}

func (c *traceCache) entry(tid pcommon.TraceID) (traceEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.keys[tid]
	return e, ok
}

func (c *traceCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// caches holds one traceCache per component id, shared by the traces and the logs
// instance of the same processor (the Collector creates one instance per signal).
var (
	cachesMu sync.Mutex
	caches   = map[string]*traceCache{}
)

func cacheFor(id string, size int) *traceCache {
	cachesMu.Lock()
	defer cachesMu.Unlock()
	c, ok := caches[id]
	if !ok {
		c = newTraceCache(size)
		caches[id] = c
	}
	return c
}
