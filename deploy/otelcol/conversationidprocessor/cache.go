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
	keys  map[pcommon.TraceID]string
	order []pcommon.TraceID
	next  int
}

func newTraceCache(size int) *traceCache {
	return &traceCache{keys: make(map[pcommon.TraceID]string), order: make([]pcommon.TraceID, size)}
}

func (c *traceCache) put(tid pcommon.TraceID, key string) {
	if len(c.order) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.keys[tid]; ok {
		c.keys[tid] = key
		return
	}
	old := c.order[c.next]
	if !old.IsEmpty() {
		delete(c.keys, old)
	}
	c.order[c.next] = tid
	c.next = (c.next + 1) % len(c.order)
	c.keys[tid] = key
}

func (c *traceCache) get(tid pcommon.TraceID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.keys[tid]
	return key, ok
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
