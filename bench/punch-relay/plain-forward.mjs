// The anchor: a plain UDP forward with no checks at all, the least a Node forwarder can do. One port; the
// first source is side A, datagrams from A go to <dest>, anything else goes back to A.
// Usage: node plain-forward.mjs <dest host> <dest port>; prints {"port":N} once bound.
import { createSocket } from 'node:dgram';

const [host = '127.0.0.1', port = '0'] = process.argv.slice(2);
const s = createSocket('udp4');
let a;
s.on('message', (m, r) => {
  if (r.address === host && r.port === Number(port)) {
    if (a) s.send(m, a.port, a.address);
  } else {
    a ??= { address: r.address, port: r.port };
    s.send(m, Number(port), host);
  }
});
s.bind(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: s.address().port })}\n`));
process.once('SIGTERM', () => process.exit(0));
