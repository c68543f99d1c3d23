// Command go5client drives the official RocketMQ 5 Go client over gRPC
// (github.com/apache/rocketmq-clients/golang/v5, unmodified) against a broker's gRPC endpoint,
// for the interop tests:
//
//	go5client scenario HOST:PORT
//
// Topics N5 (NORMAL), F5 (FIFO), D5 (MIXED) and X5 (TRANSACTION) and the FIFO group fifo_g
// must exist. It prints the lines of interop/java-client/BolideGrpcClient.java, tab-separated:
// SENT id; SIMPLE body tag keys seq attempt id; AGAIN body attempt; FIFO body; PUSH body attempt
// receivedMs; CHECKED body; DUE ms; DONE. This client has no recall API, so unlike the other
// drivers it sends no message to recall. The client keeps its default settings: TLS, unless the
// environment has rocketmq.client.enableSsl=false.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

var out sync.Mutex

func emit(fields ...string) {
	out.Lock()
	defer out.Unlock()
	fmt.Println(strings.Join(fields, "\t"))
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func config(endpoint, group string) *rmq.Config {
	return &rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// receive asks until it has want messages or the deadline passes (an empty answer is an error
// for this client).
func receive(c rmq.SimpleConsumer, want int, wait time.Duration) []*rmq.MessageView {
	var got []*rmq.MessageView
	deadline := time.Now().Add(wait)
	for len(got) < want && time.Now().Before(deadline) {
		views, err := c.Receive(context.Background(), 16, 30*time.Second)
		if err == nil {
			got = append(got, views...)
		}
	}
	return got
}

func scenario(endpoint string) {
	ctx := context.Background()
	producer, err := rmq.NewProducer(config(endpoint, ""), rmq.WithTopics("N5", "F5", "D5", "X5"),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{
			Check: func(view *rmq.MessageView) rmq.TransactionResolution {
				emit("CHECKED", string(view.GetBody()))
				return rmq.COMMIT
			},
		}))
	must(err, "producer")
	must(producer.Start(), "producer start")
	for i := 0; i < 4; i++ {
		msg := &rmq.Message{Topic: "N5", Body: []byte(fmt.Sprintf("n%d", i))}
		msg.SetTag("TagA")
		msg.SetKeys(fmt.Sprintf("key%d", i))
		msg.AddProperty("seq", strconv.Itoa(i))
		receipts, err := producer.Send(ctx, msg)
		must(err, "send N5")
		emit("SENT", receipts[0].MessageID)
	}
	for i := 0; i < 3; i++ {
		for _, group := range []string{"ga", "gb"} {
			msg := &rmq.Message{Topic: "F5", Body: []byte(fmt.Sprintf("%s-%d", group, i))}
			msg.SetMessageGroup(group)
			_, err := producer.Send(ctx, msg)
			must(err, "send F5")
		}
	}
	due := time.Now().Add(2 * time.Second)
	later := &rmq.Message{Topic: "D5", Body: []byte("later")}
	later.SetDelayTimestamp(due)
	_, err = producer.Send(ctx, later)
	must(err, "send later")
	emit("DUE", millis(due))
	_, err = producer.Send(ctx, &rmq.Message{Topic: "D5", Body: []byte("retry-me")})
	must(err, "send retry-me")
	for _, end := range []string{"commit", "rollback", "check"} {
		tx := producer.BeginTransaction()
		_, err := producer.SendWithTransaction(ctx, &rmq.Message{Topic: "X5", Body: []byte("tx-" + end)}, tx)
		must(err, "send tx-"+end)
		switch end {
		case "commit":
			must(tx.Commit(), "commit")
		case "rollback":
			must(tx.RollBack(), "rollback")
		}
	}

	simple, err := rmq.NewSimpleConsumer(config(endpoint, "simple_g"), rmq.WithSimpleAwaitDuration(5*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{"N5": rmq.NewFilterExpression("TagA")}))
	must(err, "simple consumer")
	must(simple.Start(), "simple consumer start")
	got := receive(simple, 4, 20*time.Second)
	for _, m := range got {
		keys := m.GetKeys()
		sort.Strings(keys)
		tag := ""
		if m.GetTag() != nil {
			tag = *m.GetTag()
		}
		emit("SIMPLE", string(m.GetBody()), tag, strings.Join(keys, ","), m.GetProperties()["seq"],
			strconv.Itoa(int(m.GetDeliveryAttempt())), m.GetMessageId())
	}
	if len(got) == 0 {
		must(fmt.Errorf("nothing received"), "simple receive")
	}
	must(simple.ChangeInvisibleDuration(got[0], time.Second), "change invisible duration")
	for _, m := range receive(simple, 1, 20*time.Second) {
		emit("AGAIN", string(m.GetBody()), strconv.Itoa(int(m.GetDeliveryAttempt())))
		must(simple.Ack(ctx, m), "ack again")
	}
	for _, m := range got[1:] {
		must(simple.Ack(ctx, m), "ack")
	}
	must(simple.GracefulStop(), "simple consumer stop")

	fifo, err := rmq.NewSimpleConsumer(config(endpoint, "fifo_g"), rmq.WithSimpleAwaitDuration(5*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{"F5": rmq.SUB_ALL}))
	must(err, "fifo consumer")
	must(fifo.Start(), "fifo consumer start")
	count := 0
	deadline := time.Now().Add(30 * time.Second)
	for count < 6 && time.Now().Before(deadline) {
		views, err := fifo.Receive(ctx, 16, 30*time.Second)
		if err != nil {
			continue
		}
		for _, m := range views {
			emit("FIFO", string(m.GetBody()))
			must(fifo.Ack(ctx, m), "ack fifo")
			count++
		}
	}
	must(fifo.GracefulStop(), "fifo consumer stop")

	var mu sync.Mutex
	seen := map[string]bool{}
	retried := 0
	push, err := rmq.NewPushConsumer(config(endpoint, "push_g"),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{"D5": rmq.SUB_ALL, "X5": rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{
			Consume: func(view *rmq.MessageView) rmq.ConsumerResult {
				body, attempt := string(view.GetBody()), view.GetDeliveryAttempt()
				emit("PUSH", body, strconv.Itoa(int(attempt)), millis(time.Now()))
				mu.Lock()
				defer mu.Unlock()
				seen[body] = true
				if body == "retry-me" {
					retried++
					if attempt == 1 {
						return rmq.FAILURE
					}
				}
				return rmq.SUCCESS
			},
		}))
	must(err, "push consumer")
	must(push.Start(), "push consumer start")
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["later"] && seen["retry-me"] && seen["tx-commit"] && seen["tx-check"] && retried >= 2
	}
	until := time.Now().Add(60 * time.Second)
	for !done() && time.Now().Before(until) {
		time.Sleep(200 * time.Millisecond)
	}
	emit("DONE")
	os.Exit(0) // not GracefulStop: it waits for the consumer's long polls in flight
}

func main() {
	if len(os.Args) != 3 || os.Args[1] != "scenario" {
		fmt.Fprintln(os.Stderr, "usage: go5client scenario HOST:PORT")
		os.Exit(2)
	}
	scenario(os.Args[2])
}
