/**
 * Reads the totals and the failed tests back from the TAP file that node:test writes (`--test-reporter=tap`).
 * The totals are node:test's own closing `# pass N` / `# fail N` / ... lines; a failed test is a `not ok` line
 * whose YAML block does not say `failureType: 'subtestsFailed'` (a parent that failed only through its
 * children), named with its location, for a test process that died the signal, and the first lines of its
 * error (at most ERROR_CHARS), so that a CI log that shows only the summary still says why.
 */
const ERROR_CHARS = 600;

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
    const error: string[] = [];
    let inError = false;
    for (let j = i + 1; j < lines.length; j++) {
      const l = lines[j] ?? '';
      const lead = l.length - l.trimStart().length;
      if (l.trim() !== '' && lead < indent) break;
      if (inError && (l.trim() === '' || lead > indent)) {
        if (l.trim() !== '') error.push(l.trim());
        continue;
      }
      inError = false;
      const kv = /^\s*(location|failureType|signal|exitCode|error): (.*)$/.exec(l);
      if (!kv?.[1] || kv[2] === undefined || lead !== indent || block.has(kv[1])) continue;
      if (kv[1] === 'error' && /^[|>][-+]?$/.test(kv[2])) inError = true;
      block.set(kv[1], kv[2].replace(/^'|'$/g, ''));
      if (kv[1] === 'error' && !inError) error.push(block.get('error') ?? '');
    }
    if (block.get('failureType') === 'subtestsFailed') continue;
    let where = block.get('location') ?? '';
    if (stripPrefix && where.startsWith(stripPrefix)) where = where.slice(stripPrefix.length);
    const signal = block.get('signal');
    const why = error.join(' / ');
    failures.push(
      `${name}${where ? ` (${where})` : ''}${signal && signal !== '~' ? ` killed by ${signal}` : ''}` +
        (why ? `\n      ${why.length > ERROR_CHARS ? `${why.slice(0, ERROR_CHARS)}…` : why}` : ''),
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
