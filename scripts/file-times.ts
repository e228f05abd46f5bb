/**
 * Where a test run's wall time goes, per file: `readFileTimes` adds up the lines scripts/file-times-reporter.mjs
 * writes (one per top-level test) per file, longest first: what the file's tests took, its import and
 * process start left out.
 */
export interface FileTime {
  file: string;
  seconds: number;
}

/** The reporter's lines summed per file, paths relative to `stripPrefix`, longest first; bad lines ignored. */
export function readFileTimes(text: string, stripPrefix = ''): FileTime[] {
  const ms = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof entry !== 'object' || entry === null) continue;
    const { file, ms: took } = entry as { file?: unknown; ms?: unknown };
    if (typeof file !== 'string' || typeof took !== 'number') continue;
    const name = stripPrefix && file.startsWith(stripPrefix) ? file.slice(stripPrefix.length) : file;
    ms.set(name, (ms.get(name) ?? 0) + took);
  }
  return [...ms]
    .map(([file, took]) => ({ file, seconds: took / 1000 }))
    .sort((a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file));
}
