// Client scenarios beyond the plain round trip, with the same protocol lines as
// interop/java-client/BolideScenarios.java where the Go API allows. Every command prints
// tab-separated lines and ends with "DONE" (exit 0), or prints "TIMEOUT ..." and exits 3.
//
//	send-modes NAMESRV TOPIC N
//	    N SendSync, N SendAsync, N SendOneWay and one batch SendSync(ctx, msgs...) of N:
//	    SEND mode status msgId queueId queueOffset offsetMsgId (oneway: no result). Go sets no
//	    UNIQ_KEY on batched messages, so a batch's msgId is empty; offsetMsgId lists one id each.
//	retry NAMESRV TOPIC GROUP N MAX TIMEOUT
//	    push consumer with WithMaxReconsumeTimes(MAX) that fails even bodies once and odd bodies
//	    always (ConsumeRetryLater): MSG body reconsumeTimes topic msgId; then a second push
//	    consumer (group GROUP_dlq_reader) reads %DLQ%GROUP: DLQ body reconsumeTimes topic RETRY_TOPIC
//	orderly NAMESRV TOPIC GROUP N KEYS TIMEOUT
//	    sends N messages "K:I" to a queue chosen by key K (KEYS keys) with a queue selector, then
//	    a WithConsumerOrder(true) consumer prints MSG body queueId queueOffset
//	group NAMESRV TOPIC GROUP MODEL N TIMEOUT
//	    two push consumers (instances a and b) in one group, MODEL CLUSTERING or BROADCASTING;
//	    once the rebalance has split (or, broadcasting, given each) the queues, read from each
//	    consumer's GetConsumerRunningInfo (its process queue table): ASSIGNED na nb; then N
//	    messages are sent: MSG instance body msgId
//	lite-pull NAMESRV TOPIC GROUP N TIMEOUT
//	    sends N messages "lite-I", then the subscribing pull consumer (Poll and ACK, the Go
//	    counterpart of DefaultLitePullConsumer) prints MSG body queueId queueOffset and, once it
//	    has all, persists its offsets (PersistOffset)
//	transaction NAMESRV TOPIC GROUP N TIMEOUT
//	    TransactionProducer sends N messages "tx-I" (tag "tx", key "key-I"); the local transaction
//	    commits even I, rolls back odd I, except I%4==1: UNKNOW, later committed by
//	    CheckLocalTransaction: SEND status msgId state I and CHECK I state topic msgId. The producer
//	    keeps running (its check answers are oneway) until a push consumer in GROUP has received
//	    every committed message: MSG body tags keys queueId queueOffset msgId.
//	sql NAMESRV TOPIC GROUP N EXPECT EXPRESSION TIMEOUT
//	    sends N messages "sql-I" with the user property n=I and tag even or odd, then a push
//	    consumer subscribed with MessageSelector{Type: SQL92, Expression: EXPRESSION} prints
//	    MSG body n tags until EXPECT distinct messages arrived.
//	acl NAMESRV TOPIC GROUP N ACCESS_KEY SECRET_KEY TIMEOUT
//	    with WithCredentials(ACCESS_KEY, SECRET_KEY): N sync sends and a batch of 2 (SEND mode
//	    status ...), a push consumer printing MSG body until all N + 2 arrived; then one send with
//	    a wrong secret and one unsigned: REFUSED mode reason.
//	request NAMESRV TOPIC N TIMEOUT
//	    N Producer.Request calls one after the other ("go-ask-I"), each waiting up to TIMEOUT
//	    seconds for the reply: REPLY body topic correlationId. (Go's consumer.CreateReplyMessage
//	    of this version leaves the reply's body empty, so Go cannot answer requests.)
//	trace NAMESRV TOPIC GROUP N TIMEOUT
//	    a producer and a push consumer WithTrace; see traces.go.
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
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// runScenario runs a scenario command and exits; it returns only when args name none.
func runScenario(args []string) {
	var code int
	switch {
	case len(args) == 4 && args[0] == "send-modes":
		code = sendModes(args[1], args[2], atoi(args[3]))
	case len(args) == 7 && args[0] == "retry":
		code = retry(args[1], args[2], args[3], atoi(args[4]), atoi(args[5]), seconds(args[6]))
	case len(args) == 7 && args[0] == "orderly":
		code = orderly(args[1], args[2], args[3], atoi(args[4]), atoi(args[5]), seconds(args[6]))
	case len(args) == 7 && args[0] == "group":
		code = group(args[1], args[2], args[3], args[4], atoi(args[5]), seconds(args[6]))
	case len(args) == 6 && args[0] == "lite-pull":
		code = litePull(args[1], args[2], args[3], atoi(args[4]), seconds(args[5]))
	case len(args) == 6 && args[0] == "transaction":
		code = transaction(args[1], args[2], args[3], atoi(args[4]), seconds(args[5]))
	case len(args) == 8 && args[0] == "sql":
		code = sql(args[1], args[2], args[3], atoi(args[4]), atoi(args[5]), args[6], seconds(args[7]))
	case len(args) == 8 && args[0] == "acl":
		code = acl(args[1], args[2], args[3], atoi(args[4]), args[5], args[6], seconds(args[7]))
	case len(args) == 5 && args[0] == "request":
		code = request(args[1], args[2], atoi(args[3]), seconds(args[4]))
	case len(args) == 6 && args[0] == "trace":
		code = trace(args[1], args[2], args[3], atoi(args[4]), seconds(args[5]))
	default:
		return
	}
	if code == 0 {
		emit("DONE")
	} else {
		emit("TIMEOUT")
	}
	os.Exit(code)
}

