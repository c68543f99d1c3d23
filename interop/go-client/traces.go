package main

// The trace scenario (see scenarios.go's comment):
//
//	trace NAMESRV TOPIC GROUP N TIMEOUT
//	    a producer and a push consumer, both WithTrace (traces to RMQ_SYS_TRACE_TOPIC): N sync
//	    sends "trace-I" (tag "traced", key "trace-key-I"): SEND mode status msgId queueId
//	    queueOffset offsetMsgId; the consumer in GROUP: MSG body msgId. The client's trace
//	    dispatcher drops what is still in flight at Shutdown, so before shutting down a reader
//	    (group GROUP_trace_reader) consumes the trace topic until it holds a Pub for every sent
//	    msgId and a SubAfter for every consumed one: TRACED pubs subAfters.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

const traceTopic = "RMQ_SYS_TRACE_TOPIC"

// traceRecords are the (type, msgId) pairs of a trace message's body: records end with \x02,
// fields with \x01; a Pub's msgId is its sixth field, a SubAfter's its third.
func traceRecords(body []byte) [][2]string {
	var out [][2]string
	for _, record := range strings.Split(string(body), "\x02") {
		f := strings.Split(record, "\x01")
		switch {
		case f[0] == "Pub" && len(f) > 5:
			out = append(out, [2]string{"Pub", f[5]})
		case f[0] == "SubAfter" && len(f) > 2:
			out = append(out, [2]string{"SubAfter", f[2]})
		}
	}
	return out
}

// traceReader collects the traced message ids of each type until every wanted one is there.
type traceReader struct {
	mu     sync.Mutex
	seen   map[string]map[string]bool
	want   map[string][]string
	done   chan struct{}
	closed bool
}

func (r *traceReader) add(msgs ...*primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		for _, rec := range traceRecords(m.Body) {
			if r.seen[rec[0]] == nil {
				r.seen[rec[0]] = map[string]bool{}
			}
			r.seen[rec[0]][rec[1]] = true
		}
	}
	for kind, ids := range r.want {
		for _, id := range ids {
			if !r.seen[kind][id] {
				return
			}
		}
	}
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

func trace(ns, topic, group string, n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	config := func(group string) *primitive.TraceConfig {
		return &primitive.TraceConfig{NamesrvAddrs: []string{ns}, GroupName: group}
	}
	p := newProducer(ns, producer.WithTrace(config("bolide_go_scenarios_pg")))
	defer func() { _ = p.Shutdown() }()
	var sent []string
	for i := 0; i < n; i++ {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("trace-%d", i))).
			WithTag("traced").WithKeys([]string{"trace-key-" + strconv.Itoa(i)})
		r, err := p.SendSync(context.Background(), msg)
		if err != nil {
			fail(1, "send %d: %v", i, err)
		}
		printSend("sync", r)
		sent = append(sent, r.MsgID)
	}
	got := newDistinct(n)
	c := startPush(ns, topic, group, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit("MSG", string(m.Body), m.MsgId)
			got.add(m.MsgId)
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithTrace(config(group)))
	defer func() { _ = c.Shutdown() }()
	if !wait(got.done, deadline) {
		emit("TIMEOUT", "consume")
		return 3
	}
	got.mu.Lock()
	consumed := make([]string, 0, len(got.seen))
	for id := range got.seen {
		consumed = append(consumed, id)
	}
	got.mu.Unlock()
	reader := &traceReader{seen: map[string]map[string]bool{}, done: make(chan struct{}),
		want: map[string][]string{"Pub": sent, "SubAfter": consumed}}
	r := startPush(ns, traceTopic, group+"_trace_reader", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		reader.add(msgs...)
		return consumer.ConsumeSuccess, nil
	})
	defer func() { _ = r.Shutdown() }()
	if !wait(reader.done, deadline) {
		reader.mu.Lock()
		emit("TIMEOUT", "traces", strconv.Itoa(len(reader.seen["Pub"])), strconv.Itoa(len(reader.seen["SubAfter"])))
		reader.mu.Unlock()
		return 3
	}
	emit("TRACED", strconv.Itoa(len(sent)), strconv.Itoa(len(consumed)))
	return 0
}
