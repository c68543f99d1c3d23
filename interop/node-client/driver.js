'use strict';
/*
 * The Node.js RocketMQ client ali-ons (unmodified, pinned in package.json) as a command-line
 * driver for Bolide's interop tests.
 *
 *   node driver.js produce <namesrv> <topic> <n>
 *       n sends, one after the other; message i has body "body-i", tag "tag<i%3>" and keys
 *       "key-i", "k<i%2>". Prints one line per result:
 *       SEND \t status \t msgId \t broker \t queueId \t queueOffset
 *   node driver.js consume <namesrv> <topic> <group> <n> <timeoutSec>
 *       push consumer (clustering, consume from first offset, subscription "*"). Prints one line
 *       per delivered message: MSG \t body \t tags \t keys \t queueId \t queueOffset \t msgId.
 *       Exits 0 after n distinct message ids, 3 when timeoutSec passes first.
 *   node driver.js consume-retry <namesrv> <topic> <group> <n> <timeoutSec>
 *       the same consumer, but the first delivery of each body asks for a retry (the handler
 *       returns ACTION_RETRY, so the client sends it back with CONSUMER_SEND_MSG_BACK); lines
 *       carry one more field, the reconsume count. Exits 0 once n bodies came back as retries.
 *   node driver.js group <namesrv> <topic> <group> <CLUSTERING|BROADCASTING> <n> <timeoutSec>
 *       two push consumers (instances a and b) in one group; once both are ready the driver
 *       sends messages "g-0", "g-1", ... one by one. Clustering: it keeps sending (at least n)
 *       until both have received one, then waits until every message sent was received;
 *       broadcasting: it sends n and waits until each consumer received all n. Prints
 *       MSG \t instance \t body \t msgId per delivery and SENT \t count at the end.
 *
 * The name server is given with `nameSrv`, so the `httpclient` the constructors require (urllib)
 * is never used; no access keys are passed, so requests are not signed. The client logs warnings
 * and errors to stderr.
 */

const httpclient = require('urllib');
const { Producer, Consumer, Message } = require('ali-ons');

function emit(...fields) {
  process.stdout.write(fields.join('\t') + '\n');
}

function fail(code, message) {
  process.stderr.write(`nodeclient: ${message}\n`);
  process.exit(code);
}

function count(text) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) {
    fail(2, `not a number: ${JSON.stringify(text)}`);
  }
  return n;
}

async function produce(nameSrv, topic, n) {
  const producer = new Producer({
    httpclient,
    nameSrv,
    producerGroup: 'bolide_node_client_pg',
  });
  producer.on('error', err => process.stderr.write(`nodeclient: producer error: ${err.stack}\n`));
  await producer.ready();
  for (let i = 0; i < n; i++) {
    const msg = new Message(topic, `tag${i % 3}`, `body-${i}`);
    msg.keys = [ `key-${i}`, `k${i % 2}` ];
    const res = await producer.send(msg);
    emit('SEND', res.sendStatus, res.msgId, res.messageQueue.brokerName,
      String(res.messageQueue.queueId), String(res.queueOffset));
  }
  await producer.close();
}

async function consume(nameSrv, topic, group, n, timeoutSec) {
  const consumer = new Consumer({
    httpclient,
    nameSrv,
    consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  });
  consumer.on('error', err => process.stderr.write(`nodeclient: consumer error: ${err.stack}\n`));
  const seen = new Set();
  let finish;
  const done = new Promise(resolve => { finish = resolve; });
  consumer.subscribe(topic, '*', async msg => {
    emit('MSG', msg.body.toString(), msg.tags, msg.keys, String(msg.queueId), String(msg.queueOffset),
      msg.msgId);
    seen.add(msg.msgId);
    if (seen.size >= n) {
      finish(true);
    }
  });
  const timer = setTimeout(() => finish(false), timeoutSec * 1000);
  const complete = await done;
  clearTimeout(timer);
  await consumer.close();
  if (!complete) {
    fail(3, `timeout after ${timeoutSec}s: ${seen.size} of ${n} messages`);
  }
}

