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

async function main(args) {
  if (args.length === 4 && args[0] === 'produce') {
    await produce(args[1], args[2], count(args[3]));
  } else if (args.length === 6 && args[0] === 'consume') {
    await consume(args[1], args[2], args[3], count(args[4]), count(args[5]));
  } else if (args.length === 6 && args[0] === 'consume-retry') {
    await consumeRetry(args[1], args[2], args[3], count(args[4]), count(args[5]));
  } else {
    fail(2, 'usage: driver.js produce <namesrv> <topic> <n> | ' +
      'consume|consume-retry <namesrv> <topic> <group> <n> <timeoutSec>');
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0), // the client keeps timers and sockets; leave once the work is done
  err => fail(1, err && err.stack || String(err)));
