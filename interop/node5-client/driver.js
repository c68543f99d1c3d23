'use strict';
// The official RocketMQ 5 Node.js client over gRPC (rocketmq-client-nodejs, unmodified) against a
// broker's gRPC endpoint, for the interop tests: `node driver.js scenario HOST:PORT`. Topics N5
// (NORMAL), F5 (FIFO), D5 (MIXED) and X5 (TRANSACTION) and the FIFO group fifo_g must exist.
// Prints the lines of interop/java-client/BolideGrpcClient.java: SENT id; SIMPLE body tag keys
// seq attempt id; AGAIN body attempt; FIFO body; PUSH body attempt receivedMs; CHECKED body;
// DUE ms; DONE (tab-separated).
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult, FilterExpression } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

function print(...fields) {
  process.stdout.write(fields.join('\t') + '\n');
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function scenario(endpoints) {
  const base = { endpoints, namespace: '', sslEnabled: false, requestTimeout: 5000, logger: quietLogger() };
  const producer = new Producer({ ...base, topics: [ 'N5', 'F5', 'D5', 'X5' ], checker: {
    async check(view) {
      print('CHECKED', view.body.toString());
      return TransactionResolution.COMMIT;
    },
  } });
  await producer.startup();
  for (let i = 0; i < 4; i++) {
    const receipt = await producer.send({ topic: 'N5', body: Buffer.from(`n${i}`), tag: 'TagA', keys: [ `key${i}` ],
      properties: new Map([[ 'seq', String(i) ]]) });
    print('SENT', receipt.messageId);
  }
  for (let i = 0; i < 3; i++) {
    for (const group of [ 'ga', 'gb' ]) {
      await producer.send({ topic: 'F5', body: Buffer.from(`${group}-${i}`), messageGroup: group });
    }
  }
  const due = Date.now() + 2000;
  await producer.send({ topic: 'D5', body: Buffer.from('later'), deliveryTimestamp: new Date(due) });
  print('DUE', due);
  await producer.send({ topic: 'D5', body: Buffer.from('retry-me') });
  const recalled = await producer.send({ topic: 'D5', body: Buffer.from('recalled'), deliveryTimestamp: new Date(due) });
  await producer.recallMessage('D5', recalled.recallHandle);
  for (const [ body, end ] of [[ 'tx-commit', 'commit' ], [ 'tx-rollback', 'rollback' ], [ 'tx-check', '' ]]) {
    const tx = producer.beginTransaction();
    await producer.send({ topic: 'X5', body: Buffer.from(body) }, tx);
    if (end) await tx[end]();
  }

  const simple = new SimpleConsumer({ ...base, consumerGroup: 'simple_g', awaitDuration: 5000,
    subscriptions: new Map([[ 'N5', 'TagA' ]]) });
  await simple.startup();
  const got = [];
  let deadline = Date.now() + 20000;
  while (got.length < 4 && Date.now() < deadline) got.push(...await simple.receive(16, 30000));
  for (const m of got) {
    print('SIMPLE', m.body.toString(), m.tag || '', [ ...m.keys ].sort().join(','), m.properties.get('seq'),
      m.deliveryAttempt, m.messageId);
  }
  await simple.changeInvisibleDuration(got[0], 1000);
  const again = [];
  deadline = Date.now() + 20000;
  while (again.length === 0 && Date.now() < deadline) again.push(...await simple.receive(16, 30000));
  for (const m of again) {
    print('AGAIN', m.body.toString(), m.deliveryAttempt);
    await simple.ack(m);
  }
  for (const m of got.slice(1)) await simple.ack(m);
  await simple.shutdown();

  const fifo = new SimpleConsumer({ ...base, consumerGroup: 'fifo_g', awaitDuration: 5000,
    subscriptions: new Map([[ 'F5', FilterExpression.SUB_ALL ]]) });
  await fifo.startup();
  let count = 0;
  deadline = Date.now() + 30000;
  while (count < 6 && Date.now() < deadline) {
    for (const m of await fifo.receive(16, 30000)) {
      print('FIFO', m.body.toString());
      await fifo.ack(m);
      count++;
    }
  }
  await fifo.shutdown();

  const seen = new Set();
  const retried = [];
  const push = new PushConsumer({ ...base, consumerGroup: 'push_g',
    subscriptions: new Map([[ 'D5', FilterExpression.SUB_ALL ], [ 'X5', FilterExpression.SUB_ALL ]]),
    messageListener: {
      consume(view) {
        const body = view.body.toString();
        print('PUSH', body, view.deliveryAttempt, Date.now());
        seen.add(body);
        if (body === 'retry-me') {
          retried.push(view.deliveryAttempt);
          if (view.deliveryAttempt === 1) return ConsumeResult.FAILURE;
        }
        return ConsumeResult.SUCCESS;
      },
    } });
  await push.startup();
  const until = Date.now() + 60000;
  const wanted = [ 'later', 'retry-me', 'tx-commit', 'tx-check' ];
  while (!(wanted.every(b => seen.has(b)) && retried.length >= 2) && Date.now() < until) await sleep(200);
  await producer.shutdown();
  print('DONE');
  process.exit(0); // not push.shutdown(): it waits for the consumer's long polls in flight
}

function quietLogger() {
  const noop = () => {};
  return { info: noop, warn: noop, debug: noop, error: (...args) => console.error(...args) };
}

if (process.argv[2] !== 'scenario' || process.argv.length !== 4) {
  console.error('usage: node driver.js scenario HOST:PORT');
  process.exit(2);
}
scenario(process.argv[3]).catch(err => {
  console.error(err);
  process.exit(1);
});
