package conversationidprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
)

// logsProcessor routes log records like the spans of their trace. A GenAI log event
// often names no conversation, and it usually arrives before groupbytrace releases its
// trace (that happens wait_duration after the trace's first span), so the key the trace
// will be routed by is not known yet: such a record is held, bounded in time
// (log_wait_duration) and count (max_pending_logs), until its trace has been routed or
// its time is up (then it is routed by its trace id, as the trace will be if no span
// names a conversation). Records that name a conversation, or whose trace was already
// routed, go on at once. Held records are acknowledged to the sender, like the spans
// groupbytrace holds: a gateway crash loses them (docs/operations.md).
type logsProcessor struct {
	p          *conversationProcessor
	next       consumer.Logs
	logger     *zap.Logger
	wait       time.Duration
	maxPending int
	tick       time.Duration

	mu       sync.Mutex
	pending  []pendingLog
	overflow int64
	lastWarn time.Time

	stop chan struct{}
	done chan struct{}
}

type pendingLog struct {
	tid      pcommon.TraceID
	deadline time.Time
	logs     plog.Logs // one resource, one scope, one record
}

func newLogsProcessor(p *conversationProcessor, cfg *Config, next consumer.Logs, logger *zap.Logger) *logsProcessor {
	tick := cfg.LogWaitDuration / 20
	if tick < 20*time.Millisecond {
		tick = 20 * time.Millisecond
	}
	if tick > 250*time.Millisecond {
		tick = 250 * time.Millisecond
	}
	return &logsProcessor{
		p: p, next: next, logger: logger, wait: cfg.LogWaitDuration,
		maxPending: cfg.MaxPendingLogs, tick: tick,
	}
}

func (l *logsProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (l *logsProcessor) Start(context.Context, component.Host) error {
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
	go l.loop()
	return nil
}

// Shutdown releases every held record (routed by what is known now).
func (l *logsProcessor) Shutdown(ctx context.Context) error {
	if l.stop == nil {
		return nil
	}
	close(l.stop)
	<-l.done
	l.stop = nil
	return l.release(ctx, true)
}

func (l *logsProcessor) loop() {
	defer close(l.done)
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.release(context.Background(), false); err != nil {
				l.logger.Warn("held log records could not be forwarded", zap.Error(err))
			}
		}
	}
}

// ConsumeLogs forwards what can be routed now and holds the rest.
func (l *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	now := time.Now()
	var held []pendingLog
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		_, resText, resOK := l.p.findID(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			sl.LogRecords().RemoveIf(func(rec plog.LogRecord) bool {
				if !l.p.needsRouting(rec) {
					return false
				}
				key, final := l.p.logKey(rec, resText, resOK)
				if final || l.wait == 0 || !l.reserve(len(held)) {
					l.p.rewriteLog(rec, key)
					return false
				}
				one := plog.NewLogs()
				orl := one.ResourceLogs().AppendEmpty()
				rl.Resource().CopyTo(orl.Resource())
				orl.SetSchemaUrl(rl.SchemaUrl())
				osl := orl.ScopeLogs().AppendEmpty()
				sl.Scope().CopyTo(osl.Scope())
				osl.SetSchemaUrl(sl.SchemaUrl())
				rec.CopyTo(osl.LogRecords().AppendEmpty())
				held = append(held, pendingLog{tid: rec.TraceID(), deadline: now.Add(l.wait), logs: one})
				return true
			})
		}
	}
	if len(held) > 0 {
		l.mu.Lock()
		l.pending = append(l.pending, held...)
		l.mu.Unlock()
	}
	if ld.LogRecordCount() == 0 {
		return nil
	}
	return l.next.ConsumeLogs(ctx, ld)
}

// reserve says whether one more record may be held (extra: records of the current
// request not yet added); a refusal is counted and logged at most once a minute.
func (l *logsProcessor) reserve(extra int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending)+extra < l.maxPending {
		return true
	}
	l.overflow++
	if time.Since(l.lastWarn) > time.Minute {
		l.lastWarn = time.Now()
		l.logger.Warn("max_pending_logs reached: log records routed by trace id without waiting for their trace",
			zap.Int("max_pending_logs", l.maxPending), zap.Int64("routed_without_waiting_total", l.overflow))
	}
	return false
}

// release forwards the held records whose trace has been routed, or whose time is up
// (all of them when flush is set), in one request.
func (l *logsProcessor) release(ctx context.Context, flush bool) error {
	now := time.Now()
	out := plog.NewLogs()
	l.mu.Lock()
	kept := l.pending[:0]
	for _, pl := range l.pending {
		key, known := l.p.cache.get(pl.tid)
		if !known && !flush && now.Before(pl.deadline) {
			kept = append(kept, pl)
			continue
		}
		if !known {
			key = routingKey(hex16(pl.tid))
		}
		rec := pl.logs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
		l.p.rewriteLog(rec, key)
		pl.logs.ResourceLogs().MoveAndAppendTo(out.ResourceLogs())
	}
	for i := len(kept); i < len(l.pending); i++ {
		l.pending[i] = pendingLog{}
	}
	l.pending = kept
	l.mu.Unlock()
	if out.LogRecordCount() == 0 {
		return nil
	}
	return l.next.ConsumeLogs(ctx, out)
}

func (l *logsProcessor) pendingCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}
