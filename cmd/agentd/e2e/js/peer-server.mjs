// An A2A 1.0 agent built on the JavaScript SDK 1.3.0's server (express, its
// JSON-RPC handler, the in-memory task store), as its sample ships: agentd
// delegates to it as a peer (e2e/js_peer_test.go).
//
//   node peer-server.mjs [--compat] [--rest] [--grpc]
//
// It listens on a free 127.0.0.1 port and prints "listening http://..." on
// its first line. --compat turns on the SDK's A2A 0.3 compatibility (and the
// card lists a 0.3 JSON-RPC interface beside the 1.0 one). --rest serves the
// SDK's HTTP+JSON handler too, at /rest, and the card lists it first.
// --grpc serves the SDK's gRPC service (grpcService, on @grpc/grpc-js;
// with --compat its 0.3 legacyGrpcService beside it) in plaintext on a
// second free 127.0.0.1 port, and the card lists it first, as host:port.
//
// Its executor answers each message with one task: working, then an artifact
// "echo: TEXT" (TEXT the first text part), then completed. A text starting
// "slow" stays working until it is cancelled; each cancel prints
// "cancelled TASK_ID". A text starting "askblank" stops the task at
// input-required with no status message; "ask", at input-required with the
// question "Which color?" (metadata agentd/ask_choices red, blue); "auth", at
// auth-required with the text "Sign in at the portal and send the code."
// The next message naming such a task is its answer: the task completes with
// the artifact "answered: TEXT" (or "authenticated: TEXT"), and it prints
// "answered TASK_ID TEXT".
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from 'a2a-js-10/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from 'a2a-js-10/server/express';

const compat = process.argv.includes('--compat');
const rest = process.argv.includes('--rest');
const withGRPC = process.argv.includes('--grpc');
const TASK_STATE_WORKING = 2, TASK_STATE_COMPLETED = 3, TASK_STATE_CANCELED = 5, TASK_STATE_INPUT_REQUIRED = 6,
  TASK_STATE_AUTH_REQUIRED = 8, ROLE_AGENT = 2;

const cancelled = new Set();

const executor = {
  async execute(ctx, bus) {
    const text = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    const base = { taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined };
    const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });
    const asked = ctx.task?.status?.state;
    if (asked === TASK_STATE_INPUT_REQUIRED || asked === TASK_STATE_AUTH_REQUIRED) {
      // The answer to the task's question.
      console.log('answered ' + ctx.taskId + ' ' + text);
      bus.publish(AgentEvent.statusUpdate({ ...base, status: status(TASK_STATE_WORKING, undefined) }));
      bus.publish(AgentEvent.artifactUpdate({
        ...base, append: false, lastChunk: true,
        artifact: { artifactId: 'answer', name: 'answer', description: '', metadata: undefined, extensions: [],
          parts: [{ content: { $case: 'text', value: (asked === TASK_STATE_AUTH_REQUIRED ? 'authenticated: ' : 'answered: ') + text }, metadata: undefined, filename: '', mediaType: 'text/plain' }] },
      }));
      bus.publish(AgentEvent.statusUpdate({ ...base, status: status(TASK_STATE_COMPLETED, undefined) }));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.task({
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [ctx.userMessage], metadata: undefined,
      status: { state: TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() },
    }));
    const question = (value, metadata) => ({
      messageId: crypto.randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: ROLE_AGENT,
      parts: [{ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
      metadata, extensions: [], referenceTaskIds: [],
    });
    if (text.startsWith('askblank')) {
      bus.publish(AgentEvent.statusUpdate({ ...base, status: status(TASK_STATE_INPUT_REQUIRED, undefined) }));
      bus.finished();
      return;
    }
    if (text.startsWith('ask')) {
      bus.publish(AgentEvent.statusUpdate({ ...base, status: status(TASK_STATE_INPUT_REQUIRED,
        question('Which color?', { 'agentd/ask_choices': ['red', 'blue'] })) }));
      bus.finished();
      return;
    }
    if (text.startsWith('auth')) {
      bus.publish(AgentEvent.statusUpdate({ ...base, status: status(TASK_STATE_AUTH_REQUIRED,
        question('Sign in at the portal and send the code.', undefined)) }));
      bus.finished();
      return;
    }
    if (text.startsWith('slow')) {
      while (!cancelled.has(ctx.taskId)) await new Promise((r) => setTimeout(r, 20));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.artifactUpdate({
      ...base, append: false, lastChunk: true,
      artifact: { artifactId: 'answer', name: 'answer', description: '', metadata: undefined, extensions: [],
        parts: [{ content: { $case: 'text', value: 'echo: ' + text }, metadata: undefined, filename: '', mediaType: 'text/plain' }] },
    }));
    bus.publish(AgentEvent.statusUpdate({
      ...base, status: { state: TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() },
    }));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    cancelled.add(taskId);
    console.log('cancelled ' + taskId);
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId: '', metadata: undefined,
      status: { state: TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() },
    }));
    bus.finished();
  },
};

// startGRPC serves the SDK's gRPC service for the handler get returns (set
// once the card is made) on a free loopback port, and returns the server and
// its port; null without --grpc. The SDK's gRPC modules, and @grpc/grpc-js,
// are loaded only then.
async function startGRPC(get) {
  if (!withGRPC) return null;
  const grpc = await import('@grpc/grpc-js');
  const { A2AService, grpcService } = await import('a2a-js-10/server/grpc');
  const srv = new grpc.Server();
  const lazy = (svc) => new Proxy({}, { get: (_, name) => (...args) => svc()[name](...args) });
  srv.addService(A2AService, lazy(() => grpcService({ requestHandler: get(), userBuilder: UserBuilder.noAuthentication })));
  if (compat) {
    const { LegacyA2AService, legacyGrpcService } = await import('a2a-js-10/compat/v0_3/server/grpc');
    srv.addService(LegacyA2AService, lazy(() => legacyGrpcService({ requestHandler: get(), userBuilder: UserBuilder.noAuthentication })));
  }
  const port = await new Promise((resolve, reject) =>
    srv.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { srv, port };
}

let handler;
const g = await startGRPC(() => handler);
const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const interfaces = [{ url: base, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }];
  if (compat) interfaces.push({ url: base, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' });
  if (rest) interfaces.unshift({ url: base + '/rest', protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' });
  if (g) interfaces.unshift({ url: `127.0.0.1:${g.port}`, protocolBinding: 'GRPC', tenant: '', protocolVersion: '1.0' });
  const card = {
    name: 'js-peer', description: 'echoes its input (the JavaScript SDK 1.3.0 server)', version: '1.0.0',
    supportedInterfaces: interfaces, provider: undefined, documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'], skills: [], signatures: [], iconUrl: undefined,
  };
  handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use('/.well-known/agent-card.json', agentCardHandler({
    agentCardProvider: handler, ...(compat ? { legacyCompat: { enabled: true } } : {}),
  }));
  if (rest) app.use('/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/', jsonRpcHandler({
    requestHandler: handler, userBuilder: UserBuilder.noAuthentication,
    ...(compat ? { legacyCompat: { enabled: true } } : {}),
  }));
  console.log('listening ' + base);
});
process.on('SIGTERM', () => {
  g?.srv.forceShutdown();
  server.close(() => process.exit(0));
});