func seconds(s string) time.Duration {
	return time.Duration(atoi(s)) * time.Second
}

func instance(role string) string {
	return fmt.Sprintf("bolide-%s-%d-%d", role, os.Getpid(), time.Now().UnixNano())
}

// wait returns true when done is closed before the deadline.
func wait(done <-chan struct{}, deadline time.Time) bool {
	select {
	case <-done:
		return true
	case <-time.After(time.Until(deadline)):
		return false
	}
}

func newProducer(ns string, opts ...producer.Option) rmq.Producer {
	all := append([]producer.Option{
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName("bolide_go_scenarios_pg"),
		producer.WithInstanceName(instance("p")),
		producer.WithSendMsgTimeout(5 * time.Second),
		producer.WithRetry(2),
	}, opts...)
	p, err := rmq.NewProducer(all...)
	if err != nil {
		fail(1, "new producer: %v", err)
	}
	if err = p.Start(); err != nil {
		fail(1, "start producer: %v", err)
	}
	return p
}

func pushOptions(ns, group, name string, opts ...consumer.Option) []consumer.Option {
	return append([]consumer.Option{
		consumer.WithNameServer([]string{ns}),
		consumer.WithGroupName(group),
		consumer.WithInstance(name),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
}

type listener func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)

func startPush(ns, topic, group string, f listener, opts ...consumer.Option) rmq.PushConsumer {
	c, err := rmq.NewPushConsumer(pushOptions(ns, group, instance("c"), opts...)...)
	if err != nil {
		fail(1, "new push consumer: %v", err)
	}
	if err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, f); err != nil {
		fail(1, "subscribe %s: %v", topic, err)
	}
	if err = c.Start(); err != nil {
		fail(1, "start push consumer: %v", err)
	}
	return c
}

func printSend(mode string, r *primitive.SendResult) {
	emit("SEND", mode, statusName(r.Status), r.MsgID, strconv.Itoa(r.MessageQueue.QueueId),
		strconv.FormatInt(r.QueueOffset, 10), r.OffsetMsgID)
}

func modeMessage(topic, mode string, i int) *primitive.Message {
	text := fmt.Sprintf("%s-%d", mode, i)
	return primitive.NewMessage(topic, []byte(text)).WithTag(mode).WithKeys([]string{text})
}

func sendModes(ns, topic string, n int) int {
	p := newProducer(ns)
	defer func() { _ = p.Shutdown() }()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		r, err := p.SendSync(ctx, modeMessage(topic, "sync", i))
		if err != nil {
			fail(1, "sync send %d: %v", i, err)
		}
		printSend("sync", r)
	}
	var async sync.WaitGroup
	async.Add(n)
	for i := 0; i < n; i++ {
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer async.Done()
			if err != nil {
				emit("ERROR", "async", err.Error())
				return
			}
			printSend("async", r)
		}, modeMessage(topic, "async", i))
		if err != nil {
			fail(1, "async send %d: %v", i, err)
		}
	}
	done := make(chan struct{})
	go func() { async.Wait(); close(done) }()
	if !wait(done, time.Now().Add(30*time.Second)) {
		return 3
	}
	for i := 0; i < n; i++ {
		if err := p.SendOneWay(ctx, modeMessage(topic, "oneway", i)); err != nil {
			fail(1, "oneway send %d: %v", i, err)
		}
	}
	batch := make([]*primitive.Message, n)
	for i := range batch {
		batch[i] = modeMessage(topic, "batch", i)
	}
	r, err := p.SendSync(ctx, batch...)
	if err != nil {
		fail(1, "batch send: %v", err)
	}
	printSend("batch", r)
	return 0
}

