package conversationidprocessor

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
)

type spanSpec struct {
	trace  byte
	span   byte
	parent byte
	attrs  map[string]any
}

func tid(b byte) pcommon.TraceID { return pcommon.TraceID{15: b, 0: 0xab} }
func sid(b byte) pcommon.SpanID  { return pcommon.SpanID{7: b} }

func buildTraces(resource map[string]any, specs ...spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	_ = rs.Resource().Attributes().FromRaw(resource)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for _, s := range specs {
		span := spans.AppendEmpty()
		span.SetTraceID(tid(s.trace))
		span.SetSpanID(sid(s.span))
		if s.parent != 0 {
			span.SetParentSpanID(sid(s.parent))
		}
		_ = span.Attributes().FromRaw(s.attrs)
	}
	return td
}

func newTestProcessor(extra ...string) *conversationProcessor {
	cfg := createDefaultConfig()
	cfg.ConversationIDKeys = extra
	return newConversationProcessor(cfg, newTraceCache(16))
}

type spanOut struct {
	route, conv string
}

func collect(td ptrace.Traces) map[byte]spanOut {
	out := map[byte]spanOut{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s := spans.At(k)
				o := spanOut{}
				if v, ok := s.Attributes().Get(DefaultRoutingAttribute); ok {
					o.route = v.Str()
				}
				if v, ok := s.Attributes().Get("gen_ai.conversation.id"); ok {
					o.conv = v.AsString()
				}
				id := s.SpanID()
				out[id[7]] = o
			}
		}
	}
	return out
}

func traceKey(b byte) string {
	t := tid(b)
	return routingKey(hex.EncodeToString(t[:]))
}

func TestProcessTraces(t *testing.T) {
	conv := routingKey("c-1")
	cases := []struct {
		name     string
		resource map[string]any
		extra    []string
		spans    []spanSpec
		want     map[byte]spanOut
	}{
		{
			name: "id on every span",
			spans: []spanSpec{
				{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}},
				{1, 2, 1, map[string]any{"gen_ai.conversation.id": "c-1"}},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, "c-1"}},
		},
		{
			name: "id on the root only, children first in the batch",
			spans: []spanSpec{
				{1, 2, 1, map[string]any{"gen_ai.tool.name": "search"}},
				{1, 3, 2, nil},
				{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, "c-1"}, 3: {conv, "c-1"}},
		},
		{
			name: "id on a child only",
			spans: []spanSpec{
				{1, 1, 0, nil},
				{1, 2, 1, map[string]any{"gen_ai.conversation.id": "c-1"}},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, "c-1"}},
		},
		{
			name: "OpenInference session.id",
			spans: []spanSpec{
				{1, 1, 0, map[string]any{"session.id": "c-1"}},
				{1, 2, 1, nil},
			},
			want: map[byte]spanOut{1: {conv, ""}, 2: {conv, "c-1"}},
		},
		{
			name: "Traceloop association property",
			spans: []spanSpec{
				{1, 1, 0, nil},
				{1, 2, 1, map[string]any{"traceloop.association.properties.thread_id": "c-1"}},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, ""}},
		},
		{
			name: "resolution order: gen_ai.conversation.id before session.id",
			spans: []spanSpec{
				{1, 1, 0, map[string]any{"session.id": "other", "gen_ai.conversation.id": "c-1"}},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}},
		},
		{
			name: "the root's id wins over a child's",
			spans: []spanSpec{
				{1, 2, 1, map[string]any{"gen_ai.conversation.id": "child"}},
				{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}},
				{1, 3, 1, nil},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, "child"}, 3: {conv, "c-1"}},
		},
		{
			name:     "resource carries the id",
			resource: map[string]any{"session.id": "c-1"},
			spans:    []spanSpec{{1, 1, 0, nil}, {1, 2, 1, nil}},
			want:     map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, "c-1"}},
		},
		{
			name:  "configured extra key",
			extra: []string{"app.thread"},
			spans: []spanSpec{{1, 1, 0, map[string]any{"app.thread": "c-1"}}, {1, 2, 1, nil}},
			want:  map[byte]spanOut{1: {conv, ""}, 2: {conv, "c-1"}},
		},
		{
			name:  "no id anywhere: keyed by trace, one key per trace",
			spans: []spanSpec{{1, 1, 0, nil}, {1, 2, 1, nil}, {2, 3, 0, nil}},
			want:  map[byte]spanOut{1: {traceKey(1), ""}, 2: {traceKey(1), ""}, 3: {traceKey(2), ""}},
		},
		{
			name: "empty and boolean values name no conversation",
			spans: []spanSpec{
				{1, 1, 0, map[string]any{"gen_ai.conversation.id": "", "session.id": true}},
			},
			want: map[byte]spanOut{1: {traceKey(1), ""}},
		},
		{
			name:  "integer ids count, copied with their type",
			spans: []spanSpec{{1, 1, 0, map[string]any{"gen_ai.conversation.id": int64(42)}}, {1, 2, 1, nil}},
			want:  map[byte]spanOut{1: {routingKey("42"), "42"}, 2: {routingKey("42"), "42"}},
		},
		{
			name: "two traces of one conversation share the key; another trace keeps its own",
			spans: []spanSpec{
				{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}},
				{2, 2, 0, map[string]any{"gen_ai.conversation.id": "c-1"}},
				{2, 3, 2, nil},
				{3, 4, 0, nil},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}, 2: {conv, "c-1"}, 3: {conv, "c-1"}, 4: {traceKey(3), ""}},
		},
		{
			name: "a spoofed routing attribute is overwritten",
			spans: []spanSpec{
				{1, 1, 0, map[string]any{DefaultRoutingAttribute: "evil", "gen_ai.conversation.id": "c-1"}},
			},
			want: map[byte]spanOut{1: {conv, "c-1"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProcessor(tc.extra...)
			td, err := p.processTraces(context.Background(), buildTraces(tc.resource, tc.spans...))
			if err != nil {
				t.Fatal(err)
			}
			got := collect(td)
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("span %d: got %+v, want %+v", id, got[id], want)
				}
			}
		})
	}
}

