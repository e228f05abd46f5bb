/**
 * docs/guides/serve-time.md, walked step by step on what a clone builds (`npm ci` runs scripts/build.mjs):
 * every command the guide gives is taken from the guide's text and run as typed (`npx timesvc …`, on plain
 * node, no TypeScript loader), with only the address of the service started by the test put in, so a guide
 * that drifts from the code fails here. Ports are ephemeral (port 0 in a copy of the config, read back from
 * the service's start-up log line); the demo's fixed ports are checked against the guide, not bound.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readConfigFile } from '@broadcast-ops/core';
import { repoRoot, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { chronyQuery, makeCertificate } from '@broadcast-ops/timesvc/testing';
import {
  argv,
  endAll,
  ensureBuilt,
  getJson,
  inlineMatching,
  notInClone,
  keyPaths,
  logLine,
  readGuide,
  repoPaths,
  runCommand,
  startCommand,
  type Service,
} from '../guides/helpers.ts';

const guide = readGuide('serve-time.md');

interface TimesvcStarted {
  service: Service;
  ntpPort: number;
  web: string;
}

/** `npx timesvc --config <file>` (what npm start runs, package.json toolkit.start), ports from its log. */
async function startTimesvc(
  config: string,
  services: Service[],
  command = ['npx', 'timesvc', '--config', config],
): Promise<TimesvcStarted> {
  const service = startCommand(command);
  services.push(service);
  const started = await logLine(service, /timesvc started/);
  const ntp = started['ntp'] as { port: number }[];
  return { service, ntpPort: ntp[0]?.port ?? 0, web: String(started['web']) };
}

/** A JSON copy of a YAML config with some keys set (the service reads YAML or JSON). */
function copyWith(
  from: string,
  to: string,
  edit: (c: Record<string, Record<string, unknown>>) => void,
): string {
  const c = readConfigFile(join(repoRoot, from)) as Record<string, Record<string, unknown>>;
  edit(c);
  writeFileSync(to, JSON.stringify(c, null, 2));
  return to;
}