func text(m *primitive.MessageExt) string {
	return string(m.Body)
}

func retry(ns, topic, group string, n, maxTimes int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	p := newProducer(ns)
	for i := 0; i < n; i++ {
		msg := primitive.NewMessage(topic, []byte(strconv.Itoa(i))).WithTag("retry").
			WithKeys([]string{fmt.Sprintf("r-%d", i)})
		if _, err := p.SendSync(context.Background(), msg); err != nil {
			fail(1, "send %d: %v", i, err)
		}
	}
	_ = p.Shutdown()

	evens, odds := (n+1)/2, n/2
	var mu sync.Mutex
	succeeded, exhausted := map[int]bool{}, map[int]bool{}
	done := make(chan struct{})
	var once sync.Once
	c := startPush(ns, topic, group, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		failed := false
		for _, m := range msgs {
			i := atoi(text(m))
			times := int(m.ReconsumeTimes)
			emit("MSG", text(m), strconv.Itoa(times), m.Topic, m.MsgId)
			mu.Lock()
			if i%2 == 0 && times > 0 {
				succeeded[i] = true
			} else {
				failed = true
				if i%2 == 1 && times >= maxTimes {
					exhausted[i] = true
				}
			}
			if len(succeeded) == evens && len(exhausted) == odds {
				once.Do(func() { close(done) })
			}
			mu.Unlock()
		}
		if failed {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithMaxReconsumeTimes(int32(maxTimes)), consumer.WithConsumeMessageBatchMaxSize(1))
	defer func() { _ = c.Shutdown() }()
	if !wait(done, deadline) {
		return 3
	}
	// the consumer keeps running while the last failures reach the dead letter queue
	return readDLQ(ns, group, odds, deadline)
}

// readDLQ prints the messages of %DLQ%group with a push consumer of its own group; its Start
// fails until the NameServer has a route for the topic, which the broker creates on demand.
func readDLQ(ns, group string, want int, deadline time.Time) int {
	var mu sync.Mutex
	dead := map[string]bool{}
	done := make(chan struct{})
	var once sync.Once
	f := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit("DLQ", text(m), strconv.Itoa(int(m.ReconsumeTimes)), m.Topic,
				m.GetProperty(primitive.PropertyRetryTopic))
			mu.Lock()
			dead[text(m)] = true
			if len(dead) >= want {
				once.Do(func() { close(done) })
			}
			mu.Unlock()
		}
		return consumer.ConsumeSuccess, nil
	}
	dlqTopic := "%DLQ%" + group
	for {
		c, err := rmq.NewPushConsumer(pushOptions(ns, group+"_dlq_reader", instance("dlq"))...)
		if err != nil {
			fail(1, "new DLQ consumer: %v", err)
		}
		if err = c.Subscribe(dlqTopic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, f); err != nil {
			fail(1, "subscribe %s: %v", dlqTopic, err)
		}
		if err = c.Start(); err == nil {
			defer func() { _ = c.Shutdown() }()
			break
		}
		if time.Now().After(deadline) {
			emit("NOROUTE", dlqTopic, err.Error())
			return 3
		}
		time.Sleep(200 * time.Millisecond) // the route appears once the broker re-registers
	}
	if !wait(done, deadline) {
		return 3
	}
	return 0
}

// keySelector sends every message with key "order-K" to queue K modulo the queue count.
type keySelector struct{}

func (keySelector) Select(msg *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	key := atoi(strings.TrimPrefix(msg.GetKeys(), "order-"))
	return mqs[key%len(mqs)]
}

