/** The UDP load generator shared by the timesvc NTP and NTS benches. */
import { createSocket, type Socket } from 'node:dgram';
import { readFileSync } from 'node:fs';

const CLK_TCK = 100; // Linux USER_HZ

/** CPU time (utime + stime, in ticks) of process `pid`, from /proc/<pid>/stat (proc(5)). */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at ") ".
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); utime is field 14, stime field 15.
  return Number(rest[11]) + Number(rest[12]);
}

/**
 * Offers `total` datagrams at `rate`/s to 127.0.0.1:`port` from 16 loopback source addresses
 * (127.0.1.1–127.0.1.16), in bounded bursts; `request(i)` is the i-th datagram and `onReply` sees every reply.
 * Returns what was sent, how long sending took, and the CPU time process `pid` used from the first send until
 * 300 ms after the last.
 */
export async function offerLoad(o: {
  port: number;
  pid: number;
  rate: number;
  total: number;
  request: (i: number) => Buffer;
  onReply: (m: Buffer) => void;
}): Promise<{ sent: number; sendMs: number; cpuUs: number }> {
  const sockets: Socket[] = [];
  for (let i = 0; i < 16; i++) {
    const s = createSocket('udp4');
    s.on('message', o.onReply);
    await new Promise<void>((r) => s.bind(0, `127.0.1.${i + 1}`, r));
    try {
      s.setRecvBufferSize(4 * 1024 * 1024);
    } catch {
      /* capped by the kernel */
    }
    sockets.push(s);
  }
  const cpu0 = cpuTicks(o.pid);
  const start = performance.now();
  let sent = 0;
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      const elapsed = performance.now() - start;
      const due = Math.min(o.total, Math.floor((o.rate * elapsed) / 1000));
      // Bounded burst per turn so replies get processed between bursts.
      const upto = Math.min(due, sent + 64);
      while (sent < upto) {
        sockets[sent % sockets.length]!.send(o.request(sent), o.port, '127.0.0.1');
        sent++;
      }
      if (sent >= o.total) resolve();
      else setImmediate(pump);
    };
    pump();
  });
  const sendMs = performance.now() - start;
  await new Promise((r) => setTimeout(r, 300));
  const cpu1 = cpuTicks(o.pid);
  for (const s of sockets) s.close();
  return { sent, sendMs, cpuUs: ((cpu1 - cpu0) / CLK_TCK) * 1e6 };
}
