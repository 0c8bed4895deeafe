// Preloaded (node --require) by agentd's e2e tests in front of the reference
// MCP server, which listens on every interface at $PORT: a listen on a bare
// port is made to listen on 127.0.0.1 only, and the port it got is printed to
// stderr as "AGENTD_E2E_LISTENING <port>" (so PORT=0 picks a free one).
'use strict';
const net = require('node:net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  } else if (first && typeof first === 'object' && first.port !== undefined && !first.host) {
    args[0] = { ...first, host: '127.0.0.1' };
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && typeof a === 'object') process.stderr.write(`AGENTD_E2E_LISTENING ${a.address} ${a.port}\n`);
  });
  return listen.apply(this, args);
};