func orderly(ns, topic, group string, n, keys int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	p := newProducer(ns, producer.WithQueueSelector(keySelector{}))
	for i := 0; i < n; i++ {
		key := i % keys
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("%d:%d", key, i))).WithTag("order").
			WithKeys([]string{fmt.Sprintf("order-%d", key)})
		r, err := p.SendSync(context.Background(), msg)
		if err != nil {
			fail(1, "send %d: %v", i, err)
		}
		printSend("orderly", r)
	}
	_ = p.Shutdown()

	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	var once sync.Once
	c := startPush(ns, topic, group, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit("MSG", text(m), strconv.Itoa(m.Queue.QueueId), strconv.FormatInt(m.QueueOffset, 10))
			mu.Lock()
			seen[text(m)] = true
			if len(seen) >= n {
				once.Do(func() { close(done) })
			}
			mu.Unlock()
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumerOrder(true))
	defer func() { _ = c.Shutdown() }()
	if !wait(done, deadline) {
		return 3
	}
	return 0
}

func group(ns, topic, group, model string, n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	broadcast := model == "BROADCASTING"
	messageModel := consumer.Clustering
	if broadcast {
		messageModel = consumer.BroadCasting
	} else if model != "CLUSTERING" {
		fail(2, "MODEL must be CLUSTERING or BROADCASTING, not %q", model)
	}
	queues := publishQueues(ns, topic)
	p := newProducer(ns)
	defer func() { _ = p.Shutdown() }()

	wanted := n
	if broadcast {
		wanted = 2 * n
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	var once sync.Once
	var assigned []func() map[primitive.MessageQueue]bool
	for _, name := range []string{"a", "b"} {
		name := name
		c, err := consumer.NewPushConsumer(pushOptions(ns, group, instance("c"+name),
			consumer.WithConsumerModel(messageModel),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset))...)
		if err != nil {
			fail(1, "new push consumer: %v", err)
		}
		err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					emit("MSG", name, text(m), m.MsgId)
					mu.Lock()
					seen[name+"/"+m.MsgId] = true
					if len(seen) >= wanted {
						once.Do(func() { close(done) })
					}
					mu.Unlock()
				}
				return consumer.ConsumeSuccess, nil
			})
		if err != nil {
			fail(1, "subscribe: %v", err)
		}
		if err = c.Start(); err != nil {
			fail(1, "start push consumer %s: %v", name, err)
		}
		defer func() { _ = c.Shutdown() }()
		// the queues this consumer pulls now: its process queue table, as it reports it to
		// GET_CONSUMER_RUNNING_INFO (the Go API has no other way to read the rebalance result)
		assigned = append(assigned, func() map[primitive.MessageQueue]bool {
			out := map[primitive.MessageQueue]bool{}
			for mq := range c.GetConsumerRunningInfo(false).MQTable {
				if mq.Topic == topic {
					out[mq] = true
				}
			}
			return out
		})
	}
	// wait for the rebalance: clustering splits the queues, broadcasting gives each all
	for {
		a, b := assigned[0](), assigned[1]()
		shared := 0
		for mq := range a {
			if b[mq] {
				shared++
			}
		}
		ready := len(a) > 0 && len(b) > 0 && shared == 0 && len(a)+len(b) == queues
		if broadcast {
			ready = len(a) == queues && len(b) == queues
		}
		if ready {
			emit("ASSIGNED", strconv.Itoa(len(a)), strconv.Itoa(len(b)))
			break
		}
		if time.Now().After(deadline) {
			emit("UNBALANCED", strconv.Itoa(len(a)), strconv.Itoa(len(b)))
			return 3
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("g-%d", i)
		msg := primitive.NewMessage(topic, []byte(body)).WithTag("g").WithKeys([]string{body})
		if _, err := p.SendSync(context.Background(), msg); err != nil {
			fail(1, "send %d: %v", i, err)
		}
	}
	if !wait(done, deadline) {
		return 3
	}
	return 0
}

// publishQueues is the number of write queues the NameServer's route gives topic.
func publishQueues(ns, topic string) int {
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns})))
	if err != nil {
		fail(1, "new admin: %v", err)
	}
	defer func() { _ = a.Close() }()
	mqs, err := a.FetchPublishMessageQueues(context.Background(), topic)
	if err != nil {
		fail(1, "fetch the queues of %s: %v", topic, err)
	}
	return len(mqs)
}