// TestLateSpanFollowsItsTrace: a span that comes after groupbytrace released its trace
// is a group of its own; without a conversation id of its own it takes the key its
// trace was routed by (while the trace memory holds it).
func TestLateSpanFollowsItsTrace(t *testing.T) {
	p := newTestProcessor()
	_, _ = p.processTraces(context.Background(), buildTraces(nil,
		spanSpec{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}}))
	td, _ := p.processTraces(context.Background(), buildTraces(nil, spanSpec{1, 2, 1, nil}))
	if got := collect(td)[2]; got != (spanOut{routingKey("c-1"), "c-1"}) {
		t.Fatalf("late span routed %+v", got)
	}
	// An id too long to keep still routes the late span, without copying the id.
	long := string(make([]byte, maxCachedIDBytes+1))
	_, _ = p.processTraces(context.Background(), buildTraces(nil,
		spanSpec{4, 1, 0, map[string]any{"gen_ai.conversation.id": long}}))
	td, _ = p.processTraces(context.Background(), buildTraces(nil, spanSpec{4, 5, 1, nil}))
	if got := collect(td)[5]; got != (spanOut{routingKey(long), ""}) {
		t.Fatalf("late span of a long id routed %+v", got)
	}
	// A trace the memory does not know is keyed by its trace id.
	td, _ = p.processTraces(context.Background(), buildTraces(nil, spanSpec{8, 3, 1, nil}))
	if got := collect(td)[3]; got.route != traceKey(8) {
		t.Fatalf("unknown late span routed %+v", got)
	}
}

func TestIntegerIDKeepsType(t *testing.T) {
	p := newTestProcessor()
	td, _ := p.processTraces(context.Background(), buildTraces(nil,
		spanSpec{1, 1, 0, map[string]any{"gen_ai.conversation.id": int64(7)}}, spanSpec{1, 2, 1, nil}))
	child := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	v, _ := child.Attributes().Get("gen_ai.conversation.id")
	if v.Type() != pcommon.ValueTypeInt || v.Int() != 7 {
		t.Fatalf("copied id: %v %v", v.Type(), v.AsString())
	}
}

func TestResourceRoutingAttributeRemoved(t *testing.T) {
	p := newTestProcessor()
	td, _ := p.processTraces(context.Background(), buildTraces(map[string]any{DefaultRoutingAttribute: "evil"},
		spanSpec{1, 1, 0, nil}))
	if _, ok := td.ResourceSpans().At(0).Resource().Attributes().Get(DefaultRoutingAttribute); ok {
		t.Fatal("resource routing attribute must be removed: the loadbalancer reads the resource first")
	}
}

func TestRoutingKeyShape(t *testing.T) {
	long := make([]byte, 1<<20)
	for _, id := range []string{"c", "conversation-42", string(long)} {
		k := routingKey(id)
		if len(k) != 16 {
			t.Fatalf("key %q: length %d", k, len(k))
		}
		if _, err := hex.DecodeString(k); err != nil {
			t.Fatalf("key %q not hex", k)
		}
	}
}

type logSpec struct {
	trace byte
	attrs map[string]any
}

func buildLogs(resource map[string]any, specs ...logSpec) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	_ = rl.Resource().Attributes().FromRaw(resource)
	recs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, s := range specs {
		r := recs.AppendEmpty()
		if s.trace != 0 {
			r.SetTraceID(tid(s.trace))
			r.SetSpanID(sid(1))
		}
		_ = r.Attributes().FromRaw(s.attrs)
	}
	return ld
}

