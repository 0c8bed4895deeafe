// Drives agentd with the JavaScript A2A SDK: `node conformance.mjs VERSION URL`,
// VERSION 0.3 (@a2a-js/sdk 0.3.14), 1.0 (@a2a-js/sdk 1.3.0) or 1.0-rest (1.3.0
// over the HTTP+JSON binding). Checks the agent
// card, a blocking send, a stream, a get, a cancel, and the error for an unknown
// task. The server must answer objectives with builtin:demo (with a think time,
// so a non-blocking send can still be cancelled). Prints one line per check;
// any failure exits 1.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

const [mode, base] = process.argv.slice(2);
if (!['0.3', '1.0', '1.0-rest'].includes(mode) || !base) {
  console.error('usage: node conformance.mjs 0.3|1.0|1.0-rest URL');
  process.exit(2);
}
// 1.0-rest: the 1.0 SDK over the card's HTTP+JSON interface instead of JSON-RPC.
const version = mode === '1.0-rest' ? '1.0' : mode;
const binding = mode === '1.0-rest' ? 'HTTP+JSON' : 'JSONRPC';

const sdk = version === '0.3' ? await import('a2a-js-03/client') : await import('a2a-js-10/client');
const core = version === '1.0' ? await import('a2a-js-10') : null;

// The SDKs' shapes differ: 0.3 uses kind-tagged JSON objects, 1.0 the
// generated proto types (enums as numbers, oneofs as {$case, value}).
const v = version === '0.3'
  ? {
      message: (text, extra = {}) => ({ kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }], ...extra }),
      sendParams: (message, nonBlocking) => ({ message, configuration: nonBlocking ? { blocking: false } : undefined }),
      asTask: (res) => (res.kind === 'task' ? res : null),
      state: (task) => task.status.state,
      text: (task) => (task.artifacts ?? []).flatMap((a) => a.parts).filter((p) => p.kind === 'text').map((p) => p.text).join('\n'),
      completed: 'completed', canceled: 'canceled', working: ['submitted', 'working'],
      event: (ev) => ({ kind: ev.kind, state: ev.kind === 'task' || ev.kind === 'status-update' ? ev.status.state : undefined, task: ev.kind === 'task' ? ev : undefined,
        piece: ev.kind === 'artifact-update' ? { text: ev.artifact.parts.filter((p) => p.kind === 'text').map((p) => p.text).join(''), append: !!ev.append, last: !!ev.lastChunk } : undefined }),
    }
  : {
      message: (text, extra = {}) => ({ messageId: randomUUID(), contextId: '', taskId: '', role: core.Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }], metadata: undefined, extensions: [], referenceTaskIds: [], ...extra }),
      sendParams: (message, nonBlocking) => ({ tenant: '', message, metadata: undefined, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: !!nonBlocking } }),
      asTask: (res) => ('id' in res && 'status' in res ? res : null),
      state: (task) => task.status.state,
      text: (task) => (task.artifacts ?? []).flatMap((a) => a.parts).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n'),
      completed: core.TaskState.TASK_STATE_COMPLETED, canceled: core.TaskState.TASK_STATE_CANCELED,
      working: [core.TaskState.TASK_STATE_SUBMITTED, core.TaskState.TASK_STATE_WORKING],
      event: (ev) => {
        const p = ev.payload;
        const kinds = { task: 'task', statusUpdate: 'status-update', artifactUpdate: 'artifact-update', message: 'message' };
        const piece = p.$case === 'artifactUpdate'
          ? { text: p.value.artifact.parts.filter((x) => x.content?.$case === 'text').map((x) => x.content.value).join(''), append: !!p.value.append, last: !!p.value.lastChunk }
          : undefined;
        return { kind: kinds[p.$case], state: p.$case === 'task' || p.$case === 'statusUpdate' ? p.value.status.state : undefined, task: p.$case === 'task' ? p.value : undefined, piece };
      },
    };

const check = async (name, fn) => {
  try {
    await fn();
    console.log(`ok   ${mode} ${name}`);
  } catch (err) {
    console.log(`FAIL ${mode} ${name}: ${err?.stack ?? err}`);
    process.exitCode = 1;
  }
};

