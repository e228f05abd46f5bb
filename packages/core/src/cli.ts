import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';

/**
 * Tiny sub-command CLI helper shared by the service binaries: `<bin> <command> [--flags]`.
 * Each command declares its flags; `--help` prints usage, `--version` the package version (both exit 0).
 * Unknown flags are an error, not ignored.
 */
export interface CliCommand {
  summary: string;
  options?: Record<
    string,
    { type: 'string' | 'boolean'; short?: string; description: string; multiple?: boolean }
  >;
  positionals?: string;
  run: (args: {
    values: Record<string, string | boolean | (string | boolean)[] | undefined>;
    positionals: string[];
  }) => Promise<void> | void;
}

/** Help text width: fits an 80-column terminal. */
export const HELP_WIDTH = 80;
const LABEL_WIDTH = 30;

/** `words` wrapped to `width` columns, every line after the first indented by `indent` spaces. */
function wrap(words: string, firstLine: string, indent: number, width = HELP_WIDTH): string[] {
  const lines: string[] = [];
  let line = firstLine;
  for (const word of words.split(/\s+/).filter(Boolean)) {
    const sep = line.trim() === '' || line.endsWith(' ') ? '' : ' ';
    if (line.length + sep.length + word.length > width && line.trim() !== '') {
      lines.push(line.trimEnd());
      line = ' '.repeat(indent) + word;
    } else {
      line += sep + word;
    }
  }
  lines.push(line.trimEnd());
  return lines;
}

/** One help row: the label, then the text in a column; a label too wide for the column gets its own line. */
function row(label: string, text: string): string[] {
  if (label.length + 2 > LABEL_WIDTH) return [label, ...wrap(text, ' '.repeat(LABEL_WIDTH), LABEL_WIDTH)];
  return wrap(text, label.padEnd(LABEL_WIDTH), LABEL_WIDTH);
}

export function usage(bin: string, description: string, commands: Record<string, CliCommand>): string {
  const lines = [
    ...wrap(description, `${bin}:`, 2),
    '',
    `Usage: ${bin} <command> [options]`,
    '',
    'Commands:',
  ];
  for (const [name, cmd] of Object.entries(commands)) {
    lines.push(...row(`  ${name}${cmd.positionals ? ' ' + cmd.positionals : ''}`, cmd.summary));
    for (const [opt, spec] of Object.entries(cmd.options ?? {})) {
      const flag = `${spec.short ? `-${spec.short}, ` : ''}--${opt}${spec.type === 'string' ? ' <value>' : ''}`;
      lines.push(...row(`      ${flag}`, spec.description));
    }
  }
  lines.push(
    '',
    ...row('  -h, --help', 'this text (also: help)'),
    ...row('      --version', 'print the version and exit'),
  );
  return lines.join('\n');
}

/**
 * The version of the package whose bin is running: the nearest package.json above the script Node was
 * started with (symlinks such as node_modules/.bin resolved), so every CLI answers `--version` the same way.
 */
export function packageVersion(script: string | undefined = process.argv[1]): string | undefined {
  if (script === undefined) return undefined;
  let dir: string;
  try {
    dir = dirname(realpathSync(script));
  } catch {
    return undefined;
  }
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const v = (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;
        return typeof v === 'string' ? v : undefined;
      } catch {
        return undefined;
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

export async function runCli(
  bin: string,
  description: string,
  commands: Record<string, CliCommand>,
  argv: string[] = process.argv.slice(2),
  defaultCommand?: string,
  options: { version?: string } = {},
): Promise<void> {
  if (argv.includes('--version')) {
    process.stdout.write(`${bin} ${options.version ?? packageVersion() ?? 'unknown'}\n`);
    return;
  }
  const first = argv[0];
  const explicit = first !== undefined && !first.startsWith('-');
  const name = explicit ? first : defaultCommand;
  if (name === undefined || name === 'help' || argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage(bin, description, commands) + '\n');
    return;
  }
  const cmd = commands[name];
  if (!cmd) {
    process.stderr.write(`${bin}: unknown command "${name}"\n\n${usage(bin, description, commands)}\n`);
    process.exitCode = 2;
    return;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: explicit ? argv.slice(1) : argv,
      options: Object.fromEntries(
        Object.entries(cmd.options ?? {}).map(([k, v]) => [
          k,
          { type: v.type, ...(v.short ? { short: v.short } : {}), ...(v.multiple ? { multiple: true } : {}) },
        ]),
      ),
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    process.stderr.write(`${bin} ${name}: ${(err as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  await cmd.run({ values: parsed.values, positionals: parsed.positionals });
}