// runLogs passes ld through a logs processor sharing p's trace memory and returns what
// reached the sink once nothing is held any more.
func runLogs(t *testing.T, p *conversationProcessor, cfg *Config, ld plog.Logs, between func()) []plog.LogRecord {
	t.Helper()
	sink := new(consumertest.LogsSink)
	lp := newLogsProcessor(p, cfg, sink, zap.NewNop())
	if err := lp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := lp.ConsumeLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between()
	}
	deadline := time.Now().Add(30 * time.Second)
	for lp.pendingCount() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := lp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []plog.LogRecord
	for _, l := range sink.AllLogs() {
		for i := 0; i < l.ResourceLogs().Len(); i++ {
			sls := l.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
					out = append(out, sls.At(j).LogRecords().At(k))
				}
			}
		}
	}
	return out
}

func origOf(r plog.LogRecord) string {
	v, _ := r.Attributes().Get(DefaultOriginalTraceIDAttribute)
	return v.Str()
}

func routeOf(r plog.LogRecord) string {
	id := r.TraceID()
	return string(id[:])
}

func hexOf(b byte) string {
	t := tid(b)
	return hex.EncodeToString(t[:])
}

func TestProcessLogsRoutedAtOnce(t *testing.T) {
	p := newTestProcessor()
	// Trace 1 is a conversation whose id sits on the root span only; trace 2 has none.
	_, _ = p.processTraces(context.Background(), buildTraces(nil,
		spanSpec{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}}, spanSpec{1, 2, 1, nil},
		spanSpec{2, 3, 0, nil}))
	cfg := createDefaultConfig()
	cfg.LogWaitDuration = 0
	ld := buildLogs(nil,
		logSpec{1, nil}, // follows its trace's conversation (already routed)
		logSpec{5, map[string]any{"session.id": "c-1"}}, // its own id
		logSpec{2, nil}, // trace without conversation
		logSpec{9, nil}, // unknown trace: its trace id
		logSpec{0, map[string]any{"gen_ai.conversation.id": "c-1"}}, // no trace id: left alone
	)
	recs := runLogs(t, p, cfg, ld, nil)
	if len(recs) != 5 {
		t.Fatalf("%d records out", len(recs))
	}
	wants := []struct {
		key  string
		orig byte
	}{{routingKey("c-1"), 1}, {routingKey("c-1"), 5}, {traceKey(2), 2}, {traceKey(9), 9}}
	for i, w := range wants {
		if routeOf(recs[i]) != w.key || origOf(recs[i]) != hexOf(w.orig) {
			t.Errorf("record %d: routed %q (want %q), original %q", i, routeOf(recs[i]), w.key, origOf(recs[i]))
		}
	}
	if !recs[4].TraceID().IsEmpty() || origOf(recs[4]) != "" {
		t.Error("a record without trace id must stay as it is")
	}
	// Through a second gateway: the first routing is kept.
	again := plog.NewLogs()
	recs[0].CopyTo(again.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	out := runLogs(t, p, cfg, again, nil)
	if routeOf(out[0]) != routingKey("c-1") || origOf(out[0]) != hexOf(1) {
		t.Error("a rewritten record must not be rewritten again")
	}
}

func TestLogsResourceConversation(t *testing.T) {
	cfg := createDefaultConfig()
	recs := runLogs(t, newTestProcessor(), cfg, buildLogs(map[string]any{"gen_ai.conversation.id": "c-7"}, logSpec{4, nil}), nil)
	if routeOf(recs[0]) != routingKey("c-7") {
		t.Fatalf("routed %q", routeOf(recs[0]))
	}
}

// TestLogsWaitForTheirTrace: an event that names no conversation arrives before
// groupbytrace releases its trace (whose root names one): it is held, then routed with
// the conversation's key once the trace has been routed.
func TestLogsWaitForTheirTrace(t *testing.T) {
	p := newTestProcessor()
	cfg := createDefaultConfig()
	cfg.LogWaitDuration = 30 * time.Second
	recs := runLogs(t, p, cfg, buildLogs(nil, logSpec{1, nil}, logSpec{1, nil}), func() {
		_, _ = p.processTraces(context.Background(), buildTraces(nil,
			spanSpec{1, 1, 0, map[string]any{"gen_ai.conversation.id": "c-1"}}, spanSpec{1, 2, 1, nil}))
	})
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if routeOf(r) != routingKey("c-1") || origOf(r) != hexOf(1) {
			t.Fatalf("routed %q, original %q", routeOf(r), origOf(r))
		}
	}
}

func TestLogsWhoseTraceNeverComesGoByTraceID(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.LogWaitDuration = 50 * time.Millisecond
	recs := runLogs(t, newTestProcessor(), cfg, buildLogs(nil, logSpec{3, nil}), nil)
	if len(recs) != 1 || routeOf(recs[0]) != traceKey(3) {
		t.Fatalf("records %d", len(recs))
	}
}