const factory = binding === 'JSONRPC'
  ? new sdk.ClientFactory()
  : new sdk.ClientFactory(sdk.ClientFactoryOptions.createFrom(sdk.ClientFactoryOptions.default, { preferredTransports: [binding] }));
const client = await factory.createFromUrl(base);

await check('card', async () => {
  const card = await client.getAgentCard();
  assert.equal(card.name, 'agentd');
  assert.equal(card.capabilities.streaming, true);
  const uris = (card.capabilities.extensions ?? []).map((e) => e.uri);
  assert.ok(uris.some((u) => u.includes('agentd')), `no agentd contract extension in ${uris}`);
  if (version === '1.0') {
    assert.equal(client.protocolVersion, '1.0', 'the 1.0 SDK did not pick the 1.0 interface');
    assert.equal(client.transport.protocolName, binding, `the 1.0 SDK picked ${client.transport.protocolName}, not ${binding}`);
    assert.ok(card.supportedInterfaces.some((i) => i.protocolVersion === '0.3'), 'the card does not list the 0.3 interface');
  } else {
    assert.equal(card.protocolVersion, '0.3.0');
  }
});

let sentID;
await check('send', async () => {
  const res = await client.sendMessage(v.sendParams(v.message('count these four words')));
  const task = v.asTask(res);
  assert.ok(task, `send returned ${JSON.stringify(res)}`);
  assert.equal(v.state(task), v.completed);
  assert.equal(v.text(task), '"count these four words" has 4 words and 22 characters');
  sentID = task.id;
});

await check('get', async () => {
  const task = await client.getTask({ id: sentID, tenant: '', historyLength: 1 });
  assert.equal(task.id, sentID);
  assert.equal(v.state(task), v.completed);
  assert.ok(task.history.length <= 1, `historyLength 1 gave ${task.history.length} messages`);
});

// The answer streams: artifact updates, the first starting the artifact and
// the others appended, the last lastChunk, then the final status; the pieces
// folded are the stored artifact's text.
await check('stream', async () => {
  const kinds = [];
  const pieces = [];
  let last;
  let id;
  for await (const raw of client.sendMessageStream(v.sendParams(v.message('alpha beta')))) {
    const ev = v.event(raw);
    kinds.push(ev.kind);
    if (ev.task) id = ev.task.id;
    if (ev.piece) pieces.push(ev.piece);
    if (ev.state !== undefined) last = ev.state;
  }
  assert.equal(kinds[0], 'task', `first event ${kinds[0]}`);
  assert.ok(pieces.length >= 2, `${pieces.length} artifact updates in ${kinds}`);
  assert.equal(kinds.at(-1), 'status-update', `last event ${kinds.at(-1)}`);
  assert.equal(last, v.completed, `stream ended in ${last}`);
  let folded = '';
  pieces.forEach((p, i) => {
    assert.equal(p.append, i > 0, `piece ${i} append ${p.append}`);
    assert.equal(p.last, i === pieces.length - 1, `piece ${i} lastChunk ${p.last}`);
    folded = p.append ? folded + p.text : p.text;
  });
  const task = await client.getTask({ id, tenant: '' });
  assert.equal(folded, v.text(task));
  assert.equal(folded, '"alpha beta" has 2 words and 10 characters');
});

await check('cancel', async () => {
  const res = await client.sendMessage(v.sendParams(v.message('slow work'), true));
  const task = v.asTask(res);
  assert.ok(task && v.working.includes(v.state(task)), `non-blocking send gave ${JSON.stringify(res)}`);
  const canceled = await client.cancelTask({ id: task.id, tenant: '', metadata: undefined });
  assert.equal(v.state(canceled), v.canceled);
  const again = await client.getTask({ id: task.id, tenant: '' });
  assert.equal(v.state(again), v.canceled);
});

await check('unknown task', async () => {
  // Each SDK maps JSON-RPC -32001 to its own TaskNotFound error class.
  await assert.rejects(client.getTask({ id: 'no-such-task', tenant: '' }), (err) => {
    assert.match(err?.constructor?.name ?? '', /TaskNotFound/, `${err?.constructor?.name}: ${err?.message}`);
    return true;
  });
});
