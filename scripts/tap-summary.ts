/**
 * Reads the totals and the failed tests back from the TAP file that node:test writes (`--test-reporter=tap`).
 * The totals are node:test's own closing `# pass N` / `# fail N` / ... lines; a failed test is a `not ok` line
 * whose YAML block does not say `failureType: 'subtestsFailed'` (a parent that failed only through its
 * children), named with its location and, for a test process that died, the signal.
 */
export interface TapSummary {
  passed: number;
  /** Failed plus cancelled (a cancelled test did not finish: a timeout or its process died). */
  failed: number;
  skipped: number;
  todo: number;
  failures: string[];
}

export function readTapSummary(tap: string, stripPrefix = ''): TapSummary | null {
  const lines = tap.split('\n');
  const totals = new Map<string, number>();
  const failures: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const total = /^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(line);
    if (total?.[1] && total[2]) totals.set(total[1], Number(total[2]));
    const notOk = /^(\s*)not ok \d+ - (.*)$/.exec(line);
    if (!notOk) continue;
    const name = notOk[2] ?? '';
    if (/ # TODO\b/.test(name)) continue;
    const indent = (notOk[1] ?? '').length + 2;
    const block = new Map<string, string>();
    for (let j = i + 1; j < lines.length; j++) {
      const l = lines[j] ?? '';
      const lead = l.length - l.trimStart().length;
      if (l.trim() !== '' && lead < indent) break;
      const kv = /^\s*(location|failureType|signal|exitCode): (.*)$/.exec(l);
      if (kv?.[1] && kv[2] && lead === indent && !block.has(kv[1]))
        block.set(kv[1], kv[2].replace(/^'|'$/g, ''));
    }
    if (block.get('failureType') === 'subtestsFailed') continue;
    let where = block.get('location') ?? '';
    if (stripPrefix && where.startsWith(stripPrefix)) where = where.slice(stripPrefix.length);
    const signal = block.get('signal');
    failures.push(
      `${name}${where ? ` (${where})` : ''}${signal && signal !== '~' ? ` killed by ${signal}` : ''}`,
    );
  }
  if (!totals.has('pass') || !totals.has('fail')) return null;
  return {
    passed: totals.get('pass') ?? 0,
    failed: (totals.get('fail') ?? 0) + (totals.get('cancelled') ?? 0),
    skipped: totals.get('skipped') ?? 0,
    todo: totals.get('todo') ?? 0,
    failures,
  };
}
