// A node:test reporter (plain JavaScript: Node 20 loads reporters before any --import hook, so not through
// tsx) writing one JSON line per top-level test, {"file", "ms"}, from the runner's test:pass / test:fail
// events; node:test's TAP names a file only for failures. scripts/file-times.ts reads the lines back.
export default async function* fileTimesReporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details } = event.data;
    if (nesting !== 0 || file === undefined || details?.duration_ms === undefined) continue;
    yield JSON.stringify({ file, ms: details.duration_ms }) + '\n';
  }
}