test('guide "Serve time to your studio LAN": every step walked against timesvc', async (t) => {
  await ensureBuilt();
  const tmp = tempDir('guide-serve-time-');
  const services: Service[] = [];
  try {
    await t.test('the files the guide names are in a fresh clone (tracked by git)', () => {
      const paths = repoPaths(guide);
      assert.ok(paths.length > 0, 'the guide names files');
      assert.deepEqual(notInClone(paths), []);
    });

    let demo: TimesvcStarted | undefined;

    await t.test(
      'step 1: the demo serves NTP at the stratum the guide says; query and chrony answer',
      async () => {
        const step = guide.step(1);
        const query = inlineMatching(guide, step, /^npx timesvc query /);
        const chronyLine = inlineMatching(guide, step, /^server \S+ port \d+ iburst$/);
        const [, host = '', port = ''] = /^npx timesvc query (\S+):(\d+)$/.exec(query) ?? [];
        assert.equal(
          /^server (\S+) port (\d+)/.exec(chronyLine)?.[2],
          port,
          'query and chrony line: one port',
        );
        assert.match(step, new RegExp(`UDP ${port}\\b`));
        // What `npm start` runs (packages/timesvc/package.json toolkit.start) serves on the port the guide names.
        const pkg = JSON.parse(readFileSync(join(repoRoot, 'packages/timesvc/package.json'), 'utf8')) as {
          toolkit: { start: { args: string[] } };
        };
        const demoFile = pkg.toolkit.start.args[pkg.toolkit.start.args.indexOf('--config') + 1] ?? '';
        const demoConfig = readConfigFile(join(repoRoot, demoFile)) as { ntp: { port: number } };
        assert.equal(demoConfig.ntp.port, Number(port), `${demoFile} ntp.port vs the guide`);

        // That demo, with its ports moved to free ones (loopback only).
        const cfg = copyWith(demoFile, join(tmp.path, 'demo.json'), (c) => {
          Object.assign(c['ntp'] ?? {}, { port: 0, interface: '127.0.0.1' });
          Object.assign(c['web'] ?? {}, { port: 0 });
        });
        demo = await startTimesvc(cfg, services);
        const d = demo;
        // The demo's reference needs a moment; the guide's query then shows the stratum the guide states.
        await waitFor(
          async () =>
            ((await getJson(`${d.web}/api/health`)).body as { clock_state: string }).clock_state === 'locked',
          { timeoutMs: 60_000, intervalMs: 500, what: 'timesvc LOCKED' },
        );
        const r = await runCommand(argv(query, { [`${host}:${port}`]: `${host}:${d.ntpPort}` }));
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const stratum = /\(stratum (\d+)\b/.exec(step)?.[1];
        assert.ok(stratum, 'step 1 names the stratum the demo serves');
        assert.match(r.stdout, new RegExp(`\\bstratum ${stratum}\\b`), r.stdout);
        const refid = /refid `(\w+)`/.exec(step)?.[1];
        assert.ok(refid, 'step 1 names the refid the demo serves');
        assert.match(r.stdout, new RegExp(`\\brefid ${refid}\\b`), r.stdout);
        // chrony pointed at it as the guide writes (`chronyd -Q`: measure only, never set the clock).
        const chrony = await chronyQuery(/^server (\S+)/.exec(chronyLine)?.[1] ?? '', d.ntpPort, {
          timeoutS: 20,
          samples: 1,
        });
        assert.equal(chrony.code, 0, chrony.output);
        assert.ok(chrony.offsetS !== undefined, chrony.output);
      },
    );

    const userConfig = join(tmp.path, 'timesvc.yaml');
    await t.test('step 2: the lab example has the keys the guide names and passes check-config', async () => {
      const step = guide.step(2);
      const example = inlineMatching(guide, step, /^config\/\S+\.ya?ml$/);
      // A fresh clone has the file: it is tracked by git, not only present in this checkout.
      execFileSync('git', ['ls-files', '--error-unmatch', example], { cwd: repoRoot, stdio: 'pipe' });
      const parsed = readConfigFile(join(repoRoot, example)) as { ntp: Record<string, unknown> };
      const paths = keyPaths(parsed);
      for (const key of guide.inline(step).filter((c) => /^[a-z_]+(\.[a-z_]+)*$/.test(c))) {
        // Keys named bare (`allowed_networks`) live under ntp; dotted ones are full paths.
        assert.ok(paths.has(key) || paths.has(`ntp.${key}`), `${example} has no ${key}`);
      }
      const peers = parsed.ntp['upstream_peers'] as unknown[];
      assert.ok(peers.length >= 3, 'three or more upstream peers');
      const portLine = inlineMatching(guide, step, /^ntp\.port: \d+$/);
      assert.equal(parsed.ntp['port'], Number(portLine.split(': ')[1]));
      assert.ok(paths.has('ntp.rate_limit'), 'the rate limit');

      // The user's copy, with NTS on one peer as the guide writes it (a YAML edit, as a user makes it).
      const ntsKey = inlineMatching(guide, step, /^\w+: true$/);
      const text = readFileSync(join(repoRoot, example), 'utf8');
      const edited = text.replace(/^( +)- address: (.+)$/m, `$1- address: $2\n$1  ${ntsKey}`);
      assert.notEqual(edited, text);
      writeFileSync(userConfig, edited);
      const check = inlineMatching(guide, step, /^npx timesvc check-config /);
      const r = await runCommand(argv(check, { 'timesvc.yaml': userConfig }));
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const effective = JSON.parse(r.stdout) as { ntp: { upstream_peers: Record<string, unknown>[] } };
      const [k = ''] = ntsKey.split(':');
      assert.equal(effective.ntp.upstream_peers[0]?.[k], true, `${ntsKey} reached the peer`);
      // And a mistyped key is refused, exit 2, naming it (what the guide's check is for).
      const bad = join(tmp.path, 'bad.yaml');
      writeFileSync(bad, text.replace(/^( +)- address: (.+)$/m, `$1- address: $2\n$1  nts_enable: true`));
      const refused = await runCommand(argv(check, { 'timesvc.yaml': bad }));
      assert.equal(refused.code, 2, refused.stdout + refused.stderr);
      assert.match(refused.stderr, /nts_enable/);
    });

    await t.test(
      'step 3: the timesvc unit binds port 123 with CAP_NET_BIND_SERVICE only and conflicts with chrony and ntpsec',
      () => {
        // Not run: starting the unit needs systemd as PID 1 and the host's port 123 (scripts/test/
        // systemd-units.test.ts verifies the unit with systemd-analyze). What the guide promises of it is checked.
        const step = guide.step(3);
        assert.match(step, /`timesvc` unit/);
        const unit = readFileSync(join(repoRoot, 'deploy/systemd/timesvc.service'), 'utf8');
        assert.match(step, /`CAP_NET_BIND_SERVICE` and nothing\s+else/);
        assert.match(unit, /^CapabilityBoundingSet=CAP_NET_BIND_SERVICE$/m);
        assert.match(unit, /^AmbientCapabilities=CAP_NET_BIND_SERVICE$/m);
        assert.match(step, /stop chrony or ntpsec/);
        assert.match(unit, /^Conflicts=.*\bchrony\.service\b.*\bntpsec\.service\b/m);
        assert.match(unit, /--config \/etc\/broadcast-ops\/timesvc\.yaml/);
      },
    );

    await t.test(
      'step 4: NTS with a certificate and key; chrony gets NTS time; a reload re-reads the certificate',
      async () => {
        const step = guide.step(4);
        assert.match(step, /enable `nts` with a certificate and key/);
        const pair = makeCertificate(tmp.path, 'nts', 30);
        const cfg = copyWith('config/timesvc.lab.example.yaml', join(tmp.path, 'nts.json'), (c) => {
          Object.assign(c['ntp'] ?? {}, {
            port: 0,
            interface: '127.0.0.1',
            upstream_peers: [],
            local_stratum: true,
          });
          Object.assign(c['nts'] ?? {}, {
            enabled: true,
            ke_port: 0,
            cert_path: pair.cert,
            key_path: pair.key,
          });
          Object.assign(c['web'] ?? {}, { port: 0, bind_address: '127.0.0.1' });
        });
        // Without the certificate the check refuses it, naming nts (exit 2, as a unit start would).
        const noCert = copyWith('config/timesvc.lab.example.yaml', join(tmp.path, 'nts-nocert.json'), (c) => {
          Object.assign(c['nts'] ?? {}, { enabled: true });
        });
        const refused = await runCommand(['npx', 'timesvc', 'check-config', '--config', noCert]);
        assert.equal(refused.code, 2, refused.stdout + refused.stderr);
        assert.match(refused.stderr, /\bnts\b/);
        // Started as the unit starts it (its ExecStart, from this checkout), so the process is the service's
        // MAINPID and `systemctl reload`'s signal can be sent to it as systemd would.
        const unit = readFileSync(join(repoRoot, 'deploy/systemd/timesvc.service'), 'utf8');
        const execStart = (/^ExecStart=(.+)$/m.exec(unit)?.[1] ?? '')
          .split(' ')
          .map((w) =>
            w === '/usr/bin/node'
              ? process.execPath
              : w === '/etc/broadcast-ops/timesvc.yaml'
                ? cfg
                : w.replace(/^\/opt\/broadcast-ops\//, `${repoRoot}/`),
          );
        assert.deepEqual(execStart.slice(1), [
          join(repoRoot, 'packages/timesvc/dist/start.cjs'),
          'serve',
          '--config',
          cfg,
        ]);
        const nts = await startTimesvc(cfg, services, execStart);
        const ke = await logLine(nts.service, /NTS-KE listening/);
        const kePort = Number(ke['port']);
        assert.ok(kePort > 0, 'NTS-KE port');
        // A chrony client as the guide says (`server <host> nts`), trusting the test's own certificate.
        const clientLine = inlineMatching(guide, step, /^server <host> nts$/);
        const chrony = await runCommand(
          [
            'chronyd',
            '-Q',
            '-u',
            'root',
            '-t',
            '30',
            '-f',
            '/dev/null',
            `${clientLine.replace('<host>', '127.0.0.1')} ntsport ${kePort} iburst maxsamples 1`,
            `ntstrustedcerts ${pair.cert}`,
            'nocerttimecheck 1',
            `ntsdumpdir ${tmp.path}`,
            'bindcmdaddress /',
            'cmdport 0',
          ],
          { timeoutMs: 60_000 },
        );
        assert.equal(chrony.code, 0, chrony.stdout + chrony.stderr);
        assert.match(chrony.stdout + chrony.stderr, /System clock wrong by -?[\d.]+ seconds/);
        // `systemctl reload timesvc` is the unit's ExecReload: SIGHUP to the service, which re-reads the pair.
        assert.match(step, /`systemctl reload timesvc` re-reads a renewed certificate/);
        assert.match(unit, /^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
        const renewed = makeCertificate(tmp.path, 'nts', 90); // renewed in place: same paths, new validity
        const expires = new Date(new X509Certificate(readFileSync(renewed.cert)).validTo).toISOString();
        // setsid execs node itself: the child is the service (MAINPID).
        process.kill(nts.service.child.pid ?? 0, 'SIGHUP');
        await nts.service.waitForOutput(/NTS-KE certificate (re)?load/, 30_000);
        const reloaded = await logLine(nts.service, /NTS-KE certificate loaded/);
        assert.equal(reloaded['trigger'], 'SIGHUP');
        assert.equal(reloaded['expires'], expires, 'the renewed certificate is the one in use');
      },
    );

    await t.test('step 5: pointing the clients at it is done on the clients (prose)', () => {
      // Not walked here: chrony, Windows' w32tm and devices' own NTP settings are configured on other machines.
      // chrony's `server … iburst` against timesvc is walked in step 1, `timesvc query` from a client in step 6.
      const step = guide.step(5);
      assert.match(step, /chrony `server <timesvc host> iburst`/);
    });

    await t.test(
      'step 6: /api/health LOCKED, timesvc_* metrics, query shows offset and stratum',
      async () => {
        const step = guide.step(6);
        assert.ok(demo, 'the demo service of step 1');
        const d = demo;
        const healthPath = inlineMatching(guide, step, /^GET \/api\/health$/).slice(4);
        const state = /state (\w+) once disciplined/.exec(step)?.[1] ?? '';
        const health = await getJson(`${d.web}${healthPath}`);
        assert.equal(health.status, 200);
        assert.equal((health.body as { clock_state: string }).clock_state.toUpperCase(), state);
        const metrics = await (await fetch(`${d.web}/metrics`)).text();
        const prefix = inlineMatching(guide, step, /^\w+_\*$/).slice(0, -1);
        assert.match(metrics, new RegExp(`^${prefix}\\w+`, 'm'));
        const query = inlineMatching(guide, step, /^npx timesvc query <host>$/);
        const r = await runCommand(argv(query, { '<host>': `127.0.0.1:${d.ntpPort}` }));
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.match(r.stdout, /\boffset [+-]?\d/);
        assert.match(r.stdout, /\bstratum \d+/);
      },
    );
  } finally {
    await endAll(services);
    tmp.remove();
  }
});
