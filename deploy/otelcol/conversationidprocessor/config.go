// Package conversationidprocessor keeps a conversation on one tracepass replica behind
// the Collector's loadbalancing exporter.
//
// The loadbalancing exporter can route spans by one attribute, but it reads that
// attribute on the first span of each trace only, and it routes logs by trace id only.
// A conversation id usually sits on some spans of a trace (often the turn's root alone)
// and a conversation spans several traces, so neither stock key keeps a conversation
// whole. This processor runs after groupbytrace (which hands it whole traces): it finds
// the conversation id on any span of a trace or on its resource, copies it onto the spans
// that lack one, and writes one routing attribute on every span: a short digest of the
// conversation id, or of the trace id when no span of the trace carries a conversation.
// For logs it rewrites the trace id to the same digest (keeping the original in an
// attribute tracepass restores), so the trace-id routing of logs lands a log event on the
// replica of its conversation.
package conversationidprocessor

import (
	"errors"
	"fmt"
	"time"
)

// Built-in conversation id keys, in tracepass's resolution order
// (collector/src/tracepass/collector/normalize/conversation_ids.py): the first that
// carries a non-empty value wins.
var builtinKeys = []string{
	"gen_ai.conversation.id",
	"session.id",
	"traceloop.association.properties.session_id",
	"traceloop.association.properties.conversation_id",
	"traceloop.association.properties.thread_id",
}

const (
	// DefaultRoutingAttribute is the span attribute the loadbalancing exporter is
	// configured to route on (routing_key: attributes).
	DefaultRoutingAttribute = "tracepass.routing_key"
	// DefaultOriginalTraceIDAttribute holds a log record's own trace id (32 hex digits)
	// once the processor has replaced it with the routing digest.
	DefaultOriginalTraceIDAttribute = "tracepass.original_trace_id"
	// DefaultTraceCacheSize bounds the trace id -> routing key memory kept for logs
	// (about 60 bytes an entry).
	DefaultTraceCacheSize = 100_000
	// routingKeyLen is the length of the routing digest: 16 ASCII hex characters, which
	// is also the 16 bytes of a trace id, so spans and logs hash to one ring position.
	routingKeyLen = 16
	maxExtraKeys  = 32
	// DefaultLogWaitDuration is how long a log record whose trace has not been released
	// yet waits for it: groupbytrace's default wait_duration (1 s) plus a margin.
	DefaultLogWaitDuration = 2 * time.Second
	// DefaultMaxPendingLogs bounds the records waiting for their trace.
	DefaultMaxPendingLogs = 10_000
)

// Config is the processor's configuration.
type Config struct {
	// ConversationIDKeys are extra attribute keys read after the built-in ones, on spans,
	// log records and resources (tracepass's own conversation_id_keys setting).
	ConversationIDKeys []string `mapstructure:"conversation_id_keys"`
	// RoutingAttribute is the span attribute written with the routing digest.
	RoutingAttribute string `mapstructure:"routing_attribute"`
	// OriginalTraceIDAttribute is the log attribute that keeps a record's own trace id.
	OriginalTraceIDAttribute string `mapstructure:"original_trace_id_attribute"`
	// TraceCacheSize bounds how many traces' routing keys are remembered for their logs.
	TraceCacheSize int `mapstructure:"trace_cache_size"`
	// LogWaitDuration is how long a log record that names no conversation, and whose
	// trace the traces pipeline has not released yet, is held so that it follows its
	// trace's routing; set it above groupbytrace's wait_duration. 0 routes at once.
	LogWaitDuration time.Duration `mapstructure:"log_wait_duration"`
	// MaxPendingLogs bounds how many records are held; past it a record is routed at
	// once by its trace id (counted in the log).
	MaxPendingLogs int `mapstructure:"max_pending_logs"`
}

func createDefaultConfig() *Config {
	return &Config{
		RoutingAttribute:         DefaultRoutingAttribute,
		OriginalTraceIDAttribute: DefaultOriginalTraceIDAttribute,
		TraceCacheSize:           DefaultTraceCacheSize,
		LogWaitDuration:          DefaultLogWaitDuration,
		MaxPendingLogs:           DefaultMaxPendingLogs,
	}
}

// Validate reports a configuration the processor cannot run with.
func (c *Config) Validate() error {
	var errs []error
	if c.RoutingAttribute == "" {
		errs = append(errs, errors.New("routing_attribute must not be empty"))
	}
	if c.OriginalTraceIDAttribute == "" {
		errs = append(errs, errors.New("original_trace_id_attribute must not be empty"))
	}
	if c.TraceCacheSize < 0 {
		errs = append(errs, fmt.Errorf("trace_cache_size must be >= 0, got %d", c.TraceCacheSize))
	}
	if c.LogWaitDuration < 0 {
		errs = append(errs, fmt.Errorf("log_wait_duration must be >= 0, got %s", c.LogWaitDuration))
	}
	if c.MaxPendingLogs < 0 {
		errs = append(errs, fmt.Errorf("max_pending_logs must be >= 0, got %d", c.MaxPendingLogs))
	}
	if len(c.ConversationIDKeys) > maxExtraKeys {
		errs = append(errs, fmt.Errorf("conversation_id_keys: at most %d keys, got %d", maxExtraKeys, len(c.ConversationIDKeys)))
	}
	for i, k := range c.ConversationIDKeys {
		if k == "" {
			errs = append(errs, fmt.Errorf("conversation_id_keys[%d] must not be empty", i))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) keys() []string {
	return append(append([]string(nil), builtinKeys...), c.ConversationIDKeys...)
}
