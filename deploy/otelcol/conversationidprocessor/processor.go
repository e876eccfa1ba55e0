package conversationidprocessor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

type conversationProcessor struct {
	keys        []string
	routingAttr string
	origAttr    string
	cache       *traceCache
}

func newConversationProcessor(cfg *Config, cache *traceCache) *conversationProcessor {
	return &conversationProcessor{
		keys:        cfg.keys(),
		routingAttr: cfg.RoutingAttribute,
		origAttr:    cfg.OriginalTraceIDAttribute,
		cache:       cache,
	}
}

// routingKey is the ring key of a conversation (or of a trace without one): the first
// 16 hex digits of its SHA-256. Hashing bounds the key whatever the id's length, and 16
// ASCII bytes are also a valid trace id, which is how logs are routed (see processLogs).
func hex16(tid pcommon.TraceID) string { return hex.EncodeToString(tid[:]) }

func routingKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:routingKeyLen]
}

// idText reads an attribute value as tracepass's as_str does: a non-empty string or an
// integer; nothing else names a conversation.
func idText(v pcommon.Value) (string, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		s := v.Str()
		return s, s != ""
	case pcommon.ValueTypeInt:
		return strconv.FormatInt(v.Int(), 10), true
	case pcommon.ValueTypeDouble:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64), true
	}
	return "", false
}

// findID returns the first of keys that carries a conversation id in attrs.
func (p *conversationProcessor) findID(attrs pcommon.Map) (pcommon.Value, string, bool) {
	for _, k := range p.keys {
		if v, ok := attrs.Get(k); ok {
			if s, ok := idText(v); ok {
				return v, s, true
			}
		}
	}
	return pcommon.Value{}, "", false
}

// traceConversation is what one trace of the batch resolved to.
type traceConversation struct {
	value    pcommon.Value // the id as sent (copied as is, so its type is kept)
	text     string
	fromRoot bool
}

// processTraces resolves each trace's conversation (the root span's id first, then the
// first span that has one, then the resource), copies it onto the spans that carry
// none, and writes the routing attribute on every span.
func (p *conversationProcessor) processTraces(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	found := map[pcommon.TraceID]traceConversation{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		resValue, resText, resOK := p.findID(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				tid := span.TraceID()
				prev, seen := found[tid]
				if seen && prev.fromRoot {
					continue
				}
				isRoot := span.ParentSpanID().IsEmpty()
				if v, s, ok := p.findID(span.Attributes()); ok {
					if !seen || isRoot {
						found[tid] = traceConversation{value: v, text: s, fromRoot: isRoot}
					}
				} else if !seen && resOK {
					found[tid] = traceConversation{value: resValue, text: resText}
				}
			}
		}
	}
	routed := map[pcommon.TraceID]string{}
	late := map[pcommon.TraceID]bool{}
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		rs.Resource().Attributes().Remove(p.routingAttr)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			ss.Scope().Attributes().Remove(p.routingAttr)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				tid := span.TraceID()
				key, ok := routed[tid]
				conv, hasConv := found[tid]
				if !ok {
					if hasConv {
						key = routingKey(conv.text)
					} else if cached, known := p.cache.entry(tid); known {
						// A late span of a trace already routed (its group was
						// released before it came): same replica, same conversation.
						key = cached.key
						if cached.has {
							conv = traceConversation{value: cached.conv}
							hasConv = true
							found[tid] = conv
							late[tid] = true
						}
					} else {
						key = routingKey(hex.EncodeToString(tid[:]))
					}
					routed[tid] = key
				}
				attrs := span.Attributes()
				if hasConv {
					if _, _, own := p.findID(attrs); !own {
						conv.value.CopyTo(attrs.PutEmpty(builtinKeys[0]))
					}
				}
				attrs.PutStr(p.routingAttr, key)
			}
		}
	}
	for tid, key := range routed {
		if tid.IsEmpty() || late[tid] {
			continue
		}
		if conv, ok := found[tid]; ok {
			p.cache.putConversation(tid, key, conv.value, conv.text)
		} else {
			p.cache.put(tid, key)
		}
	}
	return td, nil
}

// logKey is the routing key of one log record, and whether it is final: its own
// conversation id, else its resource's (resText), else the key its trace was routed by
// (if the traces pipeline has released that trace). Not final: the trace id's key, used
// when the trace is never seen.
func (p *conversationProcessor) logKey(rec plog.LogRecord, resText string, resOK bool) (string, bool) {
	if _, s, ok := p.findID(rec.Attributes()); ok {
		return routingKey(s), true
	}
	if resOK {
		return routingKey(resText), true
	}
	tid := rec.TraceID()
	if cached, ok := p.cache.get(tid); ok {
		return cached, true
	}
	return routingKey(hex.EncodeToString(tid[:])), false
}

// rewriteLog gives a record the routing key as its trace id (the loadbalancing exporter
// routes logs by trace id only, and 16 ASCII bytes hash to the same ring position as
// the spans' routing attribute), keeping its own trace id in origAttr (tracepass reads
// it back).
func (p *conversationProcessor) rewriteLog(rec plog.LogRecord, key string) {
	tid := rec.TraceID()
	rec.Attributes().PutStr(p.origAttr, hex.EncodeToString(tid[:]))
	var newID pcommon.TraceID
	copy(newID[:], key)
	rec.SetTraceID(newID)
}

// needsRouting: records without a trace id cannot be placed by tracepass and are left
// alone; records already rewritten by a gateway upstream keep that routing.
func (p *conversationProcessor) needsRouting(rec plog.LogRecord) bool {
	if rec.TraceID().IsEmpty() {
		return false
	}
	_, already := rec.Attributes().Get(p.origAttr)
	return !already
}