async function consumeRetry(nameSrv, topic, group, n, timeoutSec) {
  const consumer = new Consumer({
    httpclient,
    nameSrv,
    consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  });
  consumer.on('error', err => process.stderr.write(`nodeclient: consumer error: ${err.stack}\n`));
  const retried = new Set();
  let finish;
  const done = new Promise(resolve => { finish = resolve; });
  consumer.subscribe(topic, '*', async msg => {
    const body = msg.body.toString();
    emit('MSG', body, msg.tags, msg.keys, String(msg.queueId), String(msg.queueOffset), msg.msgId,
      String(msg.reconsumeTimes));
    if (msg.reconsumeTimes === 0) {
      return Consumer.ACTION_RETRY;
    }
    retried.add(body);
    if (retried.size >= n) {
      finish(true);
    }
  });
  const timer = setTimeout(() => finish(false), timeoutSec * 1000);
  const complete = await done;
  clearTimeout(timer);
  await consumer.close();
  if (!complete) {
    fail(3, `timeout after ${timeoutSec}s: ${retried.size} of ${n} messages came back as retries`);
  }
}

function newConsumer(nameSrv, group, extra) {
  const consumer = new Consumer(Object.assign({
    httpclient,
    nameSrv,
    consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    rebalanceInterval: 1000,
    pollNameServerInteval: 1000, // sic: ali-ons's option name
    heartbeatBrokerInterval: 1000,
  }, extra));
  consumer.on('error', err => process.stderr.write(`nodeclient: consumer error: ${err.stack}\n`));
  return consumer;
}

function deadline(timeoutSec, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout after ${timeoutSec}s: ${what()}`)), timeoutSec * 1000);
  });
  return { expired, cancel: () => clearTimeout(timer) };
}

async function until(condition, limit) {
  while (!condition()) {
    await Promise.race([ new Promise(resolve => setTimeout(resolve, 50)), limit.expired ]);
  }
}

async function group(nameSrv, topic, groupName, model, n, timeoutSec) {
  const broadcast = model === 'BROADCASTING';
  const received = { a: new Set(), b: new Set() };
  const consumers = [];
  for (const name of [ 'a', 'b' ]) {
    const consumer = newConsumer(nameSrv, groupName, {
      instanceName: `bolide-node-${name}-${process.pid}`,
      isBroadcast: broadcast,
    });
    consumer.subscribe(topic, '*', async msg => {
      emit('MSG', name, msg.body.toString(), msg.msgId);
      received[name].add(msg.body.toString());
    });
    consumers.push(consumer);
  }
  await Promise.all(consumers.map(c => c.ready()));
  const producer = new Producer({ httpclient, nameSrv, producerGroup: 'bolide_node_group_pg' });
  await producer.ready();
  let sent = 0;
  const limit = deadline(timeoutSec, () => `sent ${sent}, a got ${received.a.size}, b got ${received.b.size}`);
  const send = async () => {
    await producer.send(new Message(topic, 'g', `g-${sent}`));
    sent++;
  };
  try {
    if (broadcast) {
      while (sent < n) {
        await send();
      }
      await until(() => received.a.size >= n && received.b.size >= n, limit);
    } else {
      while (sent < n || received.a.size === 0 || received.b.size === 0) {
        await send();
        await Promise.race([ new Promise(resolve => setTimeout(resolve, 20)), limit.expired ]);
      }
      await until(() => new Set([ ...received.a, ...received.b ]).size >= sent, limit);
    }
  } finally {
    limit.cancel();
  }
  emit('SENT', String(sent));
  await producer.close();
  await Promise.all(consumers.map(c => c.close()));
}

async function main(args) {
  if (args.length === 4 && args[0] === 'produce') {
    await produce(args[1], args[2], count(args[3]));
  } else if (args.length === 6 && args[0] === 'consume') {
    await consume(args[1], args[2], args[3], count(args[4]), count(args[5]));
  } else if (args.length === 6 && args[0] === 'consume-retry') {
    await consumeRetry(args[1], args[2], args[3], count(args[4]), count(args[5]));
  } else if (args.length === 7 && args[0] === 'group') {
    await group(args[1], args[2], args[3], args[4], count(args[5]), count(args[6]));
  } else {
    fail(2, 'usage: driver.js produce <namesrv> <topic> <n> | ' +
      'consume|consume-retry <namesrv> <topic> <group> <n> <timeoutSec> | ' +
      'group <namesrv> <topic> <group> <model> <n> <timeoutSec>');
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0), // the client keeps timers and sockets; leave once the work is done
  err => fail(1, err && err.stack || String(err)));