func litePull(ns, topic, group string, n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	p := newProducer(ns)
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("lite-%d", i)
		msg := primitive.NewMessage(topic, []byte(body)).WithTag("lite").WithKeys([]string{body})
		if _, err := p.SendSync(context.Background(), msg); err != nil {
			fail(1, "send %d: %v", i, err)
		}
	}
	_ = p.Shutdown()

	c, err := rmq.NewPullConsumer(
		consumer.WithNameServer([]string{ns}),
		consumer.WithGroupName(group),
		consumer.WithInstance(instance("l")),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		fail(1, "new pull consumer: %v", err)
	}
	if err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		fail(1, "subscribe: %v", err)
	}
	if err = c.Start(); err != nil {
		fail(1, "start pull consumer: %v", err)
	}
	defer func() { _ = c.Shutdown() }()
	seen := map[string]bool{}
	ctx := context.Background()
	for len(seen) < n && time.Now().Before(deadline) {
		cr, err := c.Poll(ctx, time.Second)
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			fail(1, "poll: %v", err)
		}
		for _, m := range cr.GetMsgList() {
			emit("MSG", text(m), strconv.Itoa(m.Queue.QueueId), strconv.FormatInt(m.QueueOffset, 10))
			seen[text(m)] = true
		}
		c.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	if len(seen) < n {
		return 3
	}
	if err = c.PersistOffset(ctx, topic); err != nil {
		fail(1, "persist offsets: %v", err)
	}
	return 0
}

func stateName(s primitive.LocalTransactionState) string {
	switch s {
	case primitive.CommitMessageState:
		return "COMMIT_MESSAGE"
	case primitive.RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	default:
		return "UNKNOW"
	}
}

// decide is the local transaction outcome of message i, when sent and when the broker checks it.
func decide(i int, check bool) primitive.LocalTransactionState {
	if i%4 == 1 {
		if check {
			return primitive.CommitMessageState
		}
		return primitive.UnknowState
	}
	if i%2 == 0 {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func txIndex(body []byte) int {
	return atoi(strings.TrimPrefix(string(body), "tx-"))
}

type txListener struct {
	mu      sync.Mutex
	pending map[int]bool
	checked chan struct{}
}

func (l *txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	return decide(txIndex(msg.Body), false)
}

func (l *txListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	i := txIndex(msg.Body)
	state := decide(i, true)
	emit("CHECK", strconv.Itoa(i), stateName(state), msg.Topic, msg.MsgId)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[i] {
		delete(l.pending, i)
		if len(l.pending) == 0 {
			close(l.checked)
		}
	}
	return state
}

func transaction(ns, topic, group string, n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	l := &txListener{pending: map[int]bool{}, checked: make(chan struct{})}
	committed := map[string]bool{}
	for i := 0; i < n; i++ {
		if decide(i, false) == primitive.UnknowState {
			l.pending[i] = true
		}
		if decide(i, true) == primitive.CommitMessageState {
			committed[fmt.Sprintf("tx-%d", i)] = true
		}
	}
	if len(l.pending) == 0 {
		close(l.checked)
	}
	p, err := rmq.NewTransactionProducer(l,
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName("bolide_go_tx_pg"),
		producer.WithInstanceName(instance("t")),
		producer.WithSendMsgTimeout(5*time.Second),
		producer.WithRetry(0),
	)
	if err != nil {
		fail(1, "new transaction producer: %v", err)
	}
	if err = p.Start(); err != nil {
		fail(1, "start transaction producer: %v", err)
	}
	defer func() { _ = p.Shutdown() }()
	for i := 0; i < n; i++ {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("tx-%d", i))).WithTag("tx").
			WithKeys([]string{fmt.Sprintf("key-%d", i)})
		r, err := p.SendMessageInTransaction(context.Background(), msg)
		if err != nil {
			fail(1, "send %d: %v", i, err)
		}
		emit("SEND", statusName(r.Status), r.MsgID, stateName(r.State), strconv.Itoa(i))
	}
	if !wait(l.checked, deadline) {
		l.mu.Lock()
		emit("UNCHECKED", fmt.Sprint(l.pending))
		l.mu.Unlock()
		return 3
	}

	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	var once sync.Once
	c := startPush(ns, topic, group, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit("MSG", text(m), m.GetTags(), m.GetKeys(), strconv.Itoa(m.Queue.QueueId),
				strconv.FormatInt(m.QueueOffset, 10), m.MsgId)
			mu.Lock()
			if committed[text(m)] {
				seen[text(m)] = true
			}
			if len(seen) == len(committed) {
				once.Do(func() { close(done) })
			}
			mu.Unlock()
		}
		return consumer.ConsumeSuccess, nil
	})
	defer func() { _ = c.Shutdown() }()
	if !wait(done, deadline) {
		return 3
	}
	return 0
}

