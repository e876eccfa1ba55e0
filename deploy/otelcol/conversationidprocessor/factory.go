package conversationidprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
)

const typeStr = "conversationid"

// componentType is the name the processor has in a Collector configuration.
var componentType = component.MustNewType(typeStr)

// NewFactory returns the factory the distribution registers.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		componentType,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, component.StabilityLevelAlpha),
		processor.WithLogs(createLogs, component.StabilityLevelAlpha),
	)
}

var mutates = processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true})

func newFor(set processor.Settings, cfg component.Config) *conversationProcessor {
	c := cfg.(*Config)
	return newConversationProcessor(c, cacheFor(set.ID.String(), c.TraceCacheSize))
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p := newFor(set, cfg)
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces, mutates)
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	return newLogsProcessor(newFor(set, cfg), cfg.(*Config), next, set.Logger), nil
}
