// Command goclient drives the official Apache RocketMQ Go client (rocketmq-client-go/v2, unmodified)
// against a broker, for Bolide's interop tests.
//
//	goclient produce <namesrv> <topic> <n>
//	    n sync sends; message i has body "body-i", tag "tag<i%3>" and keys "key-i", "k<i%2>".
//	    Prints one line per result: SEND \t status \t msgId \t broker \t queueId \t queueOffset.
//	goclient consume <namesrv> <topic> <group> <n> <timeoutSec>
//	    push consumer (clustering, consume from first offset, subscription "*"). Prints one line per
//	    delivered message: MSG \t body \t tags \t keys \t queueId \t queueOffset \t msgId.
//	    Exits 0 after n distinct message ids, 3 when timeoutSec passes first.
//
// scenarios.go adds send-modes, retry, orderly, group, lite-pull and transaction (see its comment).
//
// The client's own logging goes to stderr at level "error" (ROCKETMQ_GO_LOG_LEVEL overrides it).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var out sync.Mutex

func emit(fields ...string) {
	out.Lock()
	defer out.Unlock()
	fmt.Fprintln(os.Stdout, strings.Join(fields, "\t"))
}

func fail(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "goclient: "+format+"\n", args...)
	os.Exit(code)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(2, "not a number: %q", s)
	}
	return n
}

func statusName(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	default:
		return fmt.Sprintf("STATUS_%d", int(s))
	}
}

func produce(ns, topic string, n int) {
	p, err := rmq.NewProducer(
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName("bolide_go_client_pg"),
		producer.WithInstanceName(fmt.Sprintf("bolide-go-p-%d", os.Getpid())),
		producer.WithRetry(2),
	)
	if err != nil {
		fail(1, "new producer: %v", err)
	}
	if err = p.Start(); err != nil {
		fail(1, "start producer: %v", err)
	}
	defer func() { _ = p.Shutdown() }()
	for i := 0; i < n; i++ {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("body-%d", i))).
			WithTag(fmt.Sprintf("tag%d", i%3)).
			WithKeys([]string{fmt.Sprintf("key-%d", i), fmt.Sprintf("k%d", i%2)})
		res, err := p.SendSync(context.Background(), msg)
		if err != nil {
			fail(1, "send %d: %v", i, err)
		}
		emit("SEND", statusName(res.Status), res.MsgID, res.MessageQueue.BrokerName,
			strconv.Itoa(res.MessageQueue.QueueId), strconv.FormatInt(res.QueueOffset, 10))
	}
}

func consume(ns, topic, group string, n int, timeout time.Duration) {
	c, err := rmq.NewPushConsumer(
		consumer.WithNameServer([]string{ns}),
		consumer.WithGroupName(group),
		consumer.WithInstance(fmt.Sprintf("bolide-go-c-%d", os.Getpid())),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		fail(1, "new push consumer: %v", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				emit("MSG", string(m.Body), m.GetTags(), m.GetKeys(), strconv.Itoa(m.Queue.QueueId),
					strconv.FormatInt(m.QueueOffset, 10), m.MsgId)
				mu.Lock()
				if !seen[m.MsgId] {
					seen[m.MsgId] = true
					if len(seen) == n {
						close(done)
					}
				}
				mu.Unlock()
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail(1, "subscribe: %v", err)
	}
	if err = c.Start(); err != nil {
		fail(1, "start push consumer: %v", err)
	}
	select {
	case <-done:
		_ = c.Shutdown()
	case <-time.After(timeout):
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		_ = c.Shutdown()
		fail(3, "timeout after %v: %d of %d messages", timeout, got, n)
	}
}

func main() {
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("error")
	}
	args := os.Args[1:]
	runScenario(args) // scenarios.go: exits when args name one of its commands
	switch {
	case len(args) == 4 && args[0] == "produce":
		produce(args[1], args[2], atoi(args[3]))
	case len(args) == 6 && args[0] == "consume":
		consume(args[1], args[2], args[3], atoi(args[4]), time.Duration(atoi(args[5]))*time.Second)
	default:
		fail(2, "usage: goclient produce <namesrv> <topic> <n> | "+
			"consume <namesrv> <topic> <group> <n> <timeoutSec> | a command of scenarios.go")
	}
}
