/**
 * deploy/prometheus/: the alerting rules pass `promtool check rules`, their unit tests pass
 * `promtool test rules` (Debian's prometheus package), every rule has a case that fires and one that stays
 * silent, the tests bite (a rule with a loosened threshold fails them), and every toolkit metric a rule or the
 * Grafana dashboard reads is one a service registers.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { repoRoot, requireTool, tempDir } from '@broadcast-ops/core/testing';

const dir = join(repoRoot, 'deploy', 'prometheus');
const RULES = 'broadcast-ops.rules.yml';
const TESTS = 'broadcast-ops.rules.test.yml';

interface RuleFile {
  groups: { name: string; rules: { alert?: string; expr: string }[] }[];
}
interface TestFile {
  tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
}

function promtool(args: string[], cwd: string): { status: number | null; out: string } {
  const r = spawnSync(requireTool('promtool'), args, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

test('promtool check rules, check config (the example scrape configuration) and test rules pass', () => {
  const check = promtool(['check', 'rules', RULES], dir);
  assert.equal(check.status, 0, check.out);
  assert.match(check.out, /SUCCESS: \d+ rules found/);
  const config = promtool(['check', 'config', 'prometheus.example.yml'], dir);
  assert.equal(config.status, 0, config.out);
  const unit = promtool(['test', 'rules', TESTS], dir);
  assert.equal(unit.status, 0, unit.out);
  assert.match(unit.out, /SUCCESS/);
});

test('every alert has at least one firing and one silent case', () => {
  const rules = parse(readFileSync(join(dir, RULES), 'utf8')) as RuleFile;
  const tests = parse(readFileSync(join(dir, TESTS), 'utf8')) as TestFile;
  const alerts = rules.groups.flatMap((g) => g.rules.map((r) => r.alert).filter((a): a is string => !!a));
  assert.ok(alerts.length >= 9, alerts.join());
  const cases = tests.tests.flatMap((t) => t.alert_rule_test ?? []);
  for (const alert of alerts) {
    const mine = cases.filter((c) => c.alertname === alert);
    assert.ok(
      mine.some((c) => (c.exp_alerts ?? []).length > 0),
      `${alert}: no case where it fires`,
    );
    assert.ok(
      mine.some((c) => (c.exp_alerts ?? []).length === 0),
      `${alert}: no case where it stays silent`,
    );
  }
});

test('the unit tests fail when a rule is loosened or tightened (they check the thresholds)', () => {
  const original = readFileSync(join(dir, RULES), 'utf8');
  const mutations: [string, string][] = [
    ['timesvc_clock_estimated_error_seconds > 0.001', 'timesvc_clock_estimated_error_seconds > 0.01'],
    ['{queue="commands_inflight"} > 80', '{queue="commands_inflight"} > 95'],
    [
      '        for: 30s\n        labels:\n          severity: critical',
      '        for: 2m\n        labels:\n          severity: critical',
    ],
    ['up{job=~"punch|', 'up{job=~"node|punch|'],
  ];
  for (const [from, to] of mutations) {
    assert.ok(original.includes(from), from);
    const tmp = tempDir('rules-mutant-');
    try {
      writeFileSync(join(tmp.path, RULES), original.replace(from, to));
      copyFileSync(join(dir, TESTS), join(tmp.path, TESTS));
      const r = promtool(['test', 'rules', TESTS], tmp.path);
      assert.notEqual(r.status, 0, `the tests still pass with ${to}`);
      assert.match(r.out, /FAILED/);
    } finally {
      tmp.remove();
    }
  }
});

/** Every metric name registered with prom-client (`name: '...'`) under packages/<pkg>/src. */
function registeredMetrics(): Set<string> {
  const names = new Set<string>();
  for (const pkg of readdirSync(join(repoRoot, 'packages'))) {
    const src = join(repoRoot, 'packages', pkg, 'src');
    let files: string[];
    try {
      files = readdirSync(src, { recursive: true }) as string[];
    } catch {
      continue;
    }
    for (const f of files.filter((x) => x.endsWith('.ts'))) {
      for (const m of readFileSync(join(src, f), 'utf8').matchAll(/name: '([a-z_]+)'/g))
        names.add(m[1] ?? '');
    }
  }
  return names;
}

test('every toolkit metric in the rules and the dashboard is registered by a service', () => {
  const registered = registeredMetrics();
  const text =
    readFileSync(join(dir, RULES), 'utf8') +
    readFileSync(join(repoRoot, 'deploy', 'grafana', 'broadcast-ops.json'), 'utf8');
  const used = new Set(
    [...text.matchAll(/\b((?:timesvc|telemetry_bridge|punch|playout_monitor|broadcast_ops)_[a-z_]+)/g)].map(
      (m) => (m[1] ?? '').replace(/_(bucket|sum|count)$/, ''),
    ),
  );
  assert.ok(used.size >= 10, [...used].join());
  const missing = [...used].filter((n) => !registered.has(n));
  assert.deepEqual(missing, [], 'metrics no service registers');
  // Label values the rules match on are the ones the services write.
  const bridgeAdapter = readFileSync(
    join(repoRoot, 'packages/telemetry-bridge/src/io/companion/adapter.ts'),
    'utf8',
  );
  const adapters = [...text.matchAll(/adapter=\\?"([^"\\]+)\\?"/g)];
  assert.ok(adapters.length >= 2, 'the rules and the dashboard match on the Companion adapter');
  for (const m of adapters)
    assert.ok(bridgeAdapter.includes(`readonly name = '${m[1] ?? ''}'`), `adapter label ${m[1]}`);
});