func TestPendingLogsBounded(t *testing.T) {
	p := newTestProcessor()
	cfg := createDefaultConfig()
	cfg.LogWaitDuration = time.Hour
	cfg.MaxPendingLogs = 2
	sink := new(consumertest.LogsSink)
	lp := newLogsProcessor(p, cfg, sink, zap.NewNop())
	_ = lp.Start(context.Background(), componenttest.NewNopHost())
	_ = lp.ConsumeLogs(context.Background(), buildLogs(nil, logSpec{1, nil}, logSpec{2, nil}, logSpec{3, nil}, logSpec{4, nil}))
	if lp.pendingCount() != 2 || sink.LogRecordCount() != 2 {
		t.Fatalf("held %d, forwarded %d", lp.pendingCount(), sink.LogRecordCount())
	}
	if lp.overflow != 2 {
		t.Fatalf("overflow counted %d", lp.overflow)
	}
	// Shutdown forwards what is held: nothing acknowledged is dropped.
	_ = lp.Shutdown(context.Background())
	if sink.LogRecordCount() != 4 {
		t.Fatalf("after shutdown %d", sink.LogRecordCount())
	}
}

func TestTraceCacheBounded(t *testing.T) {
	c := newTraceCache(3)
	for i := 1; i <= 10; i++ {
		c.put(tid(byte(i)), "k")
	}
	if c.len() != 3 {
		t.Fatalf("cache holds %d entries, bound is 3", c.len())
	}
	if _, ok := c.get(tid(10)); !ok {
		t.Fatal("newest entry evicted")
	}
	if _, ok := c.get(tid(1)); ok {
		t.Fatal("oldest entry kept")
	}
	c.put(tid(10), "k2")
	if v, _ := c.get(tid(10)); v != "k2" || c.len() != 3 {
		t.Fatal("re-put must update in place")
	}
	zero := newTraceCache(0)
	zero.put(tid(1), "k")
	if zero.len() != 0 {
		t.Fatal("size 0 disables the cache")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"empty routing attribute", func(c *Config) { c.RoutingAttribute = "" }, false},
		{"empty original attribute", func(c *Config) { c.OriginalTraceIDAttribute = "" }, false},
		{"negative cache", func(c *Config) { c.TraceCacheSize = -1 }, false},
		{"empty extra key", func(c *Config) { c.ConversationIDKeys = []string{""} }, false},
		{"too many keys", func(c *Config) { c.ConversationIDKeys = make([]string, 33) }, false},
		{"negative log wait", func(c *Config) { c.LogWaitDuration = -time.Second }, false},
		{"negative pending", func(c *Config) { c.MaxPendingLogs = -1 }, false},
	}
	for _, tc := range cases {
		cfg := createDefaultConfig()
		tc.mod(cfg)
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
}

// TestFactoryPipeline runs the processor as the Collector does, through its factory and
// processorhelper, into a sink.
func TestFactoryPipeline(t *testing.T) {
	f := NewFactory()
	if f.Type().String() != typeStr {
		t.Fatalf("type %q", f.Type())
	}
	cfg := f.CreateDefaultConfig()
	set := processortest.NewNopSettings(f.Type())
	traceSink := new(consumertest.TracesSink)
	tp, err := f.CreateTraces(context.Background(), set, cfg, traceSink)
	if err != nil {
		t.Fatal(err)
	}
	logSink := new(consumertest.LogsSink)
	lp, err := f.CreateLogs(context.Background(), set, cfg, logSink)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	if err := tp.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if err := lp.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if !tp.Capabilities().MutatesData {
		t.Fatal("the processor mutates data and must say so")
	}
	td := buildTraces(nil, spanSpec{3, 1, 0, map[string]any{"gen_ai.conversation.id": "c-9"}}, spanSpec{3, 2, 1, nil})
	if err := tp.ConsumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	// The logs instance of the same component shares the traces instance's memory.
	if err := lp.ConsumeLogs(context.Background(), buildLogs(nil, logSpec{3, nil})); err != nil {
		t.Fatal(err)
	}
	if traceSink.SpanCount() != 2 || logSink.LogRecordCount() != 1 {
		t.Fatalf("sinks: %d spans, %d logs", traceSink.SpanCount(), logSink.LogRecordCount())
	}
	got := collect(traceSink.AllTraces()[0])
	if got[2].route != routingKey("c-9") || got[2].conv != "c-9" {
		t.Fatalf("child span: %+v", got[2])
	}
	logID := logSink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).TraceID()
	if string(logID[:]) != routingKey("c-9") {
		t.Fatalf("log routed by %q", string(logID[:]))
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := lp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