func sql(ns, topic, group string, n, expect int, expression string, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	p := newProducer(ns)
	for i := 0; i < n; i++ {
		tag := "odd"
		if i%2 == 0 {
			tag = "even"
		}
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("sql-%d", i))).WithTag(tag)
		msg.WithProperty("n", strconv.Itoa(i))
		if _, err := p.SendSync(context.Background(), msg); err != nil {
			fail(1, "send %d: %v", i, err)
		}
	}
	_ = p.Shutdown()

	got := newDistinct(expect)
	c, err := rmq.NewPushConsumer(pushOptions(ns, group, instance("s"))...)
	if err != nil {
		fail(1, "new push consumer: %v", err)
	}
	selector := consumer.MessageSelector{Type: consumer.SQL92, Expression: expression}
	err = c.Subscribe(topic, selector, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit("MSG", text(m), m.GetProperty("n"), m.GetTags())
			got.add(text(m))
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		fail(1, "subscribe %s: %v", topic, err)
	}
	if err = c.Start(); err != nil {
		fail(1, "start push consumer: %v", err)
	}
	defer func() { _ = c.Shutdown() }()
	if !wait(got.done, deadline) {
		return 3
	}
	return 0
}

func acl(ns, topic, group string, n int, accessKey, secretKey string, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	keys := primitive.Credentials{AccessKey: accessKey, SecretKey: secretKey}
	p := newProducer(ns, producer.WithCredentials(keys))
	for i := 0; i < n; i++ {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("acl-%d", i))).WithTag("acl")
		r, err := p.SendSync(context.Background(), msg)
		if err != nil {
			fail(1, "send %d: %v", i, err)
		}
		printSend("sync", r)
	}
	batch := []*primitive.Message{primitive.NewMessage(topic, []byte("acl-batch-0")),
		primitive.NewMessage(topic, []byte("acl-batch-1"))}
	r, err := p.SendSync(context.Background(), batch...)
	if err != nil {
		fail(1, "send batch: %v", err)
	}
	printSend("batch", r)
	_ = p.Shutdown()

	got := newDistinct(n + 2)
	c := startPush(ns, topic, group, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit("MSG", text(m))
			got.add(text(m))
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithCredentials(keys))
	ok := wait(got.done, deadline)
	_ = c.Shutdown()
	if !ok {
		return 3
	}
	wrong := primitive.Credentials{AccessKey: accessKey, SecretKey: secretKey + "-wrong"}
	refusedSend("wrong-secret", ns, topic, producer.WithCredentials(wrong))
	refusedSend("unsigned", ns, topic)
	return 0
}

func refusedSend(mode, ns, topic string, opts ...producer.Option) {
	p := newProducer(ns, append(opts, producer.WithRetry(0))...)
	defer func() { _ = p.Shutdown() }()
	r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("refused")))
	if err != nil {
		emit("REFUSED", mode, strings.NewReplacer("\n", " ", "\t", " ").Replace(err.Error()))
		return
	}
	printSend(mode, r)
}

// distinct counts distinct keys from any goroutine and closes done once it has want of them.
type distinct struct {
	mu   sync.Mutex
	seen map[string]bool
	want int
	done chan struct{}
}

func newDistinct(want int) *distinct {
	return &distinct{seen: map[string]bool{}, want: want, done: make(chan struct{})}
}

func (d *distinct) add(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[key] {
		return
	}
	d.seen[key] = true
	if len(d.seen) == d.want {
		close(d.done)
	}
}

func request(ns, topic string, n int, timeout time.Duration) int {
	p := newProducer(ns)
	defer p.Shutdown()
	for i := 0; i < n; i++ {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("go-ask-%d", i)))
		reply, err := p.Request(context.Background(), timeout, msg)
		if err != nil {
			emit("ERROR", fmt.Sprintf("go-ask-%d", i), strings.ReplaceAll(err.Error(), "\n", " "))
			return 3
		}
		emit("REPLY", string(reply.Body), reply.Topic, reply.GetProperty(primitive.PropertyCorrelationID))
	}
	return 0
}
