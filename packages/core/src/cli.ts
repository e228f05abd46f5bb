import { parseArgs } from 'node:util';

/**
 * Tiny sub-command CLI helper shared by the service binaries: `<bin> <command> [--flags]`.
 * Each command declares its flags; `--help` prints usage. Unknown flags are an error, not ignored.
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

export function usage(bin: string, description: string, commands: Record<string, CliCommand>): string {
  const lines = [`${bin}: ${description}`, '', `Usage: ${bin} <command> [options]`, '', 'Commands:'];
  for (const [name, cmd] of Object.entries(commands)) {
    lines.push(`  ${name}${cmd.positionals ? ' ' + cmd.positionals : ''}`.padEnd(34) + cmd.summary);
    for (const [opt, spec] of Object.entries(cmd.options ?? {})) {
      lines.push(`      --${opt}${spec.type === 'string' ? ' <value>' : ''}`.padEnd(34) + spec.description);
    }
  }
  lines.push('', `Run "${bin} help" for this text.`);
  return lines.join('\n');
}

export async function runCli(
  bin: string,
  description: string,
  commands: Record<string, CliCommand>,
  argv: string[] = process.argv.slice(2),
  defaultCommand?: string,
): Promise<void> {
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
